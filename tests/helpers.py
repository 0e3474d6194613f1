"""Helpers that several test files share (test files import from here, never from each other)."""

import importlib.util
import random
import re
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"  # the shipped sample

SRC_WORDS = "le la un une chat chien rouge bleu mange dort petit grand".split()
TGT_WORDS = "the a one an cat dog red blue eats sleeps small big".split()


def tool_path(name):
    """tools/NAME.py, the user's tools, or lab/tools/NAME.py, those that serve only the results."""
    return next(p for d in ("tools", "lab/tools") if (p := ROOT / d / f"{name}.py").exists())


def load_tool(name):
    """A tool script (:func:`tool_path`) loaded as a module from its file."""
    spec = importlib.util.spec_from_file_location(name, tool_path(name))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def write(path, text):
    """``text``: str (written as UTF-8, newlines as given) or bytes."""
    Path(path).write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return str(path)


def corpus(n=20, seed=0):
    """n short pairs whose target is a word-by-word mapping of the source."""
    rng = random.Random(seed)
    src, tgt = [], []
    for _ in range(n):
        ids = [rng.randrange(len(SRC_WORDS)) for _ in range(rng.randint(3, 6))]
        src.append(" ".join(SRC_WORDS[i] for i in ids))
        tgt.append(" ".join(TGT_WORDS[i] for i in ids))
    return src, tgt


def fails(capsys, main, argv, *needles):
    """Run ``main(argv)``: it must exit 2 with ``error: `` and every needle on stderr."""
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "error: " in err and "Traceback" not in err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


def pp_files(tmp_path, train_src, train_tgt, valid_src="le chat\n", valid_tgt="the cat\n"):
    """preprocess.py's file flags for these texts, written under ``tmp_path``."""
    (tmp_path / "out").mkdir(exist_ok=True)
    return {
        "-train_src": write(tmp_path / "train.src", train_src),
        "-train_tgt": write(tmp_path / "train.tgt", train_tgt),
        "-valid_src": write(tmp_path / "valid.src", valid_src),
        "-valid_tgt": write(tmp_path / "valid.tgt", valid_tgt),
        "-save_data": str(tmp_path / "out" / "d"),
    }


def pp_argv(files, *extra):
    return [x for kv in files.items() for x in kv] + [str(x) for x in extra]


def sample_data(d, *vectors):
    """The shipped sample preprocessed in folder ``d`` (with ``-tgt_emb`` FILE if given) -> the prefix."""
    from onmt_cont.bin import preprocess

    prefix = str(d / "data")
    preprocess.main(["-train_src", str(DATA / "train.fr"), "-train_tgt", str(DATA / "train.en"),
                     "-valid_src", str(DATA / "valid.fr"), "-valid_tgt", str(DATA / "valid.en"),
                     "-save_data", prefix, *[arg for v in vectors for arg in ("-tgt_emb", str(v))]])
    return prefix


def sample_table(d, prefix):
    """The shipped vectors aligned to ``prefix``'s target vocabulary (embeddings_to_torch.py -normalize) in
    folder ``d`` -> the table's path (EMB.dec.pt)."""
    from onmt_cont.bin import embeddings_to_torch

    embeddings_to_torch.main(["-emb_file_dec", str(DATA / "en.vec.gz"), "-dict_file", prefix + ".vocab.pt",
                              "-output_file", str(d / "emb"), "-normalize"])
    return str(d / "emb.dec.pt")


def trained(prefix, save, *flags):
    """train.main on ``prefix`` with a small model, one thread (the caller's thread count restored)."""
    from onmt_cont.bin import train

    saved = torch.get_num_threads()
    train.main(["-data", prefix, "-save_model", save, "-batch_size", "32", "-valid_steps", "1000", "-threads", "1",
                *flags])
    torch.set_num_threads(saved)
    return save + "_last.pt"


# -- train.py on the memorisation corpus (20 pairs of :func:`corpus`) -------------------------------

EMB_DIM = 64
BATCHES_PER_EPOCH = 4  # 20 pairs, -batch_size 5


def memorisation_data(d, table_dim, final=""):
    """Shards of the memorisation corpus in folder ``d`` (validation: its first 8 pairs) and a
    random unit table of ``table_dim`` columns (row 0, padding, zero). ``final``: a token that
    ends every sentence of both sides (e.g. ".")."""
    src, tgt = corpus()
    if final:
        src, tgt = ([f"{line} {final}" for line in side] for side in (src, tgt))
    for name, lines in (("train.fr", src), ("train.en", tgt), ("valid.fr", src[:8]), ("valid.en", tgt[:8])):
        (d / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    prefix = str(d / "d")
    from onmt_cont.bin import preprocess
    from onmt_cont.inputters.vocab import load_vocabs

    preprocess.main(["-train_src", str(d / "train.fr"), "-train_tgt", str(d / "train.en"),
                     "-valid_src", str(d / "valid.fr"), "-valid_tgt", str(d / "valid.en"), "-save_data", prefix])
    _, tgt_vocab, _ = load_vocabs(prefix + ".vocab.pt")
    gen = torch.Generator().manual_seed(0)
    table = torch.nn.functional.normalize(torch.randn(len(tgt_vocab), table_dim, generator=gen), dim=-1)
    table[0] = 0
    torch.save(table, d / "emb.pt")
    return {"dir": d, "prefix": prefix, "emb": str(d / "emb.pt"), "tgt_vocab_size": len(tgt_vocab),
            "src": src, "tgt": tgt}


SMALL = {"-rnn_size": "32", "-word_vec_size": "16", "-dropout": "0", "-batch_size": "5", "-seed": "1",
         "-learning_rate": "0.01", "-report_every": str(BATCHES_PER_EPOCH), "-valid_steps": "1000",
         "-save_checkpoint_steps": "1000", "-epochs": "1"}


def argv(ds, out, **opts):
    """-data/-save_model/-tgt_emb plus SMALL, overridden by opts (``tie_emb=True`` -> -tie_emb,
    ``x=None`` drops -x)."""
    merged = {"-data": ds["prefix"], "-save_model": str(out / "m"), "-tgt_emb": ds["emb"], **SMALL}
    merged.update({f"-{k}": v for k, v in opts.items()})
    args = []
    for k, v in merged.items():
        if v is True:
            args.append(k)
        elif v is not None and v is not False:
            args += [k, str(v)]
    return args


def run_train(data, out, **opts):
    out.mkdir(parents=True, exist_ok=True)
    opts.setdefault("log_file", str(out / "train.log"))
    from onmt_cont.bin import train

    return train.main(argv(data, out, **opts))


def log_values(path, pattern):
    return [float(x) for x in re.findall(pattern, Path(path).read_text(encoding="utf-8"))]


def reported_losses(path):
    return log_values(path, r"\] step \d+: loss (-?[\d.]+)")


def train_fails(capsys, args, *needles):
    """train.py's main(args) exits 2 before training; stderr names every needle. Returns stderr."""
    from onmt_cont.bin import train

    with pytest.raises(SystemExit) as exc:
        train.main(args)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    for needle in needles:
        assert needle in err, err
    return err


def record_steps(monkeypatch):
    """Wrap Trainer.train_step to record (step, loss sum) of every update."""
    from onmt_cont.train.step import Trainer

    seen = []
    real = Trainer.train_step

    def wrapped(self, batch, step):
        value, n = real(self, batch, step)
        seen.append((step, value))
        return value, n

    monkeypatch.setattr(Trainer, "train_step", wrapped)
    return seen


def assert_resumed_exactly(seen, reference, resumed, full, steps):
    """The resumed run took ``steps`` updates (record_steps' ``seen``) with the uninterrupted run's
    losses at the same steps (``reference``: step -> loss) and ends with its parameters, bit for bit."""
    assert [v for _, v in seen] == [reference[s] for s, _ in seen] and len(seen) == steps
    for a, b in zip(resumed.model.parameters(), full.model.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


# the word-choice tests' small tied model (test_word_choice.py and the files that train its kind)
WC = {"rnn_size": "32", "word_vec_size": "16", "dropout": "0", "batch_size": "5", "seed": "1",
      "learning_rate": "0.01", "report_every": "1", "valid_steps": "1000", "save_checkpoint_steps": "4",
      "tie_emb": True, "epochs": "6"}


def translate_args(model, data, out, *extra):
    """translate.py's arguments for ``model`` on the memorisation corpus's validation source."""
    src = data["dir"] / "valid.fr"
    return ["-model", str(model), "-src", str(src), "-output", str(out), *extra]


def translator(model, **options):
    """The translator build_translator makes of ``model`` (a checkpoint or an export) under these decoding
    options, with greedy search and no n-gram blocking unless they say otherwise."""
    from onmt_cont.translate.build import build_translator
    from onmt_cont.translate.config import DecodingConfig

    return build_translator(DecodingConfig(**{"beam_size": 1, "block_ngram_repeat": 0, **options}), [str(model)])
