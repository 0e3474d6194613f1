"""`pip install .` and `pip install -e .` in a fresh virtual environment give working console scripts: the
quickstart's chain on a slice of the sample, run outside the checkout, with a preset called by its name."""

import os
import pathlib
import subprocess
import sys

import pytest

from tests.helpers import ROOT

DATA = ROOT / "data"
SCRIPTS = [
    "onmt_cont_preprocess",
    "onmt_cont_embeddings_to_torch",
    "onmt_cont_build_lexicon",
    "onmt_cont_train",
    "onmt_cont_translate",
    "onmt_cont_release",
    "onmt_cont_server",
    "onmt_cont_average_models",
    "onmt_cont_calibrate_offsets",
    "onmt_cont_moses_tok",
    "onmt_cont_paired_bootstrap",
    "onmt_cont_table_stats",
    "onmt_cont_train_vectors",
]

pytestmark = pytest.mark.slow


def run(args, cwd, env=None):
    res = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
    )
    assert res.returncode == 0, f"{args}: {res.stderr[-3000:]}"
    return res


@pytest.mark.parametrize("editable", [False, True], ids=["install", "editable"])
def test_pip_install_gives_working_console_scripts(tmp_path, editable):
    venv = tmp_path / "venv"
    # the system's packages (torch and the rest, already installed) are visible, so pip installs only onmt_cont
    run([sys.executable, "-m", "venv", "--system-site-packages", venv], tmp_path)
    bin_ = venv / "bin"
    run([bin_ / "python", "-m", "pip", "install", "-q", *(["-e"] if editable else []), ROOT], tmp_path)
    work = tmp_path / "work"  # outside the checkout: nothing is imported from it by accident
    work.mkdir()
    where = run([bin_ / "python", "-c", "import onmt_cont, sys; print(onmt_cont.__file__)"], work).stdout.strip()
    assert pathlib.Path(where).is_relative_to(ROOT if editable else venv), where
    for script in SCRIPTS:
        assert "usage:" in run([bin_ / script, "-h"], work).stdout
    for split, n in (("train", 300), ("valid", 20), ("test", 5)):
        for lang in ("fr", "en"):
            lines = (DATA / f"{split}.{lang}").read_text(encoding="utf-8").splitlines(keepends=True)[:n]
            (work / f"{split}.{lang}").write_text("".join(lines), encoding="utf-8")
    run(
        [
            bin_ / "onmt_cont_preprocess",
            "-train_src",
            "train.fr",
            "-train_tgt",
            "train.en",
            "-valid_src",
            "valid.fr",
            "-valid_tgt",
            "valid.en",
            "-save_data",
            "d",
            "-tgt_emb",
            DATA / "en.vec.gz",
        ],
        work,
    )
    run(
        [
            bin_ / "onmt_cont_embeddings_to_torch",
            "-emb_file_dec",
            DATA / "en.vec.gz",
            "-dict_file",
            "d.vocab.pt",
            "-output_file",
            "emb",
            "-normalize",
        ],
        work,
    )
    run([bin_ / "onmt_cont_build_lexicon", "-src", "train.fr", "-tgt", "train.en", "-output", "lex.txt"], work)
    log = run(
        [
            bin_ / "onmt_cont_train",
            "-config",
            "transformer_continuous",
            "-data",
            "d",
            "-tgt_emb",
            "emb.dec.pt",
            "-save_model",
            "m",
            "-train_steps",
            "3",
            "-threads",
            "1",
        ],
        work,
    )
    assert "-loss nllvmf_nce" in log.stdout + log.stderr
    res = run(
        [
            bin_ / "onmt_cont_translate",
            "-model",
            "m_last.pt",
            "-src",
            "test.fr",
            "-output",
            "out.en",
            "-tgt",
            "test.en",
            "-replace_unk",
            "-lookup_dict",
            "lex.txt",
            "-max_length",
            "4",
        ],
        work,
    )
    assert "sacreBLEU" in res.stderr and res.stdout == ""  # the summary on stderr; the translations in -output
    assert len((work / "out.en").read_text(encoding="utf-8").splitlines()) == 5
    api = run(
        [
            bin_ / "python",
            "-c",
            "import onmt_cont; print(onmt_cont.load('m_last.pt', max_length=4).translate(['un homme .', '']))",
        ],
        work,
    )
    assert api.stdout.startswith("[") and api.stdout.strip().endswith("'']")
