"""Where a training update's time goes: train.py run in this process under torch.profiler, its operators
ranked by self CPU time (the time inside each operator, not its callees), with their share of the whole.

    python lab/bench/profile_train.py -top 30 -- -data D -save_model /tmp/p ... -train_steps 200 -threads 1

Everything after ``--`` goes to train.py unchanged. The profiler adds a few microseconds to every operator,
so compare the shares of one run, not its seconds with an unprofiled run's.
"""

import argparse
import sys

from torch.profiler import ProfilerActivity, profile

from onmt_cont.bin.train import main as train_main


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        raise SystemExit("profile_train.py: give train.py's arguments after '--'")
    cut = argv.index("--")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-top", type=int, default=30, help="operators to list")
    p.add_argument("-sort", default="self_cpu_time_total", help="a key_averages() column to rank by")
    p.add_argument("-shapes", action="store_true", help="one row per operator and input shapes")
    args = p.parse_args(argv[:cut])
    with profile(activities=[ProfilerActivity.CPU], record_shapes=args.shapes) as prof:
        train_main(argv[cut + 1 :])
    events = prof.key_averages(group_by_input_shape=args.shapes)
    total = sum(e.self_cpu_time_total for e in events)
    print(f"profiled: {total / 1e6:.1f} s of self CPU time in {len(events)} operators")
    print(
        events.table(
            sort_by=args.sort,
            row_limit=args.top,
            max_name_column_width=48,
            max_shapes_column_width=90 if args.shapes else 80,
        )
    )


if __name__ == "__main__":
    main()
