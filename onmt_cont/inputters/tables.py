"""Target tables for continuous-output models: random and mixed initialisations, centring
("all-but-the-top") and the choice of the ``<unk>`` row. Used by embeddings_to_torch.py on
the target (``.dec``) table after the pretrained vectors are aligned with the vocabulary.

Why: nearest-neighbour decoding falls on *hubs*, rows that are among the nearest neighbours
of many others. In the pretrained fastText table of the Multi30k recipe ``<unk>`` (the mean
of the out-of-vocabulary vectors) is the top hub. Random targets (Tokarchuk & Niculae,
"The Unreasonable Effectiveness of Random Target Embeddings for Continuous-Output Neural
Machine Translation", NAACL 2024) are spread evenly over the sphere and have no hubs;
centring (Mu & Viswanath, "All-but-the-Top", ICLR 2018) removes the common direction that
makes a mean vector close to everything. ``tools/table_stats.py`` measures both effects.

Every function works on a numpy table ``[V, dim]`` whose row ``PAD_ID`` stays zero.
"""

import argparse

import numpy as np
from numpy.typing import ArrayLike

from onmt_cont.constants import PAD_ID, SPECIALS, UNK_ID
from onmt_cont.inputters.vocab import Vocab
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.loading import load_checkpoint_data

INITS = ("pretrained", "random_sphere", "random_cube", "mixed", "softmax")
UNK_VECTORS = ("average", "random", "zero", "vocab_mean")
DEFAULT_ALPHA = 0.5
# The random draws of -init and -unk_vector use their own stream, (seed, 7), so that the
# pretrained table (whose missing-word rows come from the stream of -seed alone) stays
# bit-identical to what earlier versions wrote.
_STREAM = 7

TABLE_HELP = """
target table (-init, -alpha, -unk_vector, -center, -center_pcs; the .dec table only):
  -init pretrained      the file's vectors, as above (default)
  -init random_sphere   every row but padding drawn uniformly on the unit sphere: a standard
                        normal vector made unit length (Tokarchuk & Niculae 2024, "spherical
                        uniform"); no vector file needed with -dim
  -init random_cube     every row but padding a random corner of the hypercube {-1,1}^dim
                        scaled by 1/sqrt(dim) (their "hypercube": Rademacher coordinates, unit
                        length; two distinct rows have cosine at most 1 - 2/dim)
  -init mixed           the paper's combined embeddings: row = unit(alpha * e_pre +
                        (1 - alpha) * e_rand), e_pre the -init pretrained -normalize row
                        (so -normalize is required), e_rand the -init random_sphere row of
                        the same -seed (alpha 1: the normalised pretrained table; alpha 0:
                        exactly the random_sphere table)
  -init softmax         the output embeddings of a trained softmax model (-from_model CKPT:
                        the rows of its output layer, aligned to this vocabulary by word; a
                        word the model lacks gets a random unit row; <unk> keeps the model's
                        row unless -unk_vector says otherwise); no vector file. Tokarchuk &
                        Niculae 2022 compare such targets with pretrained ones
  random_*/mixed rows are unit length whatever -normalize says; -seed fixes them.
  -center removes the mean of the vocabulary-word rows (rows 4..V-1) from every row except
  padding and zero rows; -center_pcs K then also removes the projections on the top K
  principal directions of the centred word rows (Mu & Viswanath 2018). Rows are made unit
  length again afterwards with -normalize or a random/mixed -init.
"""


def check_table_args(opt: argparse.Namespace) -> None:
    """Conflicting table options -> UserError, before anything is read; each value's own range (-alpha, -dim,
    -center_pcs) is its TableConfig field's (inputters/table_options.py), checked first."""
    if opt.alpha is not None and opt.init != "mixed":
        raise UserError(f"-alpha is the weight of -init mixed; it means nothing with -init {opt.init}")
    if opt.init == "mixed":
        opt.alpha = DEFAULT_ALPHA if opt.alpha is None else opt.alpha
    random_init = opt.init in ("random_sphere", "random_cube")
    if (opt.from_model is not None) != (opt.init == "softmax"):
        raise UserError("-init softmax takes its rows from -from_model CKPT, and -from_model is only read by it")
    if opt.init == "softmax":
        if opt.emb_file_dec is not None or opt.dim is not None:
            raise UserError(
                "-init softmax takes the rows and their dimension from -from_model: leave out -emb_file_dec and -dim"
            )
        if opt.unk_vector == "average":
            raise UserError(
                "-unk_vector average is the mean of pretrained vectors, which -init softmax does not "
                "read; leave it out (the model's own <unk> row) or choose random, zero or vocab_mean"
            )
        opt.unk_vector = opt.unk_vector or "model"
        return
    if opt.emb_file_dec is None:
        if not random_init:
            raise UserError(f"-init {opt.init} reads the pretrained vectors: give -emb_file_dec FILE")
        if opt.dim is None:
            raise UserError(f"-init {opt.init} without -emb_file_dec: give the dimension with -dim N (N >= 1)")
    if opt.init == "mixed" and not opt.normalize:  # e_pre, <unk>'s average included, is the unit-length table
        raise UserError("-init mixed combines the unit-length pretrained rows: add -normalize")
    if opt.unk_vector is None:
        opt.unk_vector = "random" if random_init else "average"
    if opt.unk_vector == "average" and random_init:
        raise UserError(
            f"-unk_vector average is the mean of pretrained vectors, which -init {opt.init} does not use; "
            "choose random, zero or vocab_mean"
        )
    if opt.center_pcs:
        opt.center = True


def unit(rows: ArrayLike) -> np.ndarray:
    """``rows`` scaled to unit length (a new array); zero rows stay zero. rows: [..., dim]."""
    rows = np.array(rows, dtype=np.float64)
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    np.divide(rows, norms, out=rows, where=norms > 0)
    return rows


def random_sphere(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """``[n, dim]`` rows uniform on the unit sphere: standard normal vectors made unit length."""
    return unit(rng.standard_normal((n, dim)))


def random_cube(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """``[n, dim]`` random corners of {-1, 1}^dim scaled by 1/sqrt(dim): unit length."""
    signs = rng.integers(0, 2, size=(n, dim), dtype=np.int8) * 2 - 1
    return signs.astype(np.float64) / np.sqrt(dim)


RANDOM_INITS = {"random_sphere": random_sphere, "random_cube": random_cube}


def mix(pretrained: ArrayLike, random: ArrayLike, alpha: float) -> np.ndarray:
    """The combined rows ``unit(alpha * unit(pretrained) + (1 - alpha) * random)``.

    pretrained, random: [n, dim]; random rows are unit length."""
    return unit(alpha * unit(pretrained) + (1.0 - alpha) * np.asarray(random, dtype=np.float64))


def init_stream(seed: int) -> np.random.Generator:
    return np.random.default_rng((seed, _STREAM))


def empty_table(vocab: Vocab, dim: int) -> tuple[np.ndarray, None, list[str]]:
    """The starting point of a random table made without a vector file: ``([V, dim] zeros,
    None for the missing words: no file, so none is missing from it, report lines)``."""
    if len(vocab) <= len(SPECIALS):
        raise UserError("the target vocabulary has no words besides the specials")
    report = [
        f"target table: no vector file; {len(vocab) - len(SPECIALS):,} words (+{len(SPECIALS)} specials), "
        f"dimension {dim}"
    ]
    return np.zeros((len(vocab), dim), np.float64), None, report


def softmax_table(path: str, vocab: Vocab, opt: argparse.Namespace) -> tuple[np.ndarray, list[str], list[str]]:
    """-init softmax: the output-layer rows [V_model, hidden] of a softmax checkpoint, aligned to
    ``vocab`` by word. Returns ``(table float64 [V, hidden], missing words, report lines)``; a
    word the model lacks gets a random unit row (-seed), made unit length with the others under
    -normalize."""
    data = load_checkpoint_data(path, "a checkpoint written by train.py")
    model_opt = data.get("opt", {}) if isinstance(data, dict) else {}
    weight = data.get("model", {}).get("generator.proj.weight") if isinstance(data, dict) else None
    if weight is None or model_opt.get("loss") != "ce" or model_opt.get("generator") != "linear":
        raise UserError(
            f"-from_model {path}: expected a checkpoint of a softmax model (-loss ce -generator linear), "
            f"whose output layer has one row per word (got -loss {model_opt.get('loss')} -generator "
            f"{model_opt.get('generator')})"
        )
    words = list(data["vocab"]["tgt"])
    rows = {w: i for i, w in enumerate(words)}
    weight = weight.double().numpy()
    dim = weight.shape[1]
    table = np.zeros((len(vocab), dim), np.float64)
    draw = random_sphere(len(vocab), dim, init_stream(opt.seed))
    missing = []
    for i, w in enumerate(vocab.itos):
        if i == PAD_ID:
            continue
        if w in rows:
            table[i] = weight[rows[w]]
        else:
            table[i] = draw[i] * (1.0 if opt.normalize else float(np.sqrt((weight * weight).sum(1).mean())))
            if i >= len(SPECIALS):
                missing.append(w)
    if opt.normalize:
        table[:] = unit(table)
    n_words = len(vocab) - len(SPECIALS)
    report = [
        f"target table: the output layer of {path} ({len(words):,} rows of dimension {dim}, loss ce)",
        f"  {n_words - len(missing):,} of {n_words:,} vocabulary words have a row; {len(missing):,} got random "
        f"unit rows (seed {opt.seed}); <unk>, <s>, </s>: the model's rows"
        + ("; every row made unit length" if opt.normalize else ""),
    ]
    return table, missing, report


def apply_init(table: np.ndarray, opt: argparse.Namespace) -> str | None:
    """Replace the rows of ``table`` [V, dim] by ``opt.init``'s; returns the report line.

    random_*: every row but padding is a fresh draw (row i depends only on -seed, V and dim).
    mixed: every non-zero row but padding is mixed with the random_sphere draw of that row."""
    if opt.init in ("pretrained", "softmax"):
        return None
    v, dim = table.shape
    draw = RANDOM_INITS.get(opt.init, random_sphere)(v, dim, init_stream(opt.seed))
    rows = np.arange(v) != PAD_ID
    if opt.init == "mixed":
        rows &= np.linalg.norm(table, axis=1) > 0
        table[rows] = mix(table[rows], draw[rows], opt.alpha)
        return (
            f"  init mixed: alpha {opt.alpha:g} x pretrained direction + {1 - opt.alpha:g} x spherical draw, "
            f"made unit length (Tokarchuk & Niculae 2024), seed {opt.seed}"
        )
    table[rows] = draw[rows]
    return (
        f"  init {opt.init}: every row but padding is a random unit vector (Tokarchuk & Niculae 2024), seed {opt.seed}"
    )


def apply_unk(table: np.ndarray, opt: argparse.Namespace) -> str | None:
    """Set the ``<unk>`` row as ``opt.unk_vector`` says (after :func:`apply_init`); returns the
    report line, or None where the pretrained build's own line says it all."""
    kind = opt.unk_vector
    unit_rows = opt.normalize or opt.init not in ("pretrained", "softmax")
    if kind == "model":
        return None
    if kind == "average":
        # the pretrained build already holds the average; apply_init mixed it for -init mixed
        return "  <unk>: the average above, mixed like a word row" if opt.init == "mixed" else None
    if kind == "zero":
        table[UNK_ID] = 0.0
        return "  <unk>: zeros (-unk_vector zero)"
    if kind == "vocab_mean":
        mean = table[len(SPECIALS) :].mean(axis=0)
        table[UNK_ID] = unit(mean) if unit_rows else mean
        return "  <unk>: mean of the vocabulary-word rows" + (", made unit length" if unit_rows else "")
    if opt.init in RANDOM_INITS:
        return f"  <unk>: the {opt.init} draw of its row (-unk_vector random)"
    # a direction independent of every other row: a draw from its own sub-stream
    direction = random_sphere(1, table.shape[1], np.random.default_rng((opt.seed, _STREAM, UNK_ID)))[0]
    if opt.init == "mixed" or opt.normalize:
        scale, note = 1.0, "unit length"
    else:
        words = table[len(SPECIALS) :]
        scale = float(np.sqrt((words * words).sum(axis=1).mean()))
        note = f"length {scale:.4g}, the RMS length of the word rows"
    table[UNK_ID] = direction * scale
    return f"  <unk>: a random Gaussian direction, {note} (-unk_vector random, seed {opt.seed})"


def center(table: np.ndarray, n_pcs: int = 0) -> tuple[float, float]:
    """Remove the mean word row (rows ``len(SPECIALS):``) and then the top ``n_pcs`` principal
    directions of the centred word rows from every row except padding and zero rows, in
    place. Returns ``(norm of the removed mean, fraction of the centred word rows' variance
    on the removed directions)``. table: [V, dim] float64."""
    words = table[len(SPECIALS) :]
    if n_pcs >= min(words.shape):
        raise UserError(f"-center_pcs {n_pcs}: expected fewer than min(words, dim) = {min(words.shape)} directions")
    rows = np.linalg.norm(table, axis=1) > 0
    rows[PAD_ID] = False
    mean = words.mean(axis=0)
    table[rows] -= mean
    if n_pcs == 0:
        return float(np.linalg.norm(mean)), 0.0
    _, sing, vt = np.linalg.svd(table[len(SPECIALS) :], full_matrices=False)
    pcs = vt[:n_pcs]  # [n_pcs, dim], orthonormal
    table[rows] -= (table[rows] @ pcs.T) @ pcs
    var = sing**2
    return float(np.linalg.norm(mean)), float(var[:n_pcs].sum() / var.sum()) if var.sum() > 0 else 0.0


def transform_target(table: ArrayLike, opt: argparse.Namespace) -> tuple[np.ndarray, list[str]]:
    """embeddings_to_torch.py's target-table steps after the pretrained build: -init, then
    -unk_vector, then -center/-center_pcs and renormalisation. Returns ``(table float64
    [V, dim], report lines)``; row PAD_ID is zero."""
    table = np.array(table, dtype=np.float64)
    report = [line for line in (apply_init(table, opt), apply_unk(table, opt)) if line]
    if opt.center:
        mean_norm, var = center(table, opt.center_pcs)
        line = f"  -center: removed the mean word row (norm {mean_norm:.4g})"
        if opt.center_pcs:
            line += f" and the top {opt.center_pcs} principal directions ({100 * var:.1f}% of the centred variance)"
        if opt.normalize or opt.init not in ("pretrained", "softmax"):
            table[:] = unit(table)
            line += "; rows made unit length again"
        report.append(line)
    table[PAD_ID] = 0.0
    return table, report
