"""onmt_cont_server: serve trained models over HTTP with OpenNMT-py's JSON API.

    onmt_cont_server -config conf.json [-host 127.0.0.1] [-port 5000] [-url_root /translator]

The configuration file (onmt_cont/serve/config.py) names the models by id; each keeps its decoding
options and raw-text preprocessing (its checkpoint's record, or "opt"). Requests that arrive together
are translated as one batch. The server listens on 127.0.0.1 unless -host says otherwise, and on
SIGTERM or Ctrl-C it stops taking requests, answers those in flight, and exits with status 0."""

import argparse
import os
import signal
import socket
import sys
import threading
import time
import warnings

from waitress.task import ThreadedTaskDispatcher

from onmt_cont.config import check_ranges
from onmt_cont.serve.options import ServeConfig, add_serve_options
from onmt_cont.utils.errors import UserError, cli_main
from onmt_cont.utils.threads import apply_threads


def build_parser():
    p = argparse.ArgumentParser(prog="onmt_cont_server", description=__doc__.split("\n\n")[0])
    add_serve_options(p)  # a flag per ServeConfig field (serve/options.py)
    return p


@cli_main
def main(argv=None):
    opt = build_parser().parse_args(argv)
    from waitress.server import create_server

    from onmt_cont.serve.app import MAX_BODY, create_app
    from onmt_cont.serve.config import read_config

    check_ranges(vars(opt), ServeConfig)  # -port, the limits and timeouts, -threads: the ranges on the fields
    apply_threads(opt.threads)
    # a model's warning about its input is logged once by its entry (serve/models.py), not as a Python warning
    warnings.filterwarnings("ignore", message=r"onmt_cont\.load\(")
    entries = read_config(opt.config)
    try:
        for entry in list(entries.values()):  # every entry, lazy ones too: a damaged file is found now (issue 77.5)
            entry.load_at_start()
    except KeyboardInterrupt:
        print("onmt_cont_server: interrupted while loading the models", file=sys.stderr, flush=True)
        raise SystemExit(130) from None
    app = create_app(entries, opt.url_root, opt.request_timeout)
    _one_address(opt.host, opt.port)
    try:
        server = create_server(
            app,
            host=opt.host,
            port=opt.port,
            threads=opt.workers,
            ident="onmt_cont",
            max_request_body_size=MAX_BODY,
            connection_limit=opt.connection_limit,
            channel_timeout=opt.connection_timeout,
            cleanup_interval=1,
            channel_request_lookahead=1,  # so that a request sees its client hang up
            _dispatcher=HealthApart({"/health", url_path(opt.url_root) + "/health"}, opt.workers),
        )
    except OSError as exc:
        raise UserError(f"cannot listen on {opt.host}:{opt.port}: {(exc.strerror or str(exc)).lower()}") from None
    stop, signals = threading.Event(), []

    def on_signal(*_):
        signals.append(1)
        if len(signals) > 1:  # a second Ctrl-C while draining: out at once (issue 77.8)
            print("onmt_cont_server: stopped without waiting for the requests in flight", file=sys.stderr, flush=True)
            os._exit(130)
        stop.set()

    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, on_signal)
    threading.Thread(target=_unload_idle, args=(entries, stop), daemon=True).start()
    print(
        f"onmt_cont_server: serving {len(entries)} model(s) on http://{server.effective_host}:"
        f"{server.effective_port}{url_path(opt.url_root)}",
        file=sys.stderr,
        flush=True,
    )
    while not stop.is_set():
        server.asyncore.loop(timeout=0.2, map=server._map, count=1)
    # a stop: no new connection, the requests in flight answered, then out
    app.stopping = True
    server.accepting = False
    server.del_channel()  # the listening socket only: the loop's trigger stays open for the workers that finish
    server.socket.close()
    deadline = time.monotonic() + opt.request_timeout
    while (
        app.in_flight.n or any(getattr(c, "total_outbufs_len", 0) for c in list(server._map.values()))
    ) and time.monotonic() < deadline:
        server.asyncore.loop(timeout=0.05, map=server._map, count=1)
    server.task_dispatcher.shutdown(timeout=5)
    for entry in list(entries.values()):
        if entry.model is not None:
            entry.model.close()
    print("onmt_cont_server: stopped", file=sys.stderr, flush=True)


def url_path(url_root):
    """-url_root as create_app serves it: one leading slash, none at the end ("a/b" -> "/a/b", "/" -> "")."""
    return "/" + url_root.strip("/") if url_root.strip("/") else ""


def _one_address(host, port):
    """-host must name one address: a name that resolves to several (localhost as ::1 and 127.0.0.1, Debian's and
    Ubuntu's default) makes waitress serve several sockets, which this server's loop does not drive (issue 77.9)."""
    try:
        found = sorted({a[4][0] for a in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)})
    except (OSError, UnicodeError) as exc:
        raise UserError(f"-host {host}: cannot resolve it ({getattr(exc, 'strerror', None) or exc})") from None
    if len(found) > 1:
        raise UserError(
            f"-host {host} names {len(found)} addresses ({', '.join(found)}): give one of them, e.g. -host {found[-1]}"
        )


class HealthApart(ThreadedTaskDispatcher):
    """waitress's worker threads, with GET /health served by a thread of its own: it answers while every worker
    waits on a translation (issue 77.7)."""

    def __init__(self, paths, workers):
        super().__init__()
        self.set_thread_count(workers)
        self.paths, self.health = paths, ThreadedTaskDispatcher()
        self.health.set_thread_count(1)

    def add_task(self, channel):  # called with the channel's requests_lock held: look, do not wait
        request = channel.requests[0] if getattr(channel, "requests", None) else None
        if request is not None and request.command == "GET" and request.path in self.paths:
            self.health.add_task(channel)
        else:
            super().add_task(channel)

    def shutdown(self, cancel_pending=True, timeout=5):
        self.health.shutdown(cancel_pending, timeout)
        return super().shutdown(cancel_pending, timeout)


def _unload_idle(entries, stop):
    while not stop.wait(1.0):
        now = time.monotonic()
        for entry in list(entries.values()):
            try:
                done = entry.unload_if_idle(now)
            except UserError as exc:  # to_cpu could not load it there: it stays where it was
                done = f"not moved ({exc})"
            if done:
                print(
                    f"onmt_cont_server: model {entry.id} {done} after {entry.timeout:g} s idle",
                    file=sys.stderr,
                    flush=True,
                )


if __name__ == "__main__":
    main()
