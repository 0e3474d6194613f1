"""Results tables (markdown) from the run folders that the recipes in lab/recipes/ write
(train.log, or train.log.gz as lab/results keeps it, train_time.txt, TEST.bleu.txt; word_choice.sh also choice.txt,
the checkpoint and -decode_prior picked on validation, and TEST.calibration.json, lab/tools/rare_word_f1.py's ratios):
per run, BLEU on both test sets with and without -replace_unk, the <unk> rate and the training
time; per row with two or more seeds, mean ± std.

    python lab/tools/quality_report.py lab/results/quality_fr-en/*
    python lab/tools/quality_report.py -calibration_ref t_ce lab/results/word_choice_fr-en/t_*

-calibration_ref ROW adds a calibration check: for every other row, each training-count
bin's output/reference ratio (mean over the row's seeds) divided by ROW's (mean over its seeds),
in the bins with at least -min_ref reference tokens; a quotient beyond 1.3 either way is marked.
It then gives each row's output tokens per bin and how many of them are correct (match a reference
token), since a row can write a bin's words less often than ROW and still get more of them right.
"""

import argparse
import json
import os
import re
import sys

from lab import log_path, open_text
from onmt_cont.utils.errors import UserError, cli_main

TESTS = ("test_2016_flickr", "test_2017_flickr")
CALIBRATION_BINS = ("1", "2-4", "5-9", "10-99")
ALL_BINS = ("1", "2-4", "5-9", "10-99", "100-999", "1000+")  # bin 0: words never seen, ratio 0 for every row
CALIBRATION_TOLERANCE = 1.3


def read(path):
    try:
        with open_text(path) as f:
            return f.read()
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: invalid UTF-8 ({exc.reason} at byte {exc.start})") from None


def read_calibration(path):
    """A TEST.calibration.json of lab/tools/rare_word_f1.py -json: {bin: {"ref", "hyp", "match", "ratio"}}.
    Anything else (not JSON, nested too deep for the parser, other fields) names the file."""
    try:
        data = json.loads(read(path))
    except (ValueError, RecursionError) as exc:
        raise UserError(f"{path}: not JSON ({type(exc).__name__})") from None
    fields = ("ref", "hyp", "match", "ratio")  # ratio in every bin; the others, where there, numbers

    def ok(v):
        return (
            isinstance(v, dict)
            and isinstance(v.get("ratio"), (int, float))
            and all(isinstance(v[k], (int, float)) for k in fields if k in v)
        )

    if not (isinstance(data, dict) and set(CALIBRATION_BINS) <= set(data) and all(ok(v) for v in data.values())):
        raise UserError(
            f"{path}: expected lab/tools/rare_word_f1.py -json's table (a ratio, and ref, hyp and match "
            f"where given, for the bins {', '.join(CALIBRATION_BINS)})"
        )
    return data


def test_scores(run, test, suffix=""):
    """-> (sacreBLEU with -replace_unk, sacreBLEU without it, <unk> %) of one test set, or None.
    ``suffix``: word_choice.sh's other decodes of the tests (.block, .calib): TEST.SUFFIX.bleu.txt."""
    path = os.path.join(run, f"{test}{suffix}.bleu.txt")
    if not os.path.exists(path):
        return None
    text = read(path)
    with_unk = re.search(r"^sacreBLEU \(detokenized\): ([\d.]+)", text, re.M)
    own = re.search(r"^without -replace_unk \(the model's own words, ([\d.]+)% <unk>\): sacreBLEU ([\d.]+)", text, re.M)
    if not (with_unk and own):  # e.g. a decode still being written
        raise UserError(
            f"{path}: expected translate.py's 'sacreBLEU (detokenized): X' and 'without -replace_unk "
            "(the model's own words, P% <unk>): sacreBLEU Y' lines"
        )
    return float(with_unk.group(1)), float(own.group(2)), float(own.group(1))


def valid_bleus(run):
    return [float(x) for x in re.findall(r"greedy BLEU ([\d.]+)", read(log_path(os.path.join(run, "train.log"))))]


def wall_seconds(run):
    path = os.path.join(run, "train_time.txt")
    m = re.search(r"train_wall_s (\d+)", read(path)) if os.path.exists(path) else None
    return int(m.group(1)) if m else None


def seconds_to_best(run):
    """Seconds from the first line of train.log to its last "new best validation" line (the
    log's [HH:MM:SS] stamps; a day boundary is crossed when a stamp goes backwards), or None."""
    stamps, best = [], None
    for line in read(log_path(os.path.join(run, "train.log"))).splitlines():
        m = re.match(r"\[(\d\d):(\d\d):(\d\d)\]", line)
        if not m:
            continue
        t = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3))
        while stamps and t < stamps[-1]:
            t += 86400
        stamps.append(t)
        if "new best validation" in line:
            best = t
    return best - stamps[0] if best is not None else None


def row_name(run_name):
    """A run folder's row: its name without the seed suffix .sN."""
    return re.sub(r"\.s\d+$", "", run_name)


def mean_std(xs):
    """-> "mean ± sample std" of two or more numbers."""
    mean = sum(xs) / len(xs)
    std = (sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5
    return f"{mean:.2f} ± {std:.2f}"


def seed_summary(rows):
    """rows: {run name: {"scores": [(with -replace_unk, without, <unk> %) per test], "ratios": [[the
    ratios of CALIBRATION_BINS] per test] or None}} -> table lines 'ROW (N seeds) | mean ± std ...'
    for the names ROW.sSEED with at least two seeds and every test scored: sacreBLEU with and
    without the lexicon, the <unk> rate, and the calibration ratios where every seed has them."""
    groups = {}
    for name, row in rows.items():
        groups.setdefault(row_name(name), []).append(row)
    lines = []
    for base, runs in groups.items():
        if len(runs) < 2 or any(None in r["scores"] for r in runs):
            continue
        cells = [mean_std([r["scores"][i][0] for r in runs]) for i in range(len(TESTS))]
        cells.append(" / ".join(mean_std([r["scores"][i][1] for r in runs]) for i in range(len(TESTS))))
        cells.append(mean_std([r["scores"][0][2] for r in runs]) + "%")
        for i in range(len(TESTS)):
            if any(r["ratios"] is None for r in runs):
                cells.append("–")
            else:
                cells.append(
                    " / ".join(
                        f"{sum(r['ratios'][i][b] for r in runs) / len(runs):.2f}" for b in range(len(CALIBRATION_BINS))
                    )
                )
        lines.append(f"| {base} ({len(runs)} seeds) | " + " | ".join(cells) + " |")
    return lines


def calibration_files(run, suffix=""):
    """-> {test: lab/tools/rare_word_f1.py's table} from every TEST.calibration.json, or None if one is missing."""
    out = {}
    for test in TESTS:
        path = os.path.join(run, f"{test}{suffix}.calibration.json")
        if not os.path.exists(path):
            return None
        out[test] = read_calibration(path)
    return out


def calibration_ratios(run, suffix=""):
    """-> [[ratio of each of CALIBRATION_BINS] per test] from TEST.calibration.json, or None."""
    files = calibration_files(run, suffix)
    return None if files is None else [[files[t][b]["ratio"] for b in CALIBRATION_BINS] for t in TESTS]


def calibration(run, suffix=""):
    """-> "choice" cell and the output/reference ratios of CALIBRATION_BINS per test, or None."""
    ratios = calibration_ratios(run, suffix)
    if ratios is None:
        return None
    cells = [" / ".join(f"{r:.2f}" for r in test) for test in ratios]
    choice = os.path.join(run, "choice.txt")
    m = re.search(r"checkpoint (\S+) beta (\S+) valid_bleu (\S+)", read(choice)) if os.path.exists(choice) else None
    picked = f"{m.group(1)}, β {m.group(2)} (val. {m.group(3)})" if m else "–"
    return [picked, *cells]


def calibration_tables(run, suffix=""):
    """-> {test: {bin: (reference tokens, ratio)}} from TEST.calibration.json, or None."""
    files = calibration_files(run, suffix)
    return None if files is None else {t: {b: (v["ref"], v["ratio"]) for b, v in files[t].items()} for t in TESTS}


def bin_outputs(run, suffix=""):
    """-> {test: {bin: (output tokens, of them correct)}} of CALIBRATION_BINS from TEST.calibration.json,
    or None (no file, or one written before lab/tools/rare_word_f1.py counted them)."""
    files = calibration_files(run, suffix)
    if files is None or any(
        "hyp" not in f.get(b, {}) or "match" not in f.get(b, {}) for f in files.values() for b in CALIBRATION_BINS
    ):
        return None
    return {t: {b: (files[t][b]["hyp"], files[t][b]["match"]) for b in CALIBRATION_BINS} for t in TESTS}


def outputs_and_correct(runs):
    """runs: {run folder name: bin_outputs(...)} -> table lines: for each row (ROW.sN grouped), per test and
    bin, the mean output tokens and, in brackets, how many of them match a reference token (clipped
    counts): a ratio under ce's can still hold more correct words."""
    groups = {}
    for name, tables in runs.items():
        if tables is not None:
            groups.setdefault(row_name(name), []).append(tables)
    lines = []
    for base, tables in groups.items():
        cells = []
        for test in TESTS:
            parts = []
            for b in CALIBRATION_BINS:
                hyp = sum(t[test][b][0] for t in tables) / len(tables)
                ok = sum(t[test][b][1] for t in tables) / len(tables)
                parts.append(f"{hyp:.0f} ({ok:.0f})")
            cells.append(" / ".join(parts))
        lines.append(f"| {base} ({len(tables)} seeds) | " + " | ".join(cells) + " |")
    return lines


def calibration_against(runs, ref, min_ref, tolerance=CALIBRATION_TOLERANCE):
    """runs: {run folder name: calibration_tables(...)} -> table lines: for each row (ROW.sN
    grouped) other than ``ref``, per test and bin with at least ``min_ref`` reference tokens,
    its mean ratio / ``ref``'s mean ratio, marked **bold** beyond ``tolerance`` either way."""
    groups = {}
    for name, tables in runs.items():
        if tables is not None:
            groups.setdefault(row_name(name), []).append(tables)
    if ref not in groups:
        raise SystemExit(f"-calibration_ref {ref}: no run folder {ref} or {ref}.sN with TEST.calibration.json")

    def mean_ratio(tables, test, b):
        return sum(t[test][b][1] for t in tables) / len(tables)

    lines = []
    for base, tables in groups.items():
        if base == ref:
            continue
        cells, worst = [], 1.0
        for test in TESTS:
            parts = []
            for b in ALL_BINS:
                n_ref = tables[0][test].get(b, (0, 0.0))[0]
                r_ref = mean_ratio(groups[ref], test, b) if n_ref >= min_ref else 0.0
                if n_ref < min_ref or r_ref == 0.0:
                    parts.append("–")
                    continue
                q = mean_ratio(tables, test, b) / r_ref
                worst = max(worst, q, 1 / q if q > 0 else float("inf"))
                parts.append(f"**{q:.2f}**" if q > tolerance or q < 1 / tolerance else f"{q:.2f}")
            cells.append(" / ".join(parts))
        lines.append(f"| {base} ({len(tables)} seeds) | " + " | ".join(cells) + f" | {worst:.2f} |")
    return lines


@cli_main
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="run folders")
    p.add_argument(
        "-calibration_ref",
        help="the row (run folder name without .sN) whose calibration ratios the others are divided by, e.g. t_ce",
    )
    p.add_argument(
        "-min_ref", type=int, default=50, help="-calibration_ref: bins with fewer reference tokens are left out"
    )
    p.add_argument(
        "-suffix",
        default="",
        help="score word_choice.sh's other decodes of the tests: .block (step "
        "5's -block_ngram_repeat) or .CAL_NAME (step 6's -freq_offsets: .calib, .matchce); "
        "default: step 4's",
    )
    p.add_argument("-ref_suffix", help="-calibration_ref: the decodes of that row to divide by (default: -suffix)")
    args = p.parse_args(argv)
    print(
        "| row | test_2016 | test_2017 | without -replace_unk (2016 / 2017) | `<unk>` (2016) "
        "| best val. epoch | s to best | train wall s |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    per_seed = {}
    curves = []
    for run in args.runs:
        if not os.path.exists(log_path(os.path.join(run, "train.log"))):
            print(f"{run}: no train.log", file=sys.stderr)
            continue
        name = os.path.basename(os.path.normpath(run))
        scores = [test_scores(run, t, args.suffix) for t in TESTS]
        bleus = valid_bleus(run)
        best = max(range(len(bleus)), key=lambda i: (bleus[i], -i)) + 1 if bleus else "–"
        cells = [f"{s[0]:.2f}" if s else "–" for s in scores]
        own = " / ".join(f"{s[1]:.2f}" if s else "–" for s in scores)
        unk = f"{scores[0][2]:.1f}%" if scores[0] else "–"
        wall = wall_seconds(run)
        to_best = seconds_to_best(run)
        print(
            f"| {name} | {cells[0]} | {cells[1]} | {own} | {unk} | {best} | {to_best if to_best else '–'} "
            f"| {wall if wall else '–'} |"
        )
        per_seed[name] = {"scores": scores, "ratios": calibration_ratios(run, args.suffix)}
        curves.append((name, bleus))
    summary = seed_summary(per_seed)
    if summary:
        print()
        print(
            "| row | test_2016 (mean ± std) | test_2017 | without -replace_unk (2016 / 2017) | `<unk>` (2016) "
            "| mean output/reference tokens, bins " + ", ".join(CALIBRATION_BINS) + ": test_2016 | test_2017 |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        print("\n".join(summary))
    calib = [(os.path.basename(os.path.normpath(r)), calibration(r, args.suffix)) for r in args.runs]
    if any(c for _, c in calib):
        print()
        print(
            "| row | checkpoint, -decode_prior (picked on validation) | output/reference tokens, bins "
            + ", ".join(CALIBRATION_BINS)
            + ": test_2016 | test_2017 |"
        )
        print("| --- | --- | ---: | ---: |")
        for name, c in calib:
            if c:
                print(f"| {name} | " + " | ".join(c) + " |")
    if args.calibration_ref:
        print()
        print(
            f"| row | ratio / {args.calibration_ref}'s ratio, bins {', '.join(ALL_BINS)} (at least "
            f"{args.min_ref} reference tokens): test_2016 | test_2017 | furthest from 1 (as a factor) |"
        )
        print("| --- | ---: | ---: | ---: |")
        ref_suffix = args.suffix if args.ref_suffix is None else args.ref_suffix
        tables = {}
        for r in args.runs:
            name = os.path.basename(os.path.normpath(r))
            is_ref = row_name(name) == args.calibration_ref
            tables[name] = calibration_tables(r, ref_suffix if is_ref else args.suffix)
        print("\n".join(calibration_against(tables, args.calibration_ref, args.min_ref)))
        counted = {}
        for r in args.runs:
            name = os.path.basename(os.path.normpath(r))
            counted[name] = bin_outputs(r, ref_suffix if row_name(name) == args.calibration_ref else args.suffix)
        lines = outputs_and_correct(counted)
        if lines:
            print()
            print(
                f"| row | output tokens (of them correct), bins {', '.join(CALIBRATION_BINS)}, mean over seeds: "
                "test_2016 | test_2017 |"
            )
            print("| --- | ---: | ---: |")
            print("\n".join(lines))
    width = max((len(b) for _, b in curves), default=0)
    print()
    print("| row | " + " | ".join(str(i) for i in range(1, width + 1)) + " |")
    print("| --- |" + " ---: |" * width)
    for name, bleus in curves:
        cells = [f"{b:.2f}" for b in bleus] + ["–"] * (width - len(bleus))
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
