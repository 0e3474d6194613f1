"""The server's configuration file: which models it serves, and how each is loaded and decodes.

Configuration (JSON, OpenNMT-py's ``conf.json`` shape)::

    {"models_root": "runs",
     "models": [{"id": 100, "model": "fr-en/model_best.pt", "load": true, "timeout": 600,
                 "opt": {"beam_size": 5, "block_ngram_repeat": 3}}]}

``model`` is read under ``models_root`` (the configuration file's folder by default): a checkpoint, or a
directory onmt_cont_convert wrote (decoded by CTranslate2; ``"opt": {"engine": "ctranslate2"}`` says so too);
``opt`` holds ``onmt_cont.load()``'s keywords (translate.py's flag names work too); ``timeout`` (seconds, -1: never)
unloads a model idle that long; ``load`` false loads it on its first request. A request names a model only by
its id: no request can make the server read another file."""

import json
import math
import os

from onmt_cont.serve.models import ModelEntry
from onmt_cont.translate.ct2 import is_export
from onmt_cont.utils.errors import UserError


def read_config(path):
    """The configuration file -> {id: ModelEntry}; every error names the file and the entry."""
    try:
        with open(path, encoding="utf-8") as f:
            conf = json.load(f)
    except UnicodeDecodeError as exc:
        raise UserError(
            f"-config {path}: not UTF-8 text (byte {exc.object[exc.start : exc.start + 1]!r}: {exc.reason})"
        ) from None
    except RecursionError:
        raise UserError(f"-config {path}: not JSON (nested too deep)") from None
    except OSError as exc:
        raise UserError(f"-config {path}: cannot read it ({(exc.strerror or str(exc)).lower()})") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"-config {path}: not JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(conf, dict) or not isinstance(conf.get("models"), list) or not conf["models"]:
        raise UserError(f'-config {path}: expected {{"models": [{{"id": N, "model": "PATH"}}, ...]}}')
    root = conf.get("models_root", os.path.dirname(os.path.abspath(path)))
    if not isinstance(root, str):
        raise UserError(f"-config {path}: models_root must be a folder's path")
    root = os.path.join(os.path.dirname(os.path.abspath(path)), root)
    entries = {}
    for i, m in enumerate(conf["models"]):
        where = f"-config {path}, models[{i}]"
        if not isinstance(m, dict):
            raise UserError(f'{where}: expected {{"id": N, "model": "PATH", ...}}')
        m = dict(m)
        if "models" in m:  # OpenNMT-py's ensemble: "models": [A, B, ...], decoded together
            if (
                "model" in m
                or not isinstance(m["models"], list)
                or not m["models"]
                or not all(isinstance(x, str) for x in m["models"])
            ):
                raise UserError(f'{where}: "models" (an ensemble) must be a non-empty list of paths, without "model"')
            m["model"], others = m["models"][0], m["models"][1:]
            del m["models"]
        else:
            others = []
        if not isinstance(m.get("model"), str):
            raise UserError(f'{where}: expected {{"id": N, "model": "PATH", ...}}')
        mid = m.get("id", i)
        if not isinstance(mid, int) or isinstance(mid, bool) or mid in entries:
            raise UserError(f'{where}: "id" must be an integer of its own, got {mid!r}')
        opt = dict(m.get("opt", {})) if isinstance(m.get("opt", {}), dict) else m.get("opt")
        timeout = m.get("timeout", -1)
        if not isinstance(opt, dict) or not isinstance(timeout, (int, float)) or isinstance(timeout, bool):
            raise UserError(f'{where}: "opt" must be an object and "timeout" a number of seconds (-1: never)')
        if not math.isfinite(timeout) or (timeout < 0 and timeout != -1):
            raise UserError(f'{where}: "timeout" must be a number of seconds, or -1 (never), got {timeout!r}')
        if not isinstance(m.get("name", ""), str) or m.get("on_timeout", "unload") not in ("unload", "to_cpu"):
            raise UserError(f'{where}: "name" must be a string and "on_timeout" "unload" or "to_cpu"')
        if not isinstance(m.get("load", True), bool):
            raise UserError(f'{where}: "load" must be true or false, got {m["load"]!r}')
        unknown = set(m) - {"id", "model", "opt", "timeout", "load", "on_timeout", "name", "tokenizer"}
        if unknown:
            raise UserError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        n_best = opt.pop("n_best", 1)  # OpenNMT-py's "opt": {"n_best": K}: each request's default
        report_align = opt.pop("report_align", False)  # answers carry "align", as OpenNMT-py's
        if not isinstance(report_align, bool):
            raise UserError(f'{where}: "opt": "report_align" must be true or false, got {report_align!r}')
        if isinstance(n_best, bool) or not isinstance(n_best, int) or n_best < 1:
            raise UserError(f'{where}: "opt": "n_best" must be a positive whole number, got {n_best!r}')
        if "tokenizer" in m:
            opt.update(_tokenizer(m["tokenizer"], root, where))
        paths = []
        for name in [m["model"], *others]:
            path = os.path.join(root, name)
            if not (os.path.isfile(path) or is_export(path)):
                raise UserError(f"{where}: {path}: no such file (a checkpoint, or a directory onmt_cont_convert wrote)")
            paths.append(path)
        if others:
            opt["ensemble"] = paths[1:]
        entries[mid] = ModelEntry(
            mid,
            paths[0],
            opt,
            float(timeout),
            bool(m.get("load", True)),
            on_timeout=m.get("on_timeout", "unload"),
            n_best=n_best,
            report_align=report_align,
        )
    return entries


def _tokenizer(conf, root, where):
    """OpenNMT-py's "tokenizer" section -> load()'s keywords: one tokenizer for both sides, or {"src": ...,
    "tgt": ...} (one side may be left out). SentencePiece (its model cuts the source and joins the output) is
    honoured; pyonmttok is refused by name: onmt_cont reads Moses-tokenized text (a checkpoint records its own) or
    SentencePiece pieces, and a tokenizer the model was not trained with would feed it unseen tokens."""
    if isinstance(conf, dict) and set(conf) and set(conf) <= {"src", "tgt"}:
        return {f"{side}_spm": _spm_of(conf[side], root, where) for side in ("src", "tgt") if side in conf}
    path = _spm_of(conf, root, where)
    return {"src_spm": path, "tgt_spm": path}


def _spm_of(conf, root, where):
    expected = '{"type": "sentencepiece", "model": "PATH"}'
    if not isinstance(conf, dict) or not isinstance(conf.get("type"), str):
        raise UserError(f'{where}: "tokenizer" must be {expected} (or {{"src": ..., "tgt": ...}})')
    if conf["type"] == "pyonmttok":
        raise UserError(
            f'{where}: "tokenizer": pyonmttok is not supported: onmt_cont models read Moses-tokenized '
            "text (a checkpoint that records its preprocessing applies it itself) or SentencePiece pieces "
            '("type": "sentencepiece")'
        )
    if conf["type"] != "sentencepiece" or not isinstance(conf.get("model"), str) or set(conf) - {"type", "model"}:
        raise UserError(f'{where}: "tokenizer" must be {expected}, got {conf!r:.120}')
    return os.path.join(root, conf["model"])
