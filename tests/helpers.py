"""Helpers that several test files share (test files import from here, never from each other)."""

import gzip
import importlib.util
import json
import math
import random
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from argparse import Namespace
from pathlib import Path

import pytest
import torch

from onmt_cont.constants import PAD_ID, SPECIALS

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
    preprocess.main(
        [
            "-train_src",
            str(DATA / "train.fr"),
            "-train_tgt",
            str(DATA / "train.en"),
            "-valid_src",
            str(DATA / "valid.fr"),
            "-valid_tgt",
            str(DATA / "valid.en"),
            "-save_data",
            prefix,
            *[arg for v in vectors for arg in ("-tgt_emb", str(v))],
        ]
    )
    return prefix


def sample_table(d, prefix):
    """The shipped vectors aligned to ``prefix``'s target vocabulary (embeddings_to_torch.py -normalize) in
    folder ``d`` -> the table's path (EMB.dec.pt)."""
    from onmt_cont.bin import embeddings_to_torch

    embeddings_to_torch.main(
        [
            "-emb_file_dec",
            str(DATA / "en.vec.gz"),
            "-dict_file",
            prefix + ".vocab.pt",
            "-output_file",
            str(d / "emb"),
            "-normalize",
        ]
    )
    return str(d / "emb.dec.pt")


def trained(prefix, save, *flags):
    """train.main on ``prefix`` with a small model, one thread (the caller's thread count restored)."""
    from onmt_cont.bin import train

    saved = torch.get_num_threads()
    train.main(
        ["-data", prefix, "-save_model", save, "-batch_size", "32", "-valid_steps", "1000", "-threads", "1", *flags]
    )
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

    preprocess.main(
        [
            "-train_src",
            str(d / "train.fr"),
            "-train_tgt",
            str(d / "train.en"),
            "-valid_src",
            str(d / "valid.fr"),
            "-valid_tgt",
            str(d / "valid.en"),
            "-save_data",
            prefix,
        ]
    )
    _, tgt_vocab, _ = load_vocabs(prefix + ".vocab.pt")
    gen = torch.Generator().manual_seed(0)
    table = torch.nn.functional.normalize(torch.randn(len(tgt_vocab), table_dim, generator=gen), dim=-1)
    table[0] = 0
    torch.save(table, d / "emb.pt")
    return {
        "dir": d,
        "prefix": prefix,
        "emb": str(d / "emb.pt"),
        "tgt_vocab_size": len(tgt_vocab),
        "src": src,
        "tgt": tgt,
    }


SMALL = {
    "-rnn_size": "32",
    "-word_vec_size": "16",
    "-dropout": "0",
    "-batch_size": "5",
    "-seed": "1",
    "-learning_rate": "0.01",
    "-report_every": str(BATCHES_PER_EPOCH),
    "-valid_steps": "1000",
    "-save_checkpoint_steps": "1000",
    "-epochs": "1",
}


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
WC = {
    "rnn_size": "32",
    "word_vec_size": "16",
    "dropout": "0",
    "batch_size": "5",
    "seed": "1",
    "learning_rate": "0.01",
    "report_every": "1",
    "valid_steps": "1000",
    "save_checkpoint_steps": "4",
    "tie_emb": True,
    "epochs": "6",
}


def translate_args(model, data, out, *extra):
    """translate.py's arguments for ``model`` on the memorisation corpus's validation source."""
    src = data["dir"] / "valid.fr"
    return ["-model", str(model), "-src", str(src), "-output", str(out), *extra]


def translate_py(*args):
    """translate.py ARGS in a child process, one thread: -> (its output lines, its stderr)."""
    res = subprocess.run(
        [sys.executable, str(ROOT / "translate.py"), "-threads", "1", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines(), res.stderr


class Server:
    """onmt_cont_server on a free localhost port, started from the config file ``conf_path``."""

    def __init__(self, conf_path, *args):
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "onmt_cont" / "bin" / "server.py"),
                "-config",
                str(conf_path),
                "-port",
                "0",
                "-threads",
                "1",
                *args,
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stderr.readline()
        match = re.search(r"http://([\d.]+):(\d+)(\S*)", line)
        assert match, line + self.proc.stderr.read()
        self.url = f"http://{match.group(1)}:{match.group(2)}"

    def call(self, path, body=None, raw=None):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.url + path, data=data, method="POST" if data is not None else "GET")
        try:
            with urllib.request.urlopen(req, timeout=120) as res:
                return res.status, json.loads(res.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


# train.py with rank 1 drawing one random number more than rank 0 before every update, so that the
# ranks' generators differ, as a GPU's do (see test_two_ranks_resume_with_their_own_random_states)
SKEWED_RANKS = """import os, sys
sys.path.insert(0, {root!r})
import torch
from onmt_cont.train import step as trainer
from onmt_cont.bin import train

original = trainer.Trainer.train_step


def train_step(self, batch, step):
    if os.environ["RANK"] == "1":
        torch.rand(1)
    return original(self, batch, step)


trainer.Trainer.train_step = train_step
train.main(sys.argv[1:])
"""


# -- small Transformers ------------------------------------------------------------------------------

# On the memorisation corpus (d_model 16): one epoch is 4 batches of 5 pairs; -train_steps caps most
# tests at one epoch (test_transformer.py's matrix trains 8).
TRANSFORMER = {
    "encoder_type": "transformer",
    "decoder_type": "transformer",
    "rnn_size": "16",
    "word_vec_size": "16",
    "heads": "2",
    "transformer_ff": "32",
    "layers": "2",
    "attention_dropout": "0",
    "report_every": "1",
    "train_steps": "4",
}

# A softmax Transformer on :func:`sample_subset`
TRANSFORMER_CE = [
    "-encoder_type",
    "transformer",
    "-decoder_type",
    "transformer",
    "-rnn_size",
    "16",
    "-word_vec_size",
    "16",
    "-heads",
    "2",
    "-transformer_ff",
    "32",
    "-layers",
    "1",
    "-loss",
    "ce",
    "-label_smoothing",
    "0.1",
    "-batch_size",
    "16",
    "-train_steps",
    "2",
    "-valid_steps",
    "100",
    "-save_checkpoint_steps",
    "100",
]


def sample_subset(d):
    """The first 100 pairs of the shipped sample (data/), preprocessed in folder ``d`` (validation:
    the same pairs), and a random unit target table of 8 columns (emb.pt) -> ``d``."""
    from onmt_cont.bin import preprocess

    for lang in ("fr", "en"):
        with open(DATA / f"train.{lang}", encoding="utf-8") as f:
            lines = [next(f) for _ in range(100)]
        (d / f"train.{lang}").write_text("".join(lines), encoding="utf-8")
    preprocess.main(
        [
            "-train_src",
            str(d / "train.fr"),
            "-train_tgt",
            str(d / "train.en"),
            "-valid_src",
            str(d / "train.fr"),
            "-valid_tgt",
            str(d / "train.en"),
            "-save_data",
            str(d / "data"),
        ]
    )
    n = len(torch.load(d / "data.vocab.pt", weights_only=True)["tgt"]["tokens"])
    table = torch.nn.functional.normalize(torch.randn(n, 8, generator=torch.Generator().manual_seed(0)), dim=-1)
    table[0] = 0
    torch.save(table, d / "emb.pt")
    return d


# -- hand-built models ---------------------------------------------------------------------------------


def model_opts(**kw):
    """build_model's options for a small LSTM model, overridden by ``kw``."""
    base = {
        "loss": "ce",
        "generator": "linear",
        "tie_emb": False,
        "rnn_size": 8,
        "word_vec_size": 6,
        "src_word_vec_size": None,
        "tgt_word_vec_size": None,
        "enc_layers": 1,
        "dec_layers": 2,
        "brnn": True,
        "dropout": 0.0,
        "param_init": 0.1,
        "seed": 3,
        "rewe_lambda": None,
        "rewe_hidden": None,
        "joint_dim": 4,
        "joint_sample": None,
        "joint_dropout": None,
    }
    base.update(kw)
    return Namespace(**base)


def joint(vocab=6, emb=3, hidden=4, d_j=2, sample=None, pretrained=None, seed=0):
    """A joint input-output generator and its target embeddings, every trainable value uniform in [-1, 1]."""
    from onmt_cont.models.embeddings import TargetEmbeddings
    from onmt_cont.models.generators import JointGenerator

    torch.manual_seed(seed)
    embeddings = TargetEmbeddings(vocab, emb, pretrained)
    gen = JointGenerator(hidden, embeddings, vocab, d_j, dropout=0.0, sample=sample)
    with torch.no_grad():
        for p in (*gen.parameters(), *embeddings.parameters()):
            if p.requires_grad:
                p.uniform_(-1, 1)
    return gen, embeddings


# Open vocabulary (test_open_vocab.py, test_ann.py): a continuous checkpoint over OV_WORDS and a word
# outside its vocabulary, NEW_WORD.
OV_DIM = 8
OV_WORDS = ["a", "dog", "runs"]  # training target vocabulary (after the specials)
NEW_WORD = "zebra"
# Training table: specials and words along the first axes; the new word along the last one.
OV_TABLE = torch.zeros(len(SPECIALS) + len(OV_WORDS), OV_DIM)
for _i in range(1, len(OV_TABLE)):
    OV_TABLE[_i, _i - 1] = 1.0
NEW_VEC = torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3.0])  # not unit length: the reader must normalise it


def write_vec(path, rows):
    """A gzipped fastText file: header then 'word v1 ... vd' lines."""
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(f"{len(rows)} {OV_DIM}\n")
        for word, vec in rows:
            f.write(word + " " + " ".join(f"{v:g}" for v in vec) + "\n")
    return str(path)


def open_vocab_checkpoint(tmp_path, tie_emb, target):
    """A tied or untied nllvmf checkpoint on OV_TABLE whose generator predicts 5·``target`` at every step."""
    from onmt_cont.bin import train
    from onmt_cont.inputters.vocab import Vocab
    from onmt_cont.models.checkpoint import save_checkpoint
    from onmt_cont.models.model import build_model

    opt = train.build_parser().parse_args(
        [
            "-loss",
            "nllvmf",
            "-generator",
            "linear",
            "-rnn_size",
            "8",
            "-word_vec_size",
            "4",
            "-enc_layers",
            "1",
            "-dec_layers",
            "1",
            "-param_init",
            "0.1",
        ]
        + (["-tie_emb"] if tie_emb else [])
    )
    src_vocab = Vocab(list(SPECIALS) + ["un", "chien"])
    tgt_vocab = Vocab(list(SPECIALS) + OV_WORDS)
    torch.manual_seed(0)
    model = build_model(opt, len(src_vocab), len(tgt_vocab), OV_TABLE)
    with torch.no_grad():
        model.generator.proj.weight.zero_()
        model.generator.proj.bias.copy_(5 * target)
    path = tmp_path / f"model_tie{int(tie_emb)}.pt"
    save_checkpoint(str(path), model, None, opt, src_vocab, tgt_vocab, {"step": 0})
    return str(path)


# -- a stub model for the searches (test_search.py, test_hostile_translate.py) ----------------------------

V = 11  # 0 <blank>, 1 <unk>, 2 <s>, 3 </s>, 4.. words
A, B, C, D, W, X, Z = 4, 5, 6, 7, 8, 9, 10
NEG = float("-inf")


class StubDecoder:
    """Scores of the next word are ``table(sentence_id, prefix)``. The prefix travels in the
    decoder state (batch in dim 0, as beam search reorders it), and every call is recorded."""

    def __init__(self, table):
        self.table = table
        self.calls = []  # the ids fed at each step, [batch] each

    def __call__(self, tgt_in, memory_bank, src_mask, state, need_attn=True):
        assert tgt_in.dim() == 2 and tgt_in.size(1) == 1
        self.calls.append(tgt_in[:, 0].tolist())
        prefix = torch.cat([state["prefix"], tgt_in], 1)
        rows = []
        for sid, p in zip(state["sid"].tolist(), prefix.tolist(), strict=True):
            rows.append(self.table(sid, tuple(w for w in p[1:])))  # without the leading <s>
        dec_out = torch.tensor(rows, dtype=torch.float).unsqueeze(1)  # [batch, 1, V]
        # attention: all on position (step mod source length), never on padding
        attn = torch.zeros(len(rows), 1, memory_bank.size(1))
        for b, n in enumerate(src_mask.sum(1).tolist()):
            attn[b, 0, (prefix.size(1) - 1) % n] = 1.0
        new_state = dict(state, prefix=prefix, h=state["h"] + 1)
        return dec_out, attn, new_state

    def reorder_state(self, state, index, memory=True):
        """The stub's state is laid out like the LSTM decoder's: h and c have the batch in dim 1."""
        return {key: v.index_select(1 if key in ("h", "c") else 0, index) for key, v in state.items()}


class StubGenerator:
    """The decoder already produced scores: forward and scores are identities."""

    def __call__(self, dec_out):
        return dec_out

    def scores(self, output):
        return output.clone()


class StubModel:
    def __init__(self, table):
        self.decoder = StubDecoder(table)
        self.generator = StubGenerator()

    def encode(self, src, src_lengths):
        batch, src_len = src.shape
        state = {
            "h": torch.zeros(1, batch, 1),
            "c": torch.zeros(1, batch, 1),
            "input_feed": torch.zeros(batch, 1),
            "prefix": torch.zeros(batch, 0, dtype=torch.long),
            "sid": src[:, 0].clone(),  # the sentence's id is its first source token
        }
        return torch.zeros(batch, src_len, 1), src != PAD_ID, state


def row(probs, default=NEG, log=True):
    """A score row from {word: probability}; unlisted words get ``default``."""
    r = [default] * V
    for w, p in probs.items():
        r[w] = math.log(p) if log else p
    return r


def run_greedy(table, srcs, max_lengths, block=0):
    from onmt_cont.translate.search import greedy_search

    model = StubModel(table)
    src, lengths = batch_of(srcs)
    ids, attn = greedy_search(model, src, lengths, torch.tensor(max_lengths), block_ngram_repeat=block)
    return model, ids, attn


def run_beam(table, srcs, max_lengths, k, penalty="none", alpha=0.0, block=0):
    from onmt_cont.translate.beam import beam_search

    model = StubModel(table)
    src, lengths = batch_of(srcs)
    ids, attn = beam_search(model, src, lengths, torch.tensor(max_lengths), k, penalty, alpha, block_ngram_repeat=block)
    return model, ids, attn


def batch_of(srcs):
    src = torch.full((len(srcs), max(map(len, srcs))), PAD_ID)
    for i, s in enumerate(srcs):
        src[i, : len(s)] = torch.tensor(s)
    return src, torch.tensor([len(s) for s in srcs])


def translator(model, **options):
    """The translator build_translator makes of ``model`` (a checkpoint or an export) under these decoding
    options, with greedy search and no n-gram blocking unless they say otherwise."""
    from onmt_cont.translate.build import build_translator
    from onmt_cont.translate.config import DecodingConfig

    return build_translator(DecodingConfig(**{"beam_size": 1, "block_ngram_repeat": 0, **options}), [str(model)])
