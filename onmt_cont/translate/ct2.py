"""CTranslate2 as a second engine: decoding a folder onmt_cont_convert wrote (:class:`Ct2Translator`,
translate.py -engine ctranslate2, the API's and the server's ``engine``), and reading that folder's record
(:func:`read_record`: every value and every file's sha256 checked). The export itself is onmt_cont/export/ct2.py."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from types import ModuleType, SimpleNamespace
from typing import Any, NoReturn

import torch
from torch import Tensor

from onmt_cont.constants import UNK_ID
from onmt_cont.inputters.vocab import Vocab
from onmt_cont.text.record import check_text_record
from onmt_cont.translate.base import BaseTranslator
from onmt_cont.translate.beam import coverage_penalty
from onmt_cont.translate.config import DecodingConfig
from onmt_cont.translate.report import alignment
from onmt_cont.translate.search import length_limits
from onmt_cont.translate.unk import replace_unk
from onmt_cont.utils.errors import UserError, printable

CONFIG_NAME = "onmt_cont.json"  # beside CTranslate2's model.bin: what translate.py needs besides the weights
CRITERIA = ("vmf", "l2")  # the continuous criteria an export decodes exactly (cosine is refused at conversion)
POSITIONS = 2048  # rows of each side's position table: no longer source is read, no longer output written


def _ctranslate2() -> ModuleType:
    try:
        import ctranslate2
    except ImportError:
        raise UserError("CTranslate2 is not installed: pip install ctranslate2") from None
    return ctranslate2


def _from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"base64"}:
            return base64.b64decode(value["base64"])
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


def is_export(path: str) -> bool:
    """Whether ``path`` is a directory :func:`convert` wrote."""
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, CONFIG_NAME))


def read_record(path: str) -> tuple[dict[str, Any], Vocab, Vocab]:
    """An export's onmt_cont.json, checked -> (record, source Vocab, target Vocab). Every value has the type
    convert() wrote, and every file it lists still has the sha256 recorded then: an export edited or damaged
    afterwards is a UserError naming the file, not CTranslate2's traceback or silently other output."""

    def bad(what: str) -> NoReturn:
        raise UserError(f"-model {path}: not a model onmt_cont_convert wrote ({CONFIG_NAME}: {what})")

    try:
        with open(os.path.join(path, CONFIG_NAME), encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError, RecursionError) as exc:
        bad(printable(exc))
    if not isinstance(record, dict):
        bad(f"expected a mapping, got {type(record).__name__}")
    try:
        src, tgt = Vocab.from_dict(record["src_vocab"]), Vocab.from_dict(record["tgt_vocab"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        bad(f"its vocabularies: {printable(exc)}")
    if record.get("format") != 1:
        bad(f"format {record.get('format')!r}: this onmt_cont reads format 1")
    types: dict[str, type | tuple[type, ...]] = {
        "continuous": bool,
        "lower": bool,
        "positions": int,
        "decode_prior": (int, float),
        "decode_prior_cap": int,
        "beam_temperature": (int, float),
        "quantization": str,
    }
    for key, kind in types.items():
        value = record.get(key)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            bad(f"{key} is {value!r}")
    if record["positions"] < 1 or not all(math.isfinite(record[k]) for k in ("decode_prior", "beam_temperature")):
        bad("positions must be at least 1, decode_prior and beam_temperature finite")
    layers = record.get("decoder_layers", 1)
    if not isinstance(layers, int) or isinstance(layers, bool) or layers < 1:
        bad(f"decoder_layers is {layers!r}")
    align = record.get("alignment_layer")
    if not (align is None or align == "mean" or (isinstance(align, int) and not isinstance(align, bool))):
        bad(f"alignment_layer is {align!r}")
    if record["continuous"] and record.get("criterion") not in CRITERIA:
        bad(f"criterion {record.get('criterion')!r}: expected one of {', '.join(CRITERIA)}")
    check_text_record(_from_json(record.get("text")), f"-model {path}")
    files = record.get("files", {})  # exports before the checksums have none
    if not isinstance(files, dict):
        bad("files is not a mapping")
    for name, digest in files.items():
        if os.path.basename(name) != name or not isinstance(digest, str):
            bad(f"files lists {name!r}")
        try:
            actual = _sha256(os.path.join(path, name))
        except OSError as exc:
            raise UserError(
                f"-model {path}: {name}: cannot read it ({(exc.strerror or str(exc)).lower()}): convert "
                "the checkpoint again"
            ) from None
        if actual != digest:
            raise UserError(
                f"-model {path}: {name} was changed or damaged after onmt_cont_convert wrote it (its "
                "sha256 is not the one recorded): convert the checkpoint again"
            )
    for side, vocab in (("source", src), ("target", tgt)):  # onmt_cont.json's vocabularies are CTranslate2's
        name = f"{side}_vocabulary.json"
        if name in files:
            try:
                with open(os.path.join(path, name), encoding="utf-8") as f:
                    same = json.load(f) == vocab.itos
            except (OSError, ValueError):
                same = False
            if not same:
                bad(f"its {side} vocabulary is not {name}'s: one of them was edited after the conversion")
    return record, src, tgt


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Ct2Translator(BaseTranslator):
    """:class:`Translator`'s interface over a :func:`convert` directory, decoding with CTranslate2:
    greedy and beam search (OpenNMT-py's length normalisation, -length_penalty avg or none), -n_best,
    -with_score, -block_ngram_repeat, -ban_unk_token, random sampling, -tgt_prefix (also under beam
    search), -replace_unk, -report_align and -attn_debug (the attention of the exported alignment layer,
    every head averaged). ``engine``: CTranslate2's translator of the export; ``record``: the export's
    onmt_cont.json (:func:`read_record`)."""

    def __init__(
        self,
        engine: Any,
        src_vocab: Vocab,
        tgt_vocab: Vocab,
        config: DecodingConfig,
        *,
        record: dict[str, Any],
        lexicon: dict[str, str] | None = None,
    ) -> None:
        self.record = record
        super().__init__(
            engine,
            src_vocab,
            tgt_vocab,
            config,
            lower=bool(record.get("lower")),
            lexicon=lexicon,
            text_record=_from_json(record.get("text")),
        )

    @classmethod
    def from_export(
        cls,
        path: str,
        config: DecodingConfig,
        device: str | torch.device = "cpu",
        threads: int = 1,
        lexicon: dict[str, str] | None = None,
    ) -> Ct2Translator:
        """The translator of the export ``path``, refusing the options it cannot honour (:func:`check_engine_options`)
        before CTranslate2 loads it. ``threads``: CTranslate2's intra-op threads."""
        config = config.resolved()
        record, src_vocab, tgt_vocab = read_record(path)
        check_engine_options(dataclasses.asdict(config), record)
        ct2 = _ctranslate2()
        try:
            engine = ct2.Translator(
                path,
                device="cuda" if str(device).startswith("cuda") else "cpu",
                inter_threads=1,
                intra_threads=max(int(threads or 1), 1),
            )
        except (RuntimeError, ValueError) as exc:  # a damaged model.bin of an export without checksums
            raise UserError(
                f"-model {path}: CTranslate2 cannot load it ({printable(str(exc).splitlines()[0])[:200]}): "
                "convert the checkpoint again"
            ) from None
        return cls(engine, src_vocab, tgt_vocab, config, record=record, lexicon=lexicon)

    def _setup(self, config: DecodingConfig) -> None:
        self._check_beam_size()

    def output_limit(self, source_length: int) -> int:
        return min(super().output_limit(source_length), self.record.get("positions", POSITIONS) - 1)

    def _limit_note(self) -> str:
        return f"; the export's positions, {self.record.get('positions', POSITIONS)}, less one"

    def set_sampling(self, topk: int = 0, topp: float = 0.0, temp: float = 1.0, seed: int = 0) -> None:
        super().set_sampling(topk, topp, temp, seed)
        if self.sampler is not None:
            _ctranslate2().set_random_seed(self.sampler.seed)  # -1 drawn by the base class

    def set_ignore_when_blocking(self, words: Sequence[str]) -> None:
        if words:
            raise UserError(
                "-ignore_when_blocking: CTranslate2's n-gram blocking has no exceptions: decode the "
                "checkpoint (-engine torch)"
            )

    def translate_batch(
        self,
        token_lists: Sequence[Sequence[str]],
        attention: bool | None = None,
        prefixes: Sequence[Sequence[str]] | None = None,
    ) -> tuple[list[list[str]], list[Tensor | None]]:
        if attention is None:
            attention = self.replace_unk or self.report_align or self.attn_debug
        cov_kind, beta = self.coverage
        cov_on = cov_kind != "none" and beta != 0  # -coverage_penalty reads every hypothesis's attention
        longest, positions = max(len(t) for t in token_lists), self.record.get("positions", POSITIONS)
        if longest > positions:
            raise UserError(
                f"a source sentence of {longest} tokens: the exported model has position vectors for {positions}"
            )
        limits = (
            length_limits(torch.tensor([len(t) for t in token_lists]), self.max_length, self.max_length_ratio)
            .clamp(max=positions - 1)
            .tolist()
        )
        steps = max(limits)
        unk = self.src_vocab.itos[UNK_ID]
        source = [[unk if self.src_vocab.index(t) == UNK_ID else t for t in toks] for toks in token_lists]
        options: dict[str, Any] = {
            # every finished hypothesis: CTranslate2 divides its total by the length with </s>, ours (-length_penalty
            # avg) without it, so they are ranked again below. (Its length penalty 0 would give the totals, but
            # end the search as soon as the best hypothesis ends: a narrower search than ours.)
            "beam_size": self.beam_size,
            "num_hypotheses": self.beam_size,
            "max_decoding_length": steps,
            "min_decoding_length": max(1, self.min_length),
            "length_penalty": 1.0,
            "disable_unk": self.ban_unk,
            "no_repeat_ngram_size": self.block_ngram_repeat,
            "return_scores": True,
            "return_attention": bool(attention) or cov_on,
            "max_input_length": 0,
            "return_end_token": False,
        }
        if self.sampler is not None:  # -beam_size K: K independent draws (CTranslate2's num_hypotheses at beam 1)
            topk = self.sampler.topk
            options.update(
                sampling_topk=0 if topk == -1 else topk,
                sampling_topp=self.sampler.topp or 1.0,
                sampling_temperature=self.sampler.temp,
                beam_size=1,
            )
        if prefixes is not None:
            options["target_prefix"] = [list(p) for p in prefixes]
        if steps == 0:  # -max_length 0: empty lines, as the checkpoint gives (CTranslate2 refuses a length of 0)
            results = [SimpleNamespace(hypotheses=[[]], scores=[0.0], attention=None) for _ in source]
        else:
            results = self.model.translate_batch(source, **options)
        first_rows = None
        if (attention or cov_on) and options["beam_size"] > 1 and len(source) > 1 and steps > 0:
            # CTranslate2 (4.x) returns a wrong first row of attention under beam search over a batch of several
            # sentences (it need not even sum to 1); the first step is the same for every hypothesis of a sentence
            # (its input is <s>), so one greedy step gives the right row
            first = self.model.translate_batch(
                source,
                beam_size=1,
                max_decoding_length=1,
                min_decoding_length=1,
                return_attention=True,
                max_input_length=0,
            )
            first_rows = [torch.tensor(r.attention[0][0], dtype=torch.float32) for r in first]
        outputs: list[list[str]] = []
        attns: list[Tensor | None] = []
        nbest: list[list[tuple[list[str], float]]] = []
        aligns: list[list[str]] = []
        self.last_raw = []
        for b, (toks, result, limit) in enumerate(zip(token_lists, results, limits, strict=True)):
            hyps: list[tuple[list[str], Tensor | None, float]] = []
            for h, words in enumerate(result.hypotheses):
                words = list(words)[:limit]
                attn = None
                if (attention or cov_on) and result.attention:
                    attn = torch.tensor(result.attention[h][: len(words)], dtype=torch.float32).reshape(
                        len(words), len(toks)
                    )
                    if first_rows is not None and len(words):
                        attn[0] = first_rows[b]
                ended = len(result.hypotheses[h]) < steps  # with </s> (its length counts it), or cut there
                total = result.scores[h] * (len(result.hypotheses[h]) + ended)
                score = total / (max(len(words), 1) if self.length_penalty == "avg" else 1.0)
                if cov_on:
                    score -= coverage_penalty(attn, cov_kind, beta)
                hyps.append((words, attn if attention else None, score))
            hyps.sort(key=lambda hyp: hyp[2], reverse=True)  # stable: ties keep CTranslate2's order
            hyps = hyps[: self.n_best]
            words, attn, _ = hyps[0]
            ids = self.tgt_vocab.encode(words)
            self.words_out += len(ids)
            self.unk_out += ids.count(UNK_ID)
            self.last_raw.append(words)
            outputs.append(self._replaced(words, attn, toks))
            attns.append(attn)
            nbest.append([(self._replaced(w, a, toks), s) for w, a, s in hyps])
            aligns.append([alignment(a, len(toks)) for _, a, _ in hyps])
        self.last_align = (
            [alignment(a, len(t)) for t, a in zip(token_lists, attns, strict=True)] if self.report_align else None
        )
        self.last_nbest = nbest if self.scored else None
        self.last_nbest_align = aligns if self.report_align and self.scored else None
        return outputs, attns

    def _replaced(self, words: list[str], attn: Tensor | None, src_tokens: Sequence[str]) -> list[str]:
        return replace_unk(words, attn, src_tokens, self.lexicon) if self.replace_unk and attn is not None else words


# translate.py's options that -engine ctranslate2 cannot honour, with their defaults (given otherwise: refused)
FIXED_AT_EXPORT = {"decode_prior": 0.0, "decode_prior_cap": 0, "beam_temperature": 1.0, "alignment_layer": None}
TORCH_ONLY = {"csls": 0, "freq_offsets": None, "tgt_emb_extend": None, "ann": None}


def resolve_engine(engine: str | None, model: str) -> str:
    """translate.py -engine: as given, or (None) read from ``model``: a directory :func:`convert` wrote is
    decoded by CTranslate2, anything else by torch. UserError for a model of the other engine."""
    export = is_export(model)
    if engine is None:
        return "ctranslate2" if export else "torch"
    if engine == "torch" and export:
        raise UserError(
            f"-model {model} is a CTranslate2 model (onmt_cont_convert wrote it): decode it with "
            "-engine ctranslate2, or give the checkpoint it was converted from"
        )
    if engine == "ctranslate2" and not export:
        raise UserError(
            f"-engine ctranslate2 decodes a directory onmt_cont_convert wrote; -model {model} is not one: "
            f"convert it first (onmt_cont_convert -model {model} -output DIR)"
        )
    return engine


def check_engine_options(given: Mapping[str, Any], record: Mapping[str, Any] | None = None) -> None:
    """``given``: translate.py's options by name. UserError for one that -engine ctranslate2 cannot apply:
    those fixed at export (``record``: the export's onmt_cont.json, which says what was fixed) and those
    only the torch engine has."""
    record = record or {}
    for name, default in FIXED_AT_EXPORT.items():
        value = given.get(name, default)
        fixed = record.get(name, default)
        if name == "alignment_layer" and value is not None and record.get("decoder_layers"):
            # a layer number is the same layer as the exported one counted from either end ("0" of one layer = -1)
            layers = record["decoder_layers"]
            exported = -1 if fixed is None else fixed
            if value == "mean" or exported == "mean":
                same = value == exported
            else:
                same = isinstance(value, int) and -layers <= value < layers and value % layers == exported % layers
            if same:
                continue
            shown = "the last decoder layer" if fixed is None else f"decoder layer {fixed}"
            raise UserError(
                f"-alignment_layer {value}: this export's attention is {shown} (of {layers}), fixed when "
                f"it was converted; convert again with onmt_cont_convert -alignment_layer {value}"
            )
        if value != default and value != fixed:
            raise UserError(
                f"-{name} {value}: a CTranslate2 model's output layer was fixed when it was converted "
                f"(-{name} {fixed}); convert again with onmt_cont_convert -{name} {value}"
            )
    for name, default in TORCH_ONLY.items():
        if given.get(name, default) not in (default, None, 0, False):
            raise UserError(
                f"-{name} needs the checkpoint itself (-engine torch): CTranslate2 decodes the exported "
                "output layer as it is"
            )
    if given.get("length_penalty") == "wu":
        raise UserError(
            "-length_penalty wu: CTranslate2 normalises by length ** -alpha (-length_penalty avg "
            "with alpha 1 is ours), not by Wu et al.'s ((5 + length) / 6) ** alpha"
        )
