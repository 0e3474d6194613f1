"""A bounded load test of onmt_cont_server on localhost (issue 71): a fixed number of requests at 1, 8 and 32
concurrent clients, each request one sentence, against a server started here and stopped at the end; and the
same sentences through onmt_cont.load() in this process, one call per sentence and one call for all.

    python3 lab/bench/server_load.py -model runs/quickstart/model_best.pt -requests 200 [-time_limit 300]
    python3 lab/bench/server_load.py -model M.pt M_ct2 -requests 200     # a checkpoint and its CTranslate2 export

    python3 lab/bench/server_load.py -model M.pt -requests 200 -hostile   # each level again beside a hostile client

Prints requests/s, sentences/s, p50 and p99 latency and the error count per level. The server runs with
-threads 1 and this process with one thread too: compare the rows of one run, as ratios.

-hostile runs each level a second time with one more client that attacks while the good ones run (issue 77):
unencodable text, bodies that are not JSON, a sentence past MAX_CHARS, a Content-Length past the body limit,
half-sent requests it holds open (up to 20), requests of 64 sentences it hangs up on, unknown model ids, and for
an export a sentence past its positions. The good clients' rows are reported; the hostile client's requests are
counted apart."""

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
    json.dump(
        {
            "models_root": os.path.dirname(os.path.abspath(model)),
            "models": [{"id": 1, "model": os.path.basename(model), "opt": opt}],
        },
        conf,
    )
    conf.close()
    proc = subprocess.Popen(
        [
            sys.executable,
            os.path.join(ROOT, "onmt_cont", "bin", "server.py"),
            "-config",
            conf.name,
            "-port",
            "0",
            "-threads",
            "1",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stderr.readline()
    match = re.search(r"http://([\d.]+):(\d+)", line)
    if not match:
        proc.kill()
        sys.exit(f"server_load.py: the server did not start: {line}{proc.stderr.read()[-2000:]}")
    return proc, f"http://{match.group(1)}:{match.group(2)}/translator/translate", conf.name


def hostile(url, sentences, stop, export, sent):
    """One attacking client, until ``stop`` is set; ``sent`` counts its requests by kind."""
    import socket

    from onmt_cont.serve.app import MAX_BODY, MAX_CHARS

    host, port = url.removeprefix("http://").split("/")[0].split(":")
    path = "/" + url.removeprefix("http://").split("/", 1)[1]
    held = []

    def raw(data, keep=False, hang_up=False):
        try:
            s = socket.create_connection((host, int(port)), timeout=10)
            s.sendall(data)
            if keep:
                held.append(s)
                if len(held) > 20:
                    held.pop(0).close()
                return
            if not hang_up:
                s.recv(1024)
            s.close()
        except OSError:
            pass

    def post(body, **kw):
        raw(
            f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
            "\r\n\r\n".encode()
            + body,
            **kw,
        )

    many = json.dumps([{"src": s, "id": 1} for s in (sentences * 64)[:64]]).encode()
    attacks = {
        "unencodable text": lambda: post(b'[{"src": "un \\ud800 chien", "id": 1}]'),
        "not JSON": lambda: post(b"[" * 100_000),
        "a sentence past MAX_CHARS": lambda: post(json.dumps([{"src": "x " * (MAX_CHARS // 2 + 1), "id": 1}]).encode()),
        "a Content-Length past the limit": lambda: raw(
            f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {MAX_BODY * 20}\r\n\r\n[".encode()
        ),
        "a half-sent request held open": lambda: raw(
            f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 99\r\n\r\n[".encode(), keep=True
        ),
        "64 sentences, hung up on": lambda: post(many, hang_up=True),
        "an unknown model id": lambda: post(b'[{"src": "un chien", "id": 12345}]'),
    }
    if export:
        attacks["a sentence past the export's positions"] = lambda: post(
            json.dumps([{"src": "chien " * 3000, "id": 1}]).encode()
        )
    while not stop.is_set():
        for name, attack in attacks.items():
            if stop.is_set():
                break
            attack()
            sent[name] = sent.get(name, 0) + 1
            time.sleep(0.02)
    for s in held:
        s.close()


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
            for attacked in (False, True) if args.hostile else (False,):
                stop, sent = threading.Event(), {}
                if attacked:
                    attacker = threading.Thread(target=hostile, args=(url, sentences, stop, os.path.isdir(model), sent))
                    attacker.start()
                lat, errors, secs = level(url, sentences, clients, end)
                if attacked:
                    stop.set()
                    attacker.join()
                    print(
                        f"{tag}{clients} client(s): the hostile client sent {sum(sent.values())} requests: "
                        + ", ".join(f"{n} {k}" for k, n in sent.items()),
                        file=sys.stderr,
                    )
                done = len(lat) - errors
                lat.sort()
                rows.append(
                    (
                        f"{tag}server, {clients} client(s)" + (" + 1 hostile" if attacked else ""),
                        done / secs,
                        done / secs,
                        1000 * statistics.median(lat) if lat else float("nan"),
                        1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else float("nan"),
                        errors,
                    )
                )
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
    rows.append(
        (
            f"{tag}onmt_cont.load(), one call a sentence",
            len(per) / sum(per),
            len(per) / sum(per),
            1000 * statistics.median(per),
            1000 * per[int(0.99 * (len(per) - 1))],
            0,
        )
    )
    rows.append(
        (
            f"{tag}onmt_cont.load(), one call for all (translate.py's batching)",
            float("nan"),
            len(sentences) / whole,
            float("nan"),
            float("nan"),
            0,
        )
    )
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "-model",
        required=True,
        nargs="+",
        help="checkpoints or CTranslate2 exports (onmt_cont_convert), each measured in turn",
    )
    p.add_argument("-src", default=os.path.join(ROOT, "data", "test.fr"))
    p.add_argument("-requests", type=int, default=200, help="requests (sentences) per concurrency level")
    p.add_argument("-levels", default="1,8,32")
    p.add_argument("-beam_size", type=int, default=1)
    p.add_argument("-hostile", action="store_true", help="each level again beside one hostile client (issue 77)")
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
