"""Issue 77, the areas kept back: files the engines read that were edited or damaged after they were written (every
file of an export folder, every part of a checkpoint's raw-text record), the range and type of numeric and
boolean arguments in both engines, writers on a full disk or a device, configuration values of the wrong JSON type,
and strings from files that reach the terminal. Each case is a row of docs/reliability.md ("Round 4, our own
cases"); the cases that already behaved are listed there too."""

import hashlib
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import onmt_cont
from onmt_cont.bin import convert as convert_cli
from onmt_cont.bin import preprocess, train
from onmt_cont.utils.errors import UserError, printable
from tests.helpers import ROOT

RAW = ROOT / "data" / "raw"
LINES = ["Un chien court.", "Une femme lit."]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A tiny softmax Transformer on raw fr -> en text (its checkpoint records the text) and its export."""
    d = tmp_path_factory.mktemp("hostile_files")
    preprocess.main(
        [
            "-train_src",
            str(RAW / "train.fr"),
            "-train_tgt",
            str(RAW / "train.en"),
            "-valid_src",
            str(RAW / "valid.fr"),
            "-valid_tgt",
            str(RAW / "valid.en"),
            "-save_data",
            str(d / "raw"),
            "-src_lang",
            "fr",
            "-tgt_lang",
            "en",
        ]
    )
    saved = torch.get_num_threads()
    train.main(
        [
            "-data",
            str(d / "raw"),
            "-save_model",
            str(d / "m"),
            "-encoder_type",
            "transformer",
            "-decoder_type",
            "transformer",
            "-rnn_size",
            "32",
            "-word_vec_size",
            "32",
            "-heads",
            "2",
            "-layers",
            "1",
            "-transformer_ff",
            "64",
            "-loss",
            "ce",
            "-train_steps",
            "10",
            "-valid_steps",
            "100",
            "-threads",
            "1",
            "-batch_size",
            "32",
        ]
    )
    torch.set_num_threads(saved)
    convert_cli.main(["-model", str(d / "m_last.pt"), "-output", str(d / "m_ct2")])
    return d


def _edit_json(name, fn):
    def edit(d):
        path = d / name
        record = json.loads(path.read_text(encoding="utf-8"))
        fn(record)
        path.write_text(json.dumps(record), encoding="utf-8")

    return edit


EXPORT_EDITS = {
    "model.bin truncated": (
        lambda d: (d / "model.bin").write_bytes((d / "model.bin").read_bytes()[:1000]),
        "model.bin was changed or damaged after onmt_cont_convert wrote it",
    ),
    "model.bin empty": (lambda d: (d / "model.bin").write_bytes(b""), "model.bin was changed or damaged"),
    "config.json not JSON": (lambda d: (d / "config.json").write_text("nope"), "config.json was changed or damaged"),
    "target_vocabulary.json cut": (
        lambda d: (d / "target_vocabulary.json").write_text('["<blank>"]'),
        "target_vocabulary.json was changed or damaged",
    ),
    "source_vocabulary.json removed": (
        lambda d: (d / "source_vocabulary.json").unlink(),
        "source_vocabulary.json: cannot read it (no such file or directory)",
    ),
    "onmt_cont.json a list": (lambda d: (d / "onmt_cont.json").write_text("[1]"), "expected a mapping, got list"),
    "positions a string": (_edit_json("onmt_cont.json", lambda r: r.update(positions="2048")), "positions is '2048'"),
    "positions 0": (_edit_json("onmt_cont.json", lambda r: r.update(positions=0)), "positions must be at least 1"),
    "lower a string": (_edit_json("onmt_cont.json", lambda r: r.update(lower="no")), "lower is 'no'"),
    "decoder_layers a string": (
        _edit_json("onmt_cont.json", lambda r: r.update(decoder_layers="2")),
        "decoder_layers is '2'",
    ),
    "format 2": (_edit_json("onmt_cont.json", lambda r: r.update(format=2)), "format 2: this onmt_cont reads format 1"),
    "an unknown criterion": (
        _edit_json("onmt_cont.json", lambda r: r.update(continuous=True, criterion="nope")),
        "criterion 'nope': expected one of vmf, l2",
    ),
    "source vocabulary cut in onmt_cont.json": (
        _edit_json(
            "onmt_cont.json",
            lambda r: r["src_vocab"].update(tokens=r["src_vocab"]["tokens"][:10], counts=r["src_vocab"]["counts"][:10]),
        ),
        "its source vocabulary is not source_vocabulary.json's",
    ),
    "text record's language a number": (
        _edit_json("onmt_cont.json", lambda r: r["text"].update(src_lang=5)),
        "its raw-text record is damaged (src_lang is 5, not a language code)",
    ),
    "text record a string": (
        _edit_json("onmt_cont.json", lambda r: r.update(text="fr")),
        "its raw-text record is damaged (expected a mapping, got str)",
    ),
    "text record's language an escape sequence": (
        _edit_json("onmt_cont.json", lambda r: r["text"].update(tgt_lang="\x1b[31mred")),
        "tgt_lang is '\\x1b[31mred', not a language code",
    ),
}


@pytest.mark.parametrize("case", list(EXPORT_EDITS))
def test_an_export_edited_after_conversion_is_refused_in_one_line(models, tmp_path, case):
    """Before: CTranslate2's RuntimeError or TypeError tracebacks, or silently other output (a shortened vocabulary,
    lower "no", an unknown format or criterion)."""
    edit, needle = EXPORT_EDITS[case]
    export = tmp_path / "ct2"
    shutil.copytree(models / "m_ct2", export)
    edit(export)
    with pytest.raises(UserError) as err:
        onmt_cont.load(str(export))
    assert needle in str(err.value)
    res = subprocess.run(
        [sys.executable, str(ROOT / "translate.py"), "-model", str(export), "-threads", "1"],
        input="\n".join(LINES) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr and not res.stdout
    assert "\x1b" not in res.stderr  # shown escaped


def _sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


RECORD_EDITS = {
    "language a number": (lambda t: t.update(src_lang=5), "src_lang is 5, not a language code"),
    "record without a language": (lambda t: t.clear() or t.update(x=1), "no language"),
    "lower a string": (lambda t: t.update(lower="yes"), "lower must be true or false"),
    "moses a list": (lambda t: t.update(moses=[1]), "moses a mapping"),
    "SentencePiece entry a string": (
        lambda t: t.update(src_spm="x.model"),
        "src_spm is not an embedded SentencePiece model",
    ),
    "language an escape sequence": (lambda t: t.update(tgt_lang="e\x1b[2Jn"), "tgt_lang is 'e\\x1b[2Jn'"),
}


@pytest.mark.parametrize("case", list(RECORD_EDITS))
def test_a_checkpoints_damaged_text_record_is_refused(models, tmp_path, case):
    """Before: TypeError and AttributeError tracebacks, or a truthy "yes" and a list taken as settings."""
    edit, needle = RECORD_EDITS[case]
    ckpt = torch.load(models / "m_last.pt", weights_only=True)
    edit(ckpt["vocab"]["text"])
    torch.save(ckpt, tmp_path / "m.pt")
    with pytest.raises(UserError, match="its raw-text record is damaged") as err:
        onmt_cont.load(str(tmp_path / "m.pt"))
    assert needle in str(err.value)


def test_names_from_a_checkpoint_reach_the_terminal_escaped(models, tmp_path):
    """A record's file name holding an escape sequence (which retitles the terminal) was printed as it was."""
    ckpt = torch.load(models / "m_last.pt", weights_only=True)
    ckpt["vocab"]["text"]["src_bpe"] = {"codes": "a b\n", "sha256": _sha("a b\n"), "file": "\x1b]0;pwned\x07codes"}
    torch.save(ckpt, tmp_path / "m.pt")
    res = subprocess.run(
        [sys.executable, str(ROOT / "translate.py"), "-model", str(tmp_path / "m.pt"), "-threads", "1"],
        input="\n".join(LINES) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0 and "\x1b" not in res.stderr and "\\x1b]0;pwned\\x07codes" in res.stderr
    assert printable("a\x1b[2Jb\u202ec\td\n") == "a\\x1b[2Jb\\u202ec\td\n"


@pytest.mark.parametrize("engine", ["torch", "ctranslate2"])
def test_seeds_and_booleans_have_one_rule_in_both_engines(models, engine):
    """-seed -1 raised CTranslate2's TypeError (the checkpoint took it), a seed past 2^63 raised ValueError or
    TypeError; ban_unk="yes" raised CTranslate2's TypeError while the checkpoint took any truthy value."""
    path = str(models / ("m_last.pt" if engine == "torch" else "m_ct2"))
    with onmt_cont.load(path, random_sampling_topk=5, seed=-1) as m:  # OpenNMT-py's -1: a new seed each run
        assert len(m.translate(LINES)) == 2
    for seed in (2**70, -2, "1", 1.5):
        with pytest.raises(UserError, match="-seed must be a whole number from 0 to 4294967295"):
            onmt_cont.load(path, random_sampling_topk=5, seed=seed)
    for name, value in (("ban_unk", "yes"), ("replace_unk", "no"), ("tokenized", 1)):
        with pytest.raises(UserError, match=f"onmt_cont.load\\(\\): {name} takes True or False"):
            onmt_cont.load(path, **{name: value})
    with onmt_cont.load(path) as m, pytest.raises(UserError, match="with_score takes True or False"):
        m.translate(LINES, with_score="yes")
    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "translate.py"),
            "-model",
            path,
            "-threads",
            "1",
            "-random_sampling_topk",
            "5",
            "-seed",
            str(2**70),
        ],
        input="a\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_writers_on_a_full_device_say_so_in_one_line(models, tmp_path):
    """translate.py -output, build_lexicon.py -output, onmt_cont_release and calibrate_offsets.py onto /dev/full
    ended in OSError tracebacks; translate.py -log_file /dev/full too (train.py's log already went on without)."""

    def run(*args):
        return subprocess.run(
            [sys.executable, *map(str, args)],
            input="\n".join(LINES) + "\n",
            capture_output=True,
            text=True,
            timeout=300,
        )

    src = tmp_path / "src.txt"
    src.write_text("un chien .\n", encoding="utf-8")
    for args in (
        [ROOT / "translate.py", "-model", models / "m_last.pt", "-threads", "1", "-output", "/dev/full"],
        [ROOT / "translate.py", "-model", models / "m_ct2", "-threads", "1", "-output", "/dev/full"],
        [ROOT / "onmt_cont" / "bin" / "release.py", "-model", models / "m_last.pt", "-output", "/dev/full"],
        [
            ROOT / "build_lexicon.py",
            "-src",
            RAW.parent / "train.fr",
            "-tgt",
            RAW.parent / "train.en",
            "-output",
            "/dev/full",
        ],
    ):
        res = run(*args)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-800:]
        assert res.stderr.strip().splitlines()[-1] == "error: cannot write /dev/full: no space left on device"
    res = run(ROOT / "translate.py", "-model", models / "m_last.pt", "-threads", "1", "-log_file", "/dev/full")
    assert res.returncode == 0 and len(res.stdout.splitlines()) == 2
    assert (
        "warning: cannot write the log file /dev/full: No space left on device; it is no longer written" in res.stderr
    )


@pytest.mark.parametrize(
    "entry, needle",
    [
        ({"on_timeout": 5}, '"on_timeout" "unload" or "to_cpu"'),
        ({"name": [1]}, '"name" must be a string'),
        ({"timeout": math.nan}, '"timeout" must be a number of seconds, or -1 (never), got nan'),
        ({"timeout": -5}, '"timeout" must be a number of seconds, or -1 (never), got -5'),
        ({"load": "no"}, "\"load\" must be true or false, got 'no'"),
        ({"opt": {"beam_size": "5"}}, "beam_size and batch_size must be whole numbers, at least 1, got '5' and 32"),
    ],
)
def test_server_configuration_values_of_the_wrong_type(models, tmp_path, entry, needle):
    """A wrong "on_timeout", "name" or "timeout" (NaN, -5) was taken, "load": "no" loaded the model, and
    "beam_size": "5" was refused as "got 5"."""
    conf = tmp_path / "conf.json"
    conf.write_text(json.dumps({"models": [{"id": 1, "model": str(models / "m_last.pt"), **entry}]}), encoding="utf-8")
    res = subprocess.run(
        [sys.executable, str(ROOT / "onmt_cont" / "bin" / "server.py"), "-config", str(conf), "-port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and needle in res.stderr and res.stderr.count("\n") == 1, res.stderr
