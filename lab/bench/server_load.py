"""A bounded load test of onmt_cont_server on localhost (issue 71): a fixed number of requests at 1, 8 and 32
concurrent clients, each request one sentence, against a server started here and stopped at the end; and the
same sentences through onmt_cont.load() in this process, one call per sentence and one call for all.

    python3 lab/bench/server_load.py -model runs/quickstart/model_best.pt -requests 200 [-time_limit 300]
    python3 lab/bench/server_load.py -model M.pt M_ct2 -requests 200     # a checkpoint and its CTranslate2 export

Prints requests/s, sentences/s, p50 and p99 latency and the error count per level. The server runs with
-threads 1 and this process with one thread too: compare the rows of one run, as ratios."""

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import torch

from lab import ROOT


def start_server(model, opt):
    conf = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump({"models_root": os.path.dirname(os.path.abspath(model)),
               "models": [{"id": 1, "model": os.path.basename(model), "opt": opt}]}, conf)
    conf.close()
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "onmt_cont", "bin", "server.py"), "-config",
                             conf.name, "-port", "0", "-threads", "1"], stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    match = re.search(r"http://([\d.]+):(\d+)", line)
    if not match:
        proc.kill()
        sys.exit(f"server_load.py: the server did not start: {line}{proc.stderr.read()[-2000:]}")
    return proc, f"http://{match.group(1)}:{match.group(2)}/translator/translate", conf.name


def level(url, sentences, clients, deadline):
    """Send every sentence as its own request, ``clients`` at a time -> (latencies, errors, seconds)."""
    latencies, errors, lock, todo = [], [0], threading.Lock(), list(enumerate(sentences))

    def client():
        while time.monotonic() < deadline:
            with lock:
                if not todo:
                    return
                _, src = todo.pop()
            body = json.dumps([{"src": src, "id": 1}]).encode()
            start = time.perf_counter()
            try:
                with urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=120) as res:
                    ok = res.status == 200 and len(json.loads(res.read())[0]) == 1
            except (urllib.error.URLError, OSError, ValueError):
                ok = False
            with lock:
                latencies.append(time.perf_counter() - start)
                errors[0] += not ok

    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, errors[0] + len(todo), time.perf_counter() - start


def measure(model, args, sentences, end, named):
    """The rows of one model: the server at each level, then onmt_cont.load() in this process."""
    tag = f"{os.path.basename(os.path.normpath(model))}: " if named else ""
    proc, url, conf = start_server(model, {"beam_size": args.beam_size})
    rows = []
    try:
        for clients in map(int, args.levels.split(",")):
            lat, errors, secs = level(url, sentences, clients, end)
            done = len(lat) - errors
            lat.sort()
            rows.append((f"{tag}server, {clients} client(s)", done / secs, done / secs,
                         1000 * statistics.median(lat) if lat else float("nan"),
                         1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else float("nan"), errors))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        os.unlink(conf)
    import onmt_cont

    with onmt_cont.load(model, beam_size=args.beam_size) as m:
        per = []
        for s in sentences:
            if time.monotonic() > end:
                break
            start = time.perf_counter()
            m.translate([s])
            per.append(time.perf_counter() - start)
        per.sort()
        start = time.perf_counter()
        m.translate(sentences)
        whole = time.perf_counter() - start
    rows.append((f"{tag}onmt_cont.load(), one call a sentence", len(per) / sum(per), len(per) / sum(per),
                 1000 * statistics.median(per), 1000 * per[int(0.99 * (len(per) - 1))], 0))
    rows.append((f"{tag}onmt_cont.load(), one call for all (translate.py's batching)", float("nan"),
                 len(sentences) / whole, float("nan"), float("nan"), 0))
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-model", required=True, nargs="+", help="checkpoints or CTranslate2 exports (onmt_cont_convert), "
                   "each measured in turn")
    p.add_argument("-src", default=os.path.join(ROOT, "data", "test.fr"))
    p.add_argument("-requests", type=int, default=200, help="requests (sentences) per concurrency level")
    p.add_argument("-levels", default="1,8,32")
    p.add_argument("-beam_size", type=int, default=1)
    p.add_argument("-time_limit", type=float, default=300.0, help="seconds for the whole run; then it stops")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    end = time.monotonic() + args.time_limit
    with open(args.src, encoding="utf-8") as f:
        sentences = [line.strip() for line in f if line.strip()][: args.requests]
    rows = []
    for model in args.model:
        rows += measure(model, args, sentences, end, len(args.model) > 1)
    print(f"{len(sentences)} sentences of {args.src}, beam {args.beam_size}, one thread each side")
    print("| how | requests/s | sentences/s | p50 ms | p99 ms | errors |\n| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, rps, sps, p50, p99, err in rows:
        print(f"| {name} | {rps:.1f} | {sps:.1f} | {p50:.1f} | {p99:.1f} | {err} |")
    return 1 if any(r[5] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
