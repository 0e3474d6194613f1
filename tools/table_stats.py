#!/usr/bin/env python
"""Dispersion and hubness of embedding tables written by embeddings_to_torch.py.

    python tools/table_stats.py runs/m30k_fr-en/emb.dec.pt -vocab runs/m30k_fr-en/data.vocab.pt

Every non-zero row is a candidate of nearest-neighbour decoding, so every non-zero row is
analysed (zero rows, such as padding, are never a cosine neighbour and are left out), by
cosine similarity:

* dispersion: the mean cosine over all pairs of distinct rows (exact, from the identity
  sum_{i != j} u_i.u_j = |sum_i u_i|^2 - n for unit rows u_i), and the mean cosine of each
  row to its nearest neighbour;
* hubness: N_k(y), the number of rows that have y among their k nearest neighbours (the
  row itself excluded); its skewness (population skewness, as scipy.stats.skew) and the top
  hubs. A table without hubs has N_k close to k everywhere; Radovanovic et al. (2010) call
  a skewness well above 1 hubness;
* the <unk> row's N_k and its rank among the rows (1 = the top hub).

The k nearest neighbours are exact: the rows are compared chunk by chunk (-chunk rows at a
time, memory chunk x rows floats). With several tables a markdown table compares them.
"""

import argparse

import torch

from onmt_cont.constants import SPECIALS, UNK_ID
from onmt_cont.inputters.vocab import load_vocabs
from onmt_cont.utils.errors import UserError, cli_main
from onmt_cont.utils.loading import load_checkpoint_data


def k_occurrence(units, k, chunk=1024):
    """``(N_k [n] long, nearest-neighbour cosine [n])`` of unit rows ``units`` [n, dim]: how
    many rows have each row among their ``k`` nearest neighbours by cosine (self excluded)."""
    n = units.size(0)
    counts = torch.zeros(n, dtype=torch.long)
    nn_cos = torch.empty(n, dtype=units.dtype)
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        sim = units[start:stop] @ units.T  # [chunk, n]
        sim[torch.arange(stop - start), torch.arange(start, stop)] = float("-inf")
        vals, idx = sim.topk(k, dim=1)
        nn_cos[start:stop] = vals[:, 0]
        counts += torch.bincount(idx.flatten(), minlength=n)
    return counts, nn_cos


def skewness(x):
    """Population skewness m3 / m2^1.5 (scipy.stats.skew's default); 0 for a constant."""
    x = x.double()
    d = x - x.mean()
    m2 = (d * d).mean()
    return float((d**3).mean() / m2**1.5) if m2 > 0 else 0.0


def table_stats(table, k=10, chunk=1024, top=10):
    """The statistics of one table [V, dim] (see the module docstring) as a dict; row ids
    refer to the table's rows."""
    table = table.double()
    norms = table.norm(dim=1)
    rows = torch.nonzero(norms > 0).flatten()
    n = rows.numel()
    if n <= k:
        raise UserError(f"the table has {n} non-zero rows: need more than k = {k}")
    units = table[rows] / norms[rows, None]
    total = units.sum(0)
    mean_cos = float((total @ total - n) / (n * (n - 1)))
    counts, nn_cos = k_occurrence(units.float(), k, chunk)
    order = sorted(range(n), key=lambda i: (-int(counts[i]), int(rows[i])))
    stats = {
        "rows": table.size(0),
        "dim": table.size(1),
        "analysed": n,
        "zero_rows": [int(r) for r in torch.nonzero(norms == 0).flatten()],
        "k": k,
        "mean_cos": mean_cos,
        "mean_nn_cos": float(nn_cos.double().mean()),
        "skew": skewness(counts),
        "max_nk": int(counts.max()),
        "antihubs": int((counts == 0).sum()),
        "hubs": [(int(rows[i]), int(counts[i])) for i in order[:top]],
        "unk_nk": None,
        "unk_rank": None,
    }
    where = torch.nonzero(rows == UNK_ID).flatten()
    if where.numel():
        unk_nk = int(counts[where[0]])
        stats["unk_nk"] = unk_nk
        stats["unk_rank"] = 1 + int((counts > unk_nk).sum())
    return stats


def load_table(path):
    try:
        table = load_checkpoint_data(path)
    except UserError:
        raise
    except Exception as exc:
        raise UserError(f"{path}: not a table written by embeddings_to_torch.py ({exc})") from None
    if not isinstance(table, torch.Tensor) or table.dim() != 2 or not table.is_floating_point():
        raise UserError(f"{path}: expected a float tensor [rows, dim] written by embeddings_to_torch.py")
    if not torch.isfinite(table).all():
        raise UserError(f"{path}: the table holds NaN or inf")
    return table


def load_names(vocab_path, n_rows, table_path):
    """Target tokens of ``PREFIX.vocab.pt``, checked against the table's row count."""
    try:
        _, tgt, _ = load_vocabs(vocab_path)
    except UserError:
        raise
    except Exception as exc:
        raise UserError(f"{vocab_path}: not a vocabulary file written by preprocess.py ({exc})") from None
    if len(tgt.itos) != n_rows:
        raise UserError(f"{table_path} has {n_rows} rows but the target vocabulary {vocab_path} has {len(tgt.itos)}")
    return tgt.itos


def row_name(row, names):
    if names is not None:
        return names[row]
    return SPECIALS[row] if row < len(SPECIALS) else f"#{row}"


def report(path, s, names):
    zero = ", ".join(row_name(r, names) for r in s["zero_rows"][:5]) + (", ..." if len(s["zero_rows"]) > 5 else "")
    k = s["k"]
    lines = [
        f"{path}: [{s['rows']}, {s['dim']}]; {s['analysed']:,} non-zero rows analysed"
        + (f" ({len(s['zero_rows'])} zero rows left out: {zero})" if s["zero_rows"] else ""),
        f"  dispersion: mean pairwise cosine {s['mean_cos']:.4f} (exact, all pairs); "
        f"mean nearest-neighbour cosine {s['mean_nn_cos']:.4f}",
        f"  hubness: N_{k} skewness {s['skew']:.2f}; max N_{k} {s['max_nk']:,}; "
        f"rows in nobody's {k} nearest neighbours: {s['antihubs']:,} ({100 * s['antihubs'] / s['analysed']:.1f}%)",
        f"  top {len(s['hubs'])} hubs (N_{k}): " + ", ".join(f"{row_name(r, names)} {c}" for r, c in s["hubs"]),
    ]
    if s["unk_nk"] is None:
        lines.append(f"  {SPECIALS[UNK_ID]}: a zero row, never a cosine neighbour")
    else:
        lines.append(f"  {SPECIALS[UNK_ID]}: N_{k} {s['unk_nk']:,}, rank {s['unk_rank']:,} of {s['analysed']:,}")
    return "\n".join(lines)


def markdown(paths, all_stats):
    k = all_stats[0]["k"]
    out = [
        f"| table | mean cos | mean NN cos | N_{k} skew | max N_{k} | N_{k} = 0 | <unk> N_{k} (rank) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for path, s in zip(paths, all_stats, strict=True):
        unk = "zero row" if s["unk_nk"] is None else f"{s['unk_nk']} ({s['unk_rank']})"
        out.append(
            f"| {path} | {s['mean_cos']:.3f} | {s['mean_nn_cos']:.3f} | {s['skew']:.2f} | {s['max_nk']} | "
            f"{100 * s['antihubs'] / s['analysed']:.1f}% | {unk} |"
        )
    return "\n".join(out)


def build_parser():
    p = argparse.ArgumentParser(
        prog="table_stats.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("tables", nargs="+", metavar="TABLE.pt", help="tables written by embeddings_to_torch.py")
    p.add_argument("-vocab", default=None, help="PREFIX.vocab.pt: name the hubs by their target words")
    p.add_argument("-k", type=int, default=10, help="neighbourhood size of N_k (default 10)")
    p.add_argument("-top", type=int, default=10, help="how many hubs to list (default 10)")
    p.add_argument("-chunk", type=int, default=1024, help="rows compared at a time; memory ~ chunk x rows floats")
    p.add_argument("-threads", type=int, default=1, help="torch threads (default 1)")
    return p


@cli_main
def main(argv=None):
    opt = build_parser().parse_args(argv)
    for flag in ("k", "top", "chunk", "threads"):
        if getattr(opt, flag) < 1:
            raise UserError(f"-{flag} {getattr(opt, flag)}: expected a positive integer")
    torch.set_num_threads(opt.threads)
    all_stats = []
    for path in opt.tables:
        table = load_table(path)
        names = load_names(opt.vocab, table.size(0), path) if opt.vocab else None
        try:
            all_stats.append(table_stats(table, opt.k, opt.chunk, opt.top))
        except UserError as exc:
            raise UserError(f"{path}: {exc}") from None
        print(report(path, all_stats[-1], names))
    if len(opt.tables) > 1:
        print()
        print(markdown(opt.tables, all_stats))


if __name__ == "__main__":
    main()
