"""Training speed and memory per loss: Kumar & Tsvetkov (2019), Table 4 and Figure 1 (left).

Every row of a table is the same encoder and decoder (SIZES in benchlib.py: LSTMs of two sizes,
and a Transformer as wide as the small LSTM) with only its generator and loss options changed,
built, checked and trained by the toolkit's own code (train.py's parser and checks,
build_model, build_loss, Trainer.train_step). Target tables are random unit vectors (m = 300)
and batches random ids of realistic lengths (benchlib.synthetic_batch).

One update = forward + loss + backward + gradient clipping + Adam step, as train.py does it.
Each row runs in its own worker process, so that its peak memory is its own: on CPU the
growth of the worker's peak RSS from before the model is built (parameters, gradients,
Adam state, activations, frozen tables), on GPU torch.cuda.max_memory_allocated. The parent
keeps the ce worker and as many other rows as memory allows alive, and after their warm-up
updates times one update of each in turn, ``-reps`` times, in a rotating order, so that slow
changes in machine load hit every row alike; a row's "x ce" is its median update time over
the median of the ce updates timed in the same turns.

    python lab/bench/train_speed.py -quick          # < 1 min on 2 CPU cores: ce, nllvmf, cosine
    python lab/bench/train_speed.py                 # the tables of docs/benchmarks.md (2-core CPU: ~20 min)
    python lab/bench/train_speed.py -sizes small,transformer -rows "ce,nllvmf,nllvmf tied" -sweep ""
                                                # LSTM against Transformer, one run
    python lab/bench/train_speed.py -gpu 0          # on a GPU, plus the largest batch per memory budget

Rows with ``-negatives gold_nn`` on a CPU above EXACT_UP_TO words time the update with a random
stand-in of the neighbour lookup (train_worker.neighbour_standin); lab/bench/neighbour_table.py
times the one-off search itself.
"""

import argparse
import json
import os
import sys
import time

import torch

from lab.bench import benchlib
from lab.bench.benchlib import UserError
from lab.bench.train_worker import Worker, WorkerFailed

# (label, train.py options). Rows whose options this checkout's train.py does not know, or
# refuses here (a missing package included), print "n/a (refused)" and train.py's reason.
ROWS = [
    ("ce", ["-loss", "ce"]),
    ("nllvmf", ["-loss", "nllvmf"]),
    ("nllvmf approx", ["-loss", "nllvmf", "-vmf_approx"]),
    ("nllvmf tied", ["-loss", "nllvmf", "-tie_emb"]),
    ("cosine", ["-loss", "cosine"]),
    ("l2", ["-loss", "l2"]),
    ("maxmargin", ["-loss", "maxmargin"]),
    ("synmargin_proj", ["-loss", "synmargin_proj"]),
    ("margin_random", ["-loss", "margin_random"]),
    # maxmargin's hardest negatives without scanning the table, and the contrastive losses
    ("maxmargin gold_nn", ["-loss", "maxmargin", "-negatives", "gold_nn"]),
    ("maxmargin gold_nn5", ["-loss", "maxmargin", "-negatives", "gold_nn", "-num_negatives", "5"]),
    ("maxmargin ann", ["-loss", "maxmargin", "-negatives", "ann"]),
    ("maxmargin inbatch", ["-loss", "maxmargin", "-negatives", "inbatch,random"]),
    ("infonce", ["-loss", "infonce"]),
    ("nllvmf_nce", ["-loss", "nllvmf_nce"]),
    # the same with -tie_emb, whose input layer does not grow with the vocabulary: what "flat" is checked on
    ("margin_random tied", ["-loss", "margin_random", "-tie_emb"]),
    ("maxmargin tied", ["-loss", "maxmargin", "-tie_emb"]),
    ("maxmargin flat tied", ["-loss", "maxmargin", "-negatives", "inbatch,random,gold_nn", "-tie_emb"]),
    ("infonce tied", ["-loss", "infonce", "-tie_emb"]),
    ("nllvmf_nce tied", ["-loss", "nllvmf_nce", "-tie_emb"]),
    # the recommended continuous row (-sampling_correction -word_bias), and its target table trained (-train_table)
    ("nllvmf_nce tied both", ["-loss", "nllvmf_nce", "-tie_emb", "-sampling_correction", "-word_bias"]),
    (
        "nllvmf_nce tied both train_table",
        ["-loss", "nllvmf_nce", "-tie_emb", "-sampling_correction", "-word_bias", "-train_table"],
    ),
    ("ReWE", ["-loss", "ce", "-rewe_lambda", "20"]),
    ("joint full", ["-loss", "ce", "-generator", "joint"]),
    ("joint sampled", ["-loss", "ce", "-generator", "joint", "-joint_sample", "0.25"]),
]
ROW_ARGS = dict(ROWS)
SOFTMAX_ROWS = {"ce", "ReWE", "joint full", "joint sampled"}
# The paper's sizes are slow on a CPU (several seconds per update): by default only the rows that
# Table 4 and the targets need run there on CPU; -paper_rows all runs every row.
PAPER_ROWS_CPU = {50_000: ["ce", "nllvmf", "nllvmf tied", "cosine"], 300_000: ["ce", "nllvmf tied"]}
# The Transformer size (benchlib.SIZES): softmax against NLLvMF rows by default, on any
# device; -transformer_rows all runs every row.
TRANSFORMER_ROWS = {50_000: ["ce", "nllvmf", "nllvmf tied"], 300_000: ["ce", "nllvmf tied"]}
SWEEP_ROWS = ["ce", "nllvmf", "maxmargin"]
# At a larger vocabulary these rows are also timed at 50K words in the same rounds ("nllvmf @50K"),
# so that "flat in the vocabulary size" compares updates timed side by side, not minutes apart.
FLAT_ROWS = [
    "nllvmf",
    "nllvmf tied",
    "margin_random",
    "maxmargin gold_nn",
    "maxmargin gold_nn5",
    "maxmargin ann",
    "maxmargin inbatch",
    "infonce",
    "nllvmf_nce",
    "margin_random tied",
    "maxmargin tied",
    "maxmargin flat tied",
    "infonce tied",
    "nllvmf_nce tied",
]
RESERVE_MB = 2500  # memory left free for the rest of the machine when adding a worker


def build_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-quick", action="store_true", help="small size, 50K words, ce/nllvmf/cosine: under a minute")
    p.add_argument(
        "-sizes",
        default=None,
        help="comma list of benchlib.SIZES: small, paper (LSTMs), transformer (default: small,transformer,paper; "
        "none: the sweep only)",
    )
    p.add_argument("-vocabs", default="50000,300000", help="target vocabulary sizes")
    p.add_argument("-rows", default="all", help="comma list of row labels, or all")
    p.add_argument(
        "-paper_rows",
        default=None,
        help="rows at the paper's size (default on CPU: those Table 4 and the targets need; on GPU: all)",
    )
    p.add_argument(
        "-transformer_rows",
        default=None,
        help="rows at the transformer size (default: ce, nllvmf, nllvmf tied at 50K; ce, nllvmf tied at "
        "larger vocabularies; all: every row)",
    )
    p.add_argument("-batch_size", type=int, default=64, help="sentences per batch (Table 4: 64)")
    p.add_argument(
        "-tgt_len_sd",
        type=float,
        default=benchlib.TGT_LEN_SD,
        help="spread (sd, words) of the target lengths in a batch; the decoder also runs over the padding",
    )
    p.add_argument("-warmup", type=int, default=1, help="untimed updates per worker first")
    p.add_argument("-reps", type=int, default=3, help="timed updates per row (median), small size")
    p.add_argument("-paper_reps", type=int, default=3, help="timed updates per row (median), paper size")
    p.add_argument("-sweep", default="32,64,128,256,512", help="batch sizes of the samples/s sweep ('' skips it)")
    p.add_argument("-sweep_rows", default=",".join(SWEEP_ROWS), help="rows in the sweep")
    p.add_argument("-sweep_size", default=None, help="model size of the sweep (default: small on CPU, paper on GPU)")
    p.add_argument("-sweep_reps", type=int, default=2, help="timed updates per batch size in the sweep")
    p.add_argument("-plot", default="docs/bench_batch_sweep.png", help="where the sweep's PNG goes")
    p.add_argument("-json", default=None, help="also write every measurement to this JSON file")
    benchlib.add_setup_args(p)
    p.add_argument("-concurrent", type=int, default=6, help="most workers alive at once (memory permitting)")
    p.add_argument(
        "-mem_budget_gb",
        type=float,
        default=12.0,
        help="GPU only: find the largest batch whose peak memory fits this (paper: a 12 GB TITAN X)",
    )
    p.add_argument("-seed", type=int, default=1)
    return p


def split_name(name, vocab):
    """'nllvmf @50K' -> ('nllvmf', 50000); a plain row name runs at the group's ``vocab``."""
    if " @" in name:
        label, v = name.rsplit(" @", 1)
        return label, int(v.rstrip("K")) * 1000
    return name, vocab


def start_worker(name, size, vocab, args):
    label, vocab = split_name(name, vocab)
    return Worker(name, ROW_ARGS[label], size, vocab, args.gpu, args.threads, args.seed, args.tgt_len_sd)


def mem_available_mb(gpu=None):
    """Memory a new worker can still take: host RAM, and on GPU the device's free memory too."""
    if gpu is not None:
        return min(torch.cuda.mem_get_info(gpu)[0] / 2**20, mem_available_mb())
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("inf")


def availability(label, size):
    """None when this checkout implements the row, else why not."""
    try:
        benchlib.row_options(size, ROW_ARGS[label])
    except UserError as exc:
        return f"n/a (refused): {exc}"
    return None


def measure_group(size, vocab, labels, reps, args):
    """Time and measure ``labels`` (ce first) at one size and vocabulary. Returns {label: result}."""
    out = {}
    batch = args.batch_size
    ce = start_worker("ce", size, vocab, args)
    ce.step(batch, args.warmup)
    ce_times = []
    pending = [lab for lab in labels if lab != "ce"]
    biggest = 0.0
    while pending:
        active = []
        while pending and len(active) < args.concurrent - 1:
            if active and mem_available_mb(args.gpu) - 1.1 * biggest < RESERVE_MB:
                break
            label = pending.pop(0)
            try:
                w = start_worker(label, size, vocab, args)
                if "error" in w.info:
                    out[label] = {"na": f"n/a (refused): {w.info['error']}"}
                    continue
                w.step(batch, args.warmup)
                biggest = max(biggest, w.ask({"cmd": "stats"})["peak_mb"])
                active.append(w)
            except WorkerFailed as exc:
                out[label] = {"na": f"failed: {exc}"}
        times = {w.label: [] for w in [ce] + active}
        for rep in range(reps):
            turn = [ce] + active
            for w in turn[rep % len(turn) :] + turn[: rep % len(turn)]:  # no row always follows the same one
                try:
                    times[w.label] += w.step(batch)
                except WorkerFailed as exc:  # killed (out of memory?): the row fails, the others go on
                    if w is ce:
                        raise
                    out[w.label] = {"na": f"failed: {exc}"}
                    active.remove(w)
        round_ce = times["ce"]
        ce_times += round_ce
        for w in active:
            out[w.label] = result(w, times[w.label], round_ce, batch)
            w.close()
        print(f"  [{size} {vocab:,}] {', '.join(w.label for w in active) or '-'} done", file=sys.stderr, flush=True)
    if not ce_times:  # ce alone (every other row filtered out or refused)
        for _ in range(reps):
            ce_times += ce.step(batch)
    out["ce"] = result(ce, ce_times, ce_times, batch)
    ce.close()
    return out


def result(worker, times, ce_times, batch):
    stats = worker.ask({"cmd": "stats", "batch": batch})
    tokens = stats["tokens"]
    step = benchlib.median(times)
    return {
        "step_s": step,
        "times": times,
        "spread": (max(times) - min(times)) / step,
        "ratio": step / benchlib.median(ce_times),
        "samples_s": batch / step,
        "tokens_s": tokens / step,
        "peak_mb": stats["peak_mb"],
        "params": worker.info["params"],
        "lr": worker.info["lr"],
    }


def add_flops(results, size, vocab, args):
    from flops import step_flops

    # The batch the workers time (train_worker.Model.batch: same seed, same lengths).
    b = args.batch_size
    batch = benchlib.synthetic_batch(
        b, benchlib.SRC_VOCAB, vocab, "cpu", seed=args.seed + b, tgt_len_sd=args.tgt_len_sd
    )
    counts = {}
    for name, res in results.items():
        if "na" in res:
            continue
        label, v = split_name(name, vocab)
        opt = benchlib.row_options(size, ROW_ARGS[label])
        with_table = benchlib.needs_table(opt, v)
        count = step_flops(opt, benchlib.SRC_VOCAB, v, batch, with_table, benchlib.EMB_DIM)
        res["flops"] = counts[name] = count["total"]
    for label, n in counts.items():
        results[label]["flops_ratio"] = n / counts["ce"] if "ce" in counts else None


def fmt_count(n):
    for unit, div in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= div:
            return f"{n / div:.3g}{unit}"
    return str(n)


def print_table(title, results, labels):
    print(f"\n{title}")
    head = (
        f"{'row':17s} {'step ms':>8s} {'spread':>6s} {'x ce':>5s} {'FLOPs x ce':>10s} "
        f"{'samples/s':>9s} {'tokens/s':>8s} "
        f"{'peak MB':>8s} {'mem x ce':>8s} {'in layer':>8s} {'out layer':>9s} {'trainable':>9s}"
    )
    print(head)
    print("-" * len(head))
    ce_mem = results.get("ce", {}).get("peak_mb")
    notes = []
    for label in labels:
        r = results.get(label)
        if r is None:
            continue
        if "na" in r:
            why = r["na"].split(": ", 1)
            print(f"{label:17s} {why[0]}")
            if len(why) > 1:
                notes.append(f"  {label}: {why[1]}")
            continue
        p = r["params"]
        mem_ratio = f"{r['peak_mb'] / ce_mem:8.2f}" if ce_mem else f"{'':8s}"
        fl = f"{r['flops_ratio']:10.2f}" if r.get("flops_ratio") is not None else f"{'':10s}"
        print(
            f"{label:17s} {1000 * r['step_s']:8.0f} {100 * r['spread']:5.0f}% {r['ratio']:5.2f} {fl} "
            f"{r['samples_s']:9.1f} "
            f"{r['tokens_s']:8.0f} {r['peak_mb']:8.0f} {mem_ratio} {fmt_count(p['input_layer']):>8s} "
            f"{fmt_count(p['output_layer']):>9s} {fmt_count(p['trainable']):>9s}"
        )
    for note in notes:
        print(note)


def sweep(args, size, labels, batches):
    """samples/s per row and batch size at 50K words, workers timed in turn at each batch size."""
    vocab = 50_000
    curves = {}
    workers = []
    for label in labels:
        if availability(label, size):
            continue
        try:
            w = start_worker(label, size, vocab, args)
            if "error" in w.info:
                continue
            w.step(batches[0], args.warmup)
            workers.append(w)
        except WorkerFailed as exc:
            print(f"  sweep: {exc}", file=sys.stderr)
    for b in batches:
        times = {w.label: [] for w in workers}
        if args.gpu is not None:
            for w in workers:
                w.step(b, 1)  # the caching allocator grows to the new batch's activations: untimed
        for rep in range(args.sweep_reps):
            for w in workers[rep % len(workers) :] + workers[: rep % len(workers)]:
                times[w.label] += w.step(b)
        for w in workers:
            # The batch sizes only grow, so the peak so far is this batch size's peak.
            peak = w.ask({"cmd": "stats", "batch": b})["peak_mb"]
            curves.setdefault(w.label, []).append((b, b / benchlib.median(times[w.label]), peak))
        print(f"  [sweep {size}] batch {b} done", file=sys.stderr, flush=True)
    for w in workers:
        w.close()
    return curves


def plot(curves, path, title):
    """Two panels: training samples/s (the paper's Figure 1, left) and peak memory, by batch size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), dpi=120)
    for label, points in curves.items():
        style = {"marker": "o", "label": label, "linestyle": "--" if label in SOFTMAX_ROWS else "-"}
        axes[0].plot([p[0] for p in points], [p[1] for p in points], **style)
        axes[1].plot([p[0] for p in points], [p[2] / 1024 for p in points], **style)
    batches = [p[0] for p in next(iter(curves.values()))]
    for ax, ylabel in zip(axes, ("training samples / s", "peak memory (GiB)"), strict=True):
        ax.set_xscale("log", base=2)
        ax.set_xticks(batches)
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.minorticks_off()
        ax.set_xlabel("batch size (sentences)")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def check_targets(all_results):
    """The training-speed targets (update time as a ratio to ce's), checked against what was measured:
    (target, verdict) lines."""
    lines = []
    paper50 = all_results.get(("paper", 50_000), {})
    small50 = all_results.get(("small", 50_000), {})

    def ok(label, res):
        return res.get(label) and "na" not in res[label]

    if ok("nllvmf", paper50):
        r = paper50["nllvmf"]["ratio"]
        lines.append(
            f"paper size, 50K: nllvmf step time {r:.2f}x ce (target <= 0.40): {'met' if r <= 0.4 else 'MISSED'}"
        )
    for size in ("paper", "small", "transformer"):
        a, b = all_results.get((size, 50_000), {}), all_results.get((size, 300_000), {})
        if ok("ce", a) and ok("ce", b):
            g = b["ce"]["step_s"] / a["ce"]["step_s"]
            lines.append(f"{size} size, ce: step time at 300K / at 50K = {g:.2f} (softmax grows)")
        for label in FLAT_ROWS:
            if ok(label, b) and ok(f"{label} @50K", b):
                g = b[label]["step_s"] / b[f"{label} @50K"]["step_s"]
                lines.append(
                    f"{size} size, {label}: step time at 300K / at 50K = {g:.2f} (target <= 1.10): "
                    f"{'met' if g <= 1.1 else 'MISSED'}"
                )
    for size, res in (("paper", paper50), ("small", small50)):
        if ok("nllvmf", res) and ok("cosine", res):  # each over the ce updates of its own round
            r = res["nllvmf"]["ratio"] / res["cosine"]["ratio"]
            lines.append(
                f"{size} size, 50K: nllvmf / cosine step time = {r:.2f} (target within 10%): "
                f"{'met' if abs(r - 1) <= 0.1 else 'MISSED'}"
            )
        if ok("nllvmf", res) and ok("ce", res):
            r = res["nllvmf"]["peak_mb"] / res["ce"]["peak_mb"]
            lines.append(
                f"{size} size, 50K: nllvmf / ce peak memory = {r:.2f} (target <= 0.50): "
                f"{'met' if r <= 0.5 else 'MISSED'}"
            )
    return lines


def speedups(all_results, labels=("nllvmf", "nllvmf tied")):
    """Lines of ce's update time over each continuous row's (the inverse of "x ce", same turns), per
    size and vocabulary: how the continuous output's speed-up compares between architectures."""
    keys = [k for k in all_results if isinstance(k, tuple)]
    if not keys:
        return []
    lines = [f"{'size':12s} {'target words':>12s} " + " ".join(f"{lab:>12s}" for lab in labels)]
    for size, vocab in keys:
        res = all_results[(size, vocab)]
        cells = [
            f"{1 / res[lab]['ratio']:11.2f}x" if lab in res and "na" not in res[lab] else f"{'-':>12s}"
            for lab in labels
        ]
        lines.append(f"{size:12s} {vocab:12,d} " + " ".join(cells))
    return lines


def table_labels(args, size, vocab, wanted, device):
    """The rows of one table: at the paper's size on CPU only those PAPER_ROWS_CPU names, at the
    transformer size those TRANSFORMER_ROWS names (or what -paper_rows / -transformer_rows say)."""
    if size == "transformer" and args.transformer_rows != "all":
        pick = args.transformer_rows.split(",") if args.transformer_rows else TRANSFORMER_ROWS.get(vocab, ["ce"])
        return [lab for lab in wanted if lab in pick]
    if size != "paper" or args.quick or args.paper_rows == "all":
        return list(wanted)
    if args.paper_rows:
        return [lab for lab in wanted if lab in args.paper_rows.split(",")]
    if device.type == "cuda":
        return list(wanted)
    return [lab for lab in wanted if lab in PAPER_ROWS_CPU.get(vocab, ["ce", "nllvmf"])]


def run_tables(args, device, sizes, vocabs, wanted):
    all_results = {}
    for size in sizes:
        for vocab in vocabs:
            labels = table_labels(args, size, vocab, wanted, device)
            results = {lab: {"na": why} for lab in labels if (why := availability(lab, size))}
            runnable = [lab for lab in labels if lab not in results]
            if vocab != 50_000:
                twins = [f"{lab} @50K" for lab in FLAT_ROWS if lab in runnable]
                labels, runnable = labels + twins, runnable + twins
            if "ce" not in runnable:
                sys.exit("train_speed.py: the ce row is the reference and must run")
            reps = args.paper_reps if size == "paper" else args.reps
            results.update(measure_group(size, vocab, runnable, reps, args))
            add_flops(results, size, vocab, args)
            all_results[(size, vocab)] = results
            title = f"{size} size ({benchlib.describe(size)}), {vocab:,} target words, batch {args.batch_size}"
            print_table(title, results, labels)
    return all_results


def run_sweep(args, device):
    size = args.sweep_size or ("paper" if device.type == "cuda" else "small")
    batches = [int(b) for b in args.sweep.split(",")]
    curves = sweep(args, size, args.sweep_rows.split(","), batches)
    for what, col, fmt in (("samples/s", 1, "7.1f"), ("peak memory (MB)", 2, "7.0f")):
        print(f"\n{what} by batch size ({size} size, 50,000 target words)")
        print(f"{'row':17s} " + " ".join(f"{b:>7d}" for b in batches))
        for label, points in curves.items():
            print(f"{label:17s} " + " ".join(f"{p[col]:{fmt}}" for p in points))
    if curves:
        where = "GPU" if device.type == "cuda" else f"CPU, {args.threads} thread(s)"
        plot(curves, args.plot, f"{size} size, 50K target words, {where}")
        print(f"wrote {args.plot}")
    return curves


def run_max_batch(args, wanted):
    print(f"\nlargest batch within {args.mem_budget_gb:g} GB (paper size, 50,000 words)")
    for label in wanted:
        if availability(label, "paper"):
            continue
        try:
            w = start_worker(label, "paper", 50_000, args)
            if "error" not in w.info:
                found = w.ask({"cmd": "max_batch", "budget_mb": args.mem_budget_gb * 1024})["max_batch"]
                print(f"{label:17s} {found}")
            w.close()
        except WorkerFailed as exc:
            print(f"{label:17s} failed: {exc}")


def main():
    args = build_parser().parse_args()
    device = benchlib.setup(args, "train_speed.py")
    start = time.perf_counter()
    if args.quick:
        sizes, vocabs, wanted = ["small"], [50_000], ["ce", "nllvmf", "cosine"]
        args.sweep, args.reps = "", 3
    else:
        sizes = [] if args.sizes == "none" else (args.sizes or "small,transformer,paper").split(",")
        unknown = [size for size in sizes if size not in benchlib.SIZES]
        if unknown:
            sys.exit(f"train_speed.py: unknown size(s) {unknown}; sizes: {', '.join(benchlib.SIZES)}")
        vocabs = [int(v) for v in args.vocabs.split(",")]
        wanted = [lab for lab, _ in ROWS] if args.rows == "all" else args.rows.split(",")
    unknown = [lab for lab in wanted if lab not in ROW_ARGS]
    if unknown:
        sys.exit(f"train_speed.py: unknown row(s) {unknown}; rows: {', '.join(ROW_ARGS)}")
    print(f"machine: {benchlib.machine_line(device)}")
    print(
        f"batch {args.batch_size} sentences of {benchlib.SRC_LEN} source words, target lengths sd "
        f"{args.tgt_len_sd:g}; source vocabulary "
        f"{benchlib.SRC_VOCAB:,}; m = {benchlib.EMB_DIM}; warm-up {args.warmup}; median of {args.reps} "
        f"(small) / {args.paper_reps} (paper) timed updates"
    )
    all_results = run_tables(args, device, sizes, vocabs, wanted)
    if args.sweep:
        all_results["sweep"] = run_sweep(args, device)
    if device.type == "cuda":
        run_max_batch(args, wanted)
    lines = speedups(all_results)
    if lines:
        print("\nspeed-up over ce (ce's update time / the row's, timed in the same turns)")
        for line in lines:
            print(f"  {line}")
    lines = check_targets(all_results)
    if lines:
        print("\ntargets")
        for line in lines:
            print(f"  {line}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({" ".join(map(str, k)) if isinstance(k, tuple) else k: v for k, v in all_results.items()}, f)
    print(f"\n(ran {time.perf_counter() - start:.0f} s; load average {os.getloadavg()[0]:.1f} at the end)")
    # The headline, at the paper's size when it ran: ce/nllvmf is the speed-up (Table 4: 400 ms /
    # 170 ms = 2.35), the inverse of the "x ce" column.
    size = "paper" if ("paper", 50_000) in all_results else "small"
    res = all_results.get((size, 50_000), {})
    if "nllvmf" in res and "na" not in res["nllvmf"]:
        print(f"{size} size: nllvmf step time = {res['nllvmf']['ratio']:.2f} x ce")
        print(f"ce/nllvmf step time ratio at 50000 words: {1 / res['nllvmf']['ratio']:.2f}")


if __name__ == "__main__":
    main()
