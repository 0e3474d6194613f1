"""A Transformer-Tiny training update on one thread, as train.py takes it, on real batches: float32 against
what train.py picks (-amp auto), optionally against an earlier checkout and OpenNMT-py 3.5.1.

Every row is a worker process that builds train.py's Run from a preset (configs/transformer_tiny_*.yaml) on
real data and takes the first -batches batches of its first epoch (the same batches in every row of a preset).
The parent then times each batch's update in every row in turn, rotating the order, so that a machine whose load
changes slows every row alike; a row's figure is its mean over the batches (what a run's wall time follows), and
"x fp32" the ratio of the sums over the same batches. The first -warmup updates are not timed.

    python lab/bench/tiny_step.py -data runs/tiny_en-de/joint/data              # the softmax preset
    python lab/bench/tiny_step.py -data runs/tiny_en-de/joint/data \\
        -continuous_data runs/tiny_en-de/srcbpe/data -tgt_emb runs/tiny_en-de/srcbpe/emb.dec.pt \\
        -baseline /tmp/before -peer -profile                                    # docs/benchmarks.md's table

``-baseline DIR``: a checkout of an earlier commit (``git worktree add DIR COMMIT``), whose rows run its own
onmt_cont with -amp as that commit had it (absent or given). ``-peer``: OpenNMT-py's onmt_train at the softmax
preset's settings (lab/bench/peer_decode.py says how it installs), its seconds per update from the difference of
two runs' wall times (-peer_steps, e.g. 8 and 24 updates), so that start-up and vocabulary loading cancel.
``-profile``: where the time goes, per row, the operators' self time per update (torch.profiler over -profile_steps
updates; the profiler adds a few microseconds to each operator). FLOPs are counted over one update of each row
(torch.utils.flop_counter: matrix products, forward and backward) and set against the best product rate measured
here on the update's own product sizes (the output staying in the caches), in float32 and in bfloat16.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def worker():
    """One row: a JSON config line, then one reply per command line."""
    cfg = json.loads(sys.stdin.readline())
    import torch  # onmt_cont below is the checkout on PYTHONPATH (a -baseline row's) or this one

    from onmt_cont import opts
    from onmt_cont.train.checks import check_options, expand_layers
    from onmt_cont.train.optim import learning_rate, set_learning_rate
    from onmt_cont.train.options import build_parser
    from onmt_cont.train.session import Run
    from onmt_cont.utils.memory import keep_freed_memory
    from onmt_cont.utils.threads import apply_threads

    def reply(obj):
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    apply_threads(1)
    keep_freed_memory()
    parser = build_parser()
    opt = opts.parse(parser, cfg["argv"])
    expand_layers(opt, parser.get_default)
    if opt.alignment_layer == "mean":
        opt.alignment_layer = None
    check_options(opt)
    run = Run(opt, torch.device("cpu"))
    batches = []
    for _, _, b in run.iterator.epoch(0, 0, 0):
        batches.append(b)
        if len(batches) == cfg["batches"]:
            break
    trainer = run.trainer
    reply(
        {"amp": str(trainer.amp), "note": run.amp_note, "tokens": [int((b["tgt"][:, 1:] != 0).sum()) for b in batches]}
    )

    def update(i):
        set_learning_rate(run.optimizer, learning_rate(opt, i + 1))
        start = time.perf_counter()
        trainer.train_step(batches[i], i + 1)
        return time.perf_counter() - start

    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["cmd"] == "step":
            reply({"s": update(cmd["i"])})
        elif cmd["cmd"] == "flops":
            from torch.utils.flop_counter import FlopCounterMode

            counter = FlopCounterMode(display=False)
            with counter:
                update(cmd["i"])
            reply({"flops": counter.get_total_flops()})
        elif cmd["cmd"] == "profile":
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for i in cmd["steps"]:
                    update(i)
            n = len(cmd["steps"])
            rows = sorted(((e.key, e.self_cpu_time_total / 1e6 / n) for e in prof.key_averages()), key=lambda r: -r[1])
            reply({"ops": rows[: cmd["top"]], "total": sum(r[1] for r in rows)})
        else:
            return


class Row:
    def __init__(self, label, argv, batches, code=None):
        self.label, self.times = label, []
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        if code:  # ahead of the editable install's finder, which comes after the path entries
            env["PYTHONPATH"] = os.pathsep.join(p for p in (code, os.environ.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "-worker"],
            cwd=code or ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.info = self.ask({"argv": argv, "batches": batches})

    def ask(self, obj):
        self.proc.stdin.write(json.dumps(obj) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"tiny_step.py: the worker of {self.label} ended (exit {self.proc.wait()})")
        return json.loads(line)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def product_peak(dtype, reps=5):
    """The best GFLOP/s on one thread of the update's own products whose output stays in the caches (a
    feed-forward layer over 8,192 positions, a 256-row chunk of the output layer): this core's practical limit."""
    import torch

    torch.set_num_threads(1)
    best = 0.0
    for rows, width, out in ((8192, 128, 256), (256, 128, 9728)):
        a, b = torch.randn(rows, width, dtype=dtype), torch.randn(out, width, dtype=dtype)
        torch.mm(a, b.t())
        seconds = min(_timed(lambda a=a, b=b: [torch.mm(a, b.t()) for _ in range(10)]) for _ in range(reps)) / 10
        best = max(best, 2 * rows * width * out / seconds / 1e9)
    return best


def _timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def peer_seconds(data, steps, work):
    """OpenNMT-py 3.5.1 at the softmax preset's settings: seconds per update from two runs' wall times."""
    src, tgt = os.path.join(data, "train.en"), os.path.join(data, "train.de")
    walls = []
    for n in steps:
        config = os.path.join(work, f"peer{n}.yaml")
        with open(config, "w", encoding="utf-8") as f:
            f.write(
                "\n".join(
                    [
                        f"save_data: {work}/peer",
                        f"src_vocab: {work}/peer.vocab",
                        f"tgt_vocab: {work}/peer.vocab",
                        "share_vocab: true",
                        "overwrite: true",
                        "data:",
                        "  corpus_1:",
                        f"    path_src: {src}",
                        f"    path_tgt: {tgt}",
                        f"save_model: {work}/peer{n}",
                        f"save_checkpoint_steps: {10 * n}",
                        f"train_steps: {n}",
                        f"valid_steps: {10 * n}",
                        "report_every: 1000",
                        "seed: 1",
                        "encoder_type: transformer",
                        "decoder_type: transformer",
                        "position_encoding: true",
                        "layers: 4",
                        "hidden_size: 128",
                        "word_vec_size: 128",
                        "heads: 4",
                        "transformer_ff: 256",
                        "dropout: [0.3]",
                        "attention_dropout: [0.0]",
                        "share_embeddings: true",
                        "share_decoder_embeddings: true",
                        "label_smoothing: 0.1",
                        "batch_type: tokens",
                        "batch_size: 8192",
                        "optim: adam",
                        "adam_beta2: 0.98",
                        "decay_method: rsqrt",
                        "learning_rate: 0.005",
                        "warmup_steps: 2000",
                        "max_grad_norm: 25",
                        "param_init: 0",
                        "param_init_glorot: true",
                        "num_workers: 0",
                        "bucket_size: 32768",
                        "src_seq_length: 1000",
                        "tgt_seq_length: 1000",
                    ]
                )
                + "\n"
            )
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
        if not os.path.exists(f"{work}/peer.vocab"):
            subprocess.run(
                ["onmt_build_vocab", "-config", config, "-n_sample", "-1"], env=env, check=True, capture_output=True
            )
        start = time.perf_counter()
        res = subprocess.run(["onmt_train", "-config", config], env=env, capture_output=True, text=True)
        if res.returncode:
            raise SystemExit(f"tiny_step.py: onmt_train failed: {res.stderr.strip().splitlines()[-1:]}")
        walls.append(time.perf_counter() - start)
    return (walls[1] - walls[0]) / (steps[1] - steps[0])


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["-worker"]:
        return worker()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "-data", help="preprocess.py -share_vocab data of joint BPE (the softmax preset; none: no softmax rows)"
    )
    p.add_argument(
        "-softmax_config",
        default=os.path.join(ROOT, "configs/transformer_tiny_softmax.yaml"),
        help="the softmax rows' preset (e.g. configs/transformer_softmax.yaml on the quickstart's data)",
    )
    p.add_argument(
        "-continuous_config",
        default=os.path.join(ROOT, "configs/transformer_tiny_continuous.yaml"),
        help="the continuous rows' preset",
    )
    p.add_argument("-continuous_data", help="source pieces against target words (the continuous preset)")
    p.add_argument("-tgt_emb", help="the continuous preset's target table (embeddings_to_torch.py)")
    p.add_argument("-batches", type=int, default=20, help="real batches timed per row")
    p.add_argument("-warmup", type=int, default=3, help="first updates not timed")
    p.add_argument("-baseline", help="a checkout of an earlier commit: its rows too")
    p.add_argument("-baseline_amp", default="-amp", help="how that checkout is told to autocast")
    p.add_argument(
        "-baseline_fp32",
        default="",
        help="how that checkout is told to train in float32: nothing before -amp auto (d1abba4), '-amp false' after",
    )
    p.add_argument("-peer", action="store_true", help="OpenNMT-py 3.5.1 at the softmax preset's settings")
    p.add_argument(
        "-peer_text",
        help="folder with train.en and train.de in joint BPE for OpenNMT-py "
        "(lab/recipes/transformer_tiny.sh's OUT/bpe)",
    )
    p.add_argument("-peer_steps", default="8,24", help="the two OpenNMT-py run lengths")
    p.add_argument(
        "-fp32_only",
        action="store_true",
        help="only the float32 rows (a CPU without bfloat16 dot products, where -amp's rows took 8x as long)",
    )
    p.add_argument("-profile", action="store_true", help="operators' self time per update, per row")
    p.add_argument("-profile_steps", type=int, default=3)
    args = p.parse_args(argv)
    presets = [("softmax", ["-config", os.path.abspath(args.softmax_config), "-data", args.data])] if args.data else []
    if args.continuous_data:
        presets.append(
            (
                "continuous",
                [
                    "-config",
                    os.path.abspath(args.continuous_config),
                    "-data",
                    args.continuous_data,
                    "-tgt_emb",
                    args.tgt_emb,
                ],
            )
        )
    common = ["-save_model", os.path.join(tempfile.mkdtemp(prefix="tiny_step_"), "m"), "-threads", "1", "-seed", "1"]
    rows = []
    for name, argv in presets:
        rows.append(Row(f"{name} fp32", argv + common + ["-amp", "false"], args.batches))
        if not args.fp32_only:
            rows.append(
                Row(
                    f"{name} -amp auto" if name == "softmax" else f"{name} -amp",
                    argv + common + ["-amp", "auto" if name == "softmax" else "true"],
                    args.batches,
                )
            )
        if args.baseline:
            code = os.path.abspath(args.baseline)
            base = [a.replace(ROOT, code) for a in argv] + common
            rows.append(Row(f"{name} fp32, before", base + args.baseline_fp32.split(), args.batches, code))
            if not args.fp32_only:
                rows.append(
                    Row(f"{name} {args.baseline_amp}, before", base + args.baseline_amp.split(), args.batches, code)
                )
    for r in rows:
        print(f"{r.label}: autocast {r.info['amp']}" + (f" ({r.info['note']})" if r.info.get("note") else ""))
    for i in range(args.batches):
        order = rows[i % len(rows) :] + rows[: i % len(rows)]
        for r in order:
            s = r.ask({"cmd": "step", "i": i})["s"]
            if i >= args.warmup:
                r.times.append(s)
    flops = {r.label: r.ask({"cmd": "flops", "i": args.warmup})["flops"] for r in rows}
    import torch

    peaks = {"float32": product_peak(torch.float32), "bfloat16": product_peak(torch.bfloat16)}
    print(
        f"\n{args.batches - args.warmup} updates timed per row (batches {args.warmup}..{args.batches - 1} of "
        "epoch 0), "
        f"one thread; product limit here: float32 {peaks['float32']:.0f}, bfloat16 {peaks['bfloat16']:.0f} GFLOP/s"
    )
    print("| row | s / update (mean) | median | x fp32 | GFLOP / update | GFLOP/s | share of the limit |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    ref = {}
    for r in rows:
        preset = r.label.split()[0]
        ref.setdefault(preset, sum(r.times))
        mean = statistics.mean(r.times)
        gf = flops[r.label] / 1e9
        limit = peaks["bfloat16" if "bfloat16" in r.info["amp"] else "float32"]
        print(
            f"| {r.label} | {mean:.3f} | {statistics.median(r.times):.3f} | {ref[preset] / sum(r.times):.2f} | "
            f"{gf:.1f} | {gf / mean:.0f} | {gf / mean / limit:.0%} |"
        )
    if args.peer and args.data and not args.fp32_only:
        steps = [int(x) for x in args.peer_steps.split(",")]
        with tempfile.TemporaryDirectory() as work:
            s = peer_seconds(args.peer_text or args.data, steps, work)
        fast = statistics.mean(next(r for r in rows if r.label.startswith("softmax") and "-amp" in r.label).times)
        print(
            f"| OpenNMT-py 3.5.1, softmax preset's settings, fp32 | {s:.3f} | | | | | |\n"
            f"softmax -amp auto over OpenNMT-py: {s / fast:.2f}x its updates per second"
        )
    if args.profile:
        for r in rows:
            got = r.ask(
                {"cmd": "profile", "steps": list(range(args.warmup, args.warmup + args.profile_steps)), "top": 12}
            )
            print(f"\n{r.label}: {got['total']:.3f} s of operators' self time per update under the profiler")
            for name, s in got["ops"]:
                print(f"  {name[:60]:60s} {s:.3f} s  {s / got['total']:.0%}")
    for r in rows:
        r.close()


if __name__ == "__main__":
    main()
