#!/usr/bin/env python
"""Tables (markdown) and the convergence plot from the small files lab/recipes/multi30k.sh copies to
its RESULTS folder. Every number printed comes from those files.

    python lab/tools/m30k_report.py -results lab/results/m30k_fr-en -png lab/results/m30k_fr-en/convergence.png \\
        > lab/results/m30k_fr-en/tables.md
"""

import argparse
import glob
import json
import os
import re
import statistics
import sys

from lab import log_path, open_text
from onmt_cont.utils.errors import UserError, cli_main
from onmt_cont.utils.overwrite import refuse_output_over_inputs

TESTS = ["test_2016_flickr", "test_2017_flickr"]
BINS = ["0", "1", "2", "3", "4", "5-9", "10-99", "100-999", "1000+"]


def read(path):
    with open_text(path) as f:
        return f.read()


def read_accuracy(path):
    """lab/tools/accuracy_at_k.py's JSON line; anything else (not JSON, nested too deep, fields missing)
    is an error naming the file."""
    try:
        a = json.loads(read(path))
        for k in (1, 2, 5, 10):
            float(a[f"acc@{k}"]) + float(a[f"known_acc@{k}"])
        int(a["positions"]) + int(a["unk_positions"])
    except (ValueError, RecursionError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not the JSON line of lab/tools/accuracy_at_k.py ({type(exc).__name__})") from None
    return a


def bleu(path):
    text = read(path)
    d = re.search(r"sacreBLEU \(detokenized\): ([\d.]+)\s+(\S+)", text)
    t = re.search(r"tokenized BLEU: ([\d.]+)\s+(\S+)", text)
    s = re.search(r"translated (\d+) lines in ([\d.]+)s", text)
    return {
        "detok": float(d.group(1)),
        "sig": d.group(2),
        "tok": float(t.group(1)),
        "tok_sig": t.group(2),
        "secs": float(s.group(2)) if s else None,
    }


def train_info(run_dir):
    log = read(log_path(os.path.join(run_dir, "train.log")))  # lab/results: train.log.gz
    info = {}
    m = re.search(r"parameters: encoder ([\d,]+); decoder ([\d,]+)", log)
    info["encoder"], info["decoder"] = (m.group(1), m.group(2)) if m else ("?", "?")
    m = re.search(r"input layer \(decoder embeddings\): ([\d,]+) trainable, ([\d,]+) frozen", log)
    info["input"] = f"{m.group(1)} (+{m.group(2)} frozen)" if m else "?"
    m = re.search(r"output layer \(([^)]*)\): ([\d,]+) trainable(?:, ([\d,]+) frozen)?", log)
    info["output"] = (f"{m.group(2)}" + (f" (+{m.group(3)} frozen)" if m.group(3) else "")) if m else "?"
    if m and "joint" in m.group(1):
        info["output"] += " (joint; shares E with the input layer)"
    m = re.search(r"ReWE head: ([\d,]+) trainable", log)
    if m:
        info["output"] += f" + ReWE head {m.group(1)} (training only)"
    # validations: (step, loss); epoch ends: step -> epoch
    epochs = {int(s): int(e) for e, s in re.findall(r"epoch (\d+) done at step (\d+)", log)}
    best_step, best = None, None
    lines = log.splitlines()
    for i, line in enumerate(lines):
        m = re.search(r"validation at step (\d+): loss (\S+);(.*)", line)
        if m and i + 1 < len(lines) and "new best validation loss" in lines[i + 1]:
            best_step, best = int(m.group(1)), (float(m.group(2)), m.group(3).strip())
    info["epochs"] = max(epochs.values()) if epochs else 0
    info["best_epoch"] = epochs.get(best_step, f"step {best_step}")
    info["best_val"] = best
    tps = [float(x) for x in re.findall(r"([\d.]+) tgt tok/s", log)]
    info["tok_s"] = sum(tps) / len(tps) if tps else None
    tt = os.path.join(run_dir, "train_time.txt")
    walls = [int(w) for w in re.findall(r"train_wall_s (\d+)", read(tt))] if os.path.exists(tt) else []
    info["wall"] = sum(walls) if walls else None
    return info


def f1_table(path):
    rows = {}
    for line in read(path).splitlines()[1:]:
        parts = line.split("\t")
        rows[parts[0]] = {"ref": int(parts[1]), "f1": float(parts[6])}
    return rows


def f1_section(runs, t, kind, title):
    """Markdown lines: the rare-word F1 table of test ``t`` over the rows with a ``t.KIND.f1.txt``."""
    cols, counts = [], None
    for d in runs:
        f = sorted(glob.glob(os.path.join(d, f"{t}.{kind}.f1.txt")))
        if f:
            tab = f1_table(f[0])
            cols.append((os.path.basename(d), tab))
            counts = counts or tab
    if not cols:
        return []
    out = [f"\n### Unigram F1 by training frequency of the word, {t} ({title})\n"]
    out.append("| train freq | ref tokens | " + " | ".join(c[0] for c in cols) + " |")
    out.append("|---|---|" + "---|" * len(cols))
    for b in BINS:
        out.append(f"| {b} | {counts[b]['ref']} | " + " | ".join(f"{c[1][b]['f1']:.3f}" for c in cols) + " |")
    return out


def unk_table(runs):
    """Markdown lines: per row with lab/recipes/unk_analysis.sh's files, the share of <unk> among the
    greedy output's words and tokenized BLEU without -replace_unk, with it (the main table's), and
    with -ban_unk_token -replace_unk."""
    out = []
    for t in TESTS:
        rows = []
        for d in runs:
            raw, ban = os.path.join(d, f"{t}.raw.bleu.txt"), os.path.join(d, f"{t}.banunk.bleu.txt")
            main = glob.glob(os.path.join(d, f"{t}.beam1.*.bleu.txt"))
            if not (os.path.exists(raw) and os.path.exists(ban) and main):
                continue
            m = re.search(r"decoded (\d+) words, (\d+) of them <unk>", read(raw))
            share = f"{100 * int(m.group(2)) / max(int(m.group(1)), 1):.1f}" if m else "–"
            rows.append(
                f"| {os.path.basename(d)} | {share} | {bleu(raw)['tok']:.2f} | {bleu(main[0])['tok']:.2f} | "
                f"{bleu(ban)['tok']:.2f} |"
            )
        if rows:
            out.append(f"\n### <unk> in the greedy output and what -replace_unk adds, {t} (tokenized BLEU)\n")
            out.append(
                "| row | % of output words that are <unk> | BLEU without -replace_unk | with -replace_unk "
                "| -ban_unk_token -replace_unk |"
            )
            out.append("|---|---|---|---|---|")
            out.extend(rows)
    return out


def seed_table(runs):
    """Mean ± sample standard deviation of sacreBLEU over the seeds of each configuration and
    decoding that has two or more seeds (markdown lines; none when no row has)."""
    groups = {}  # (config, beam) -> {test: [BLEU per seed]}
    for d in runs:
        cfg = os.path.basename(d).rsplit(".s", 1)[0]
        for t in TESTS:
            for f in glob.glob(os.path.join(d, f"{t}.beam*.bleu.txt")):
                beam = int(re.search(r"\.beam(\d+)\.", os.path.basename(f)).group(1))
                groups.setdefault((cfg, beam), {}).setdefault(t, []).append(bleu(f)["detok"])
    rows = [(k, v) for k, v in groups.items() if min(len(x) for x in v.values()) >= 2 and len(v) == len(TESTS)]
    if not rows:
        return []
    out = ["### sacreBLEU over seeds (mean ± std)\n"]
    out.append("| row | decoding | seeds | " + " | ".join(TESTS) + " |")
    out.append("|---|---|---|" + "---|" * len(TESTS))
    for (cfg, beam), v in rows:
        cells = [f"{statistics.mean(v[t]):.2f} ± {statistics.stdev(v[t]):.2f}" for t in TESTS]
        dec = "greedy" if beam == 1 else f"beam {beam}"
        out.append(f"| {cfg} | {dec} | {min(len(x) for x in v.values())} | " + " | ".join(cells) + " |")
    out.append("")
    return out


@cli_main
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-results", required=True)
    p.add_argument("-png", help="write the convergence plot here")
    p.add_argument("-converge", nargs="+", default=["ce", "nllvmf_reg12_tied", "synmargin_proj"])
    args = p.parse_args(argv)
    refuse_output_over_inputs({"-png": args.png}, {"-results": args.results})
    runs = sorted(d for d in glob.glob(os.path.join(args.results, "*.s*")) if os.path.isdir(d))
    if not runs:
        p.error(f"-results {args.results}: no run folders (NAME.sSEED/) there; lab/recipes/multi30k.sh writes them")
    order = [
        "ce",
        "l2",
        "cosine",
        "maxmargin",
        "nllvmf_reg1",
        "nllvmf_reg1_tied",
        "nllvmf_reg12",
        "nllvmf_reg12_tied",
        "synmargin_proj",
        "synmargin_diff",
        "margin_random",
        "rewe",
        "joint",
        "ce_word2bpe",
        "ce_bpe2bpe",
        "nllvmf_bpe2word_tied",
    ]
    runs.sort(
        key=lambda d: (
            order.index(os.path.basename(d).rsplit(".s", 1)[0])
            if os.path.basename(d).rsplit(".s", 1)[0] in order
            else 99,
            d,
        )
    )
    out = []
    sigs = set()
    out.extend(seed_table(runs))
    out.append("### BLEU (best-validation-loss checkpoint; -replace_unk -lookup_dict)\n")
    out.append("| row | decoding | " + " | ".join(f"{t} sacreBLEU | {t} tok. BLEU" for t in TESTS) + " |")
    out.append("|---|---|" + "---|---|" * len(TESTS))
    for d in runs:
        name = os.path.basename(d)
        beams = sorted(
            {
                int(m)
                for f in glob.glob(os.path.join(d, "*.beam*.bleu.txt"))
                for m in re.findall(r"\.beam(\d+)\.", os.path.basename(f))
            }
        )
        for b in beams:
            cells = []
            for t in TESTS:
                f = glob.glob(os.path.join(d, f"{t}.beam{b}.*.bleu.txt"))
                if f:
                    r = bleu(f[0])
                    sigs.update([r["sig"], "tokenized: " + r["tok_sig"]])
                    cells += [f"{r['detok']:.2f}", f"{r['tok']:.2f}"]
                else:
                    cells += ["–", "–"]
            dec = "greedy" if b == 1 else f"beam {b}"
            out.append(f"| {name} | {dec} | " + " | ".join(cells) + " |")
    out.append("\nSignatures: " + "; ".join(f"`{s}`" for s in sorted(sigs)) + "\n")

    out.append("### Training\n")
    out.append(
        "| row | epochs | best val. epoch | best val. loss; stats | train wall s | mean tgt tok/s | encoder "
        "| decoder (excl. input layer) | input layer | output layer |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    for d in runs:
        if not os.path.exists(log_path(os.path.join(d, "train.log"))):
            continue
        i = train_info(d)
        bv = f"{i['best_val'][0]:.4f}; {i['best_val'][1]}" if i["best_val"] else "–"
        tok = f"{i['tok_s']:.0f}" if i["tok_s"] else "–"
        out.append(
            f"| {os.path.basename(d)} | {i['epochs']} | {i['best_epoch']} | {bv} | {i['wall']} | {tok} | "
            f"{i['encoder']} | {i['decoder']} | {i['input']} | {i['output']} |"
        )

    for t in TESTS:
        out.extend(f1_section(runs, t, "beam1.*", "greedy / the row's first decoding, -replace_unk"))
    for t in TESTS:
        out.extend(f1_section(runs, t, "raw", "greedy, without -replace_unk: the words the model itself produced"))

    for t in TESTS:
        out.append(f"\n### Accuracy@k with teacher forcing, {t}\n")
        out.append("| row | positions (unk) | acc@1 | acc@2 | acc@5 | acc@10 | known-word acc@1 | @2 | @5 | @10 |")
        out.append("|---|---|---|---|---|---|---|---|---|---|")
        for d in runs:
            f = os.path.join(d, f"{t}.acc.txt")
            if not os.path.exists(f):
                continue
            a = read_accuracy(f)
            out.append(
                f"| {os.path.basename(d)} | {a['positions']} ({a['unk_positions']}) | "
                + " | ".join(f"{100 * a[f'acc@{k}']:.1f}" for k in (1, 2, 5, 10))
                + " | "
                + " | ".join(f"{100 * a[f'known_acc@{k}']:.1f}" for k in (1, 2, 5, 10))
                + " |"
            )

    out.extend(unk_table(runs))

    curves = {}  # row -> [(epochs, BLEU)]; step checkpoints are placed at step / (steps per epoch)
    for d in runs:
        cfg = os.path.basename(d).rsplit(".s", 1)[0]
        es = os.path.join(d, "epoch_steps.txt")
        ends = [int(x) for x in re.findall(r"epoch \d+ done at step (\d+)", read(es))] if os.path.exists(es) else []
        spe = ends[0] if ends else None
        pts = {}
        # step files first, so that an epoch checkpoint wins over a step checkpoint at the same x
        for f in sorted(glob.glob(os.path.join(d, "val.*.bleu.txt")), key=lambda f: ".epoch" in f):
            m = re.search(r"val\.(epoch|step)(\d+)\.", os.path.basename(f))
            n = int(m.group(2))
            if m.group(1) == "epoch":
                pts[float(n)] = bleu(f)["detok"]
            elif spe:
                pts[round(n / spe, 2)] = bleu(f)["detok"]
        if pts and cfg in args.converge:
            curves[os.path.basename(d)] = sorted(pts.items())
    if curves:
        out.append("\n### Validation sacreBLEU (greedy, -replace_unk) by epochs trained\n")
        xs = sorted({e for v in curves.values() for e, _ in v})
        out.append("| row | " + " | ".join(f"{e:g} ep." for e in xs) + " |")
        out.append("|---|" + "---|" * len(xs))
        for k, v in curves.items():
            dv = dict(v)
            out.append(f"| {k} | " + " | ".join(f"{dv[e]:.2f}" if e in dv else "–" for e in xs) + " |")
    if args.png and curves:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
        for k, v in curves.items():
            ax.plot([e for e, _ in v], [b for _, b in v], marker="o", label=k)
        ax.set_xlabel("epochs trained (step checkpoints at step / steps per epoch)")
        ax.set_ylabel("val sacreBLEU (greedy, detokenized)")
        ax.set_title(
            "Multi30k "
            + os.path.basename(os.path.normpath(args.results)).replace("m30k_", "")
            + ": validation BLEU by epochs trained"
        )
        xs = sorted({e for v in curves.values() for e, _ in v})
        # every checkpoint's position when they fit; whole epochs only on longer runs
        ax.set_xticks(xs if xs[-1] <= 3 else range(int(xs[-1]) + 1))
        ax.set_xlim(left=0)
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.png)
    print("\n".join(out))


if __name__ == "__main__":
    sys.exit(main())
