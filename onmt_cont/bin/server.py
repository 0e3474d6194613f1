"""onmt_cont_server: serve trained models over HTTP with OpenNMT-py's JSON API.

    onmt_cont_server -config conf.json [-host 127.0.0.1] [-port 5000] [-url_root /translator]

The configuration file (onmt_cont/serve/models.py) names the models by id; each keeps its decoding
options and raw-text preprocessing (its checkpoint's record, or "opt"). Requests that arrive together
are translated as one batch. The server listens on 127.0.0.1 unless -host says otherwise, and on
SIGTERM or Ctrl-C it stops taking requests, answers those in flight, and exits with status 0."""

import argparse
import signal
import socket
import sys
import threading
import time

from onmt_cont.utils.errors import UserError, cli_main
from onmt_cont.utils.threads import add_threads_arg, apply_threads


def build_parser():
    p = argparse.ArgumentParser(prog="onmt_cont_server", description=__doc__.split("\n\n")[0])
    p.add_argument("-config", required=True, help="the models' configuration file (JSON)")
    p.add_argument("-host", default="127.0.0.1", help="the address to listen on (0.0.0.0: every interface)")
    p.add_argument("-port", type=int, default=5000, help="the port (0: any free one, printed at start-up)")
    p.add_argument("-url_root", default="/translator", help="the API's path: URL_ROOT/translate, URL_ROOT/models")
    p.add_argument("-request_timeout", type=float, default=600.0, help="seconds a request may wait for its answer")
    p.add_argument("-workers", type=int, default=16, help="HTTP worker threads (requests handled at once)")
    add_threads_arg(p)
    return p


@cli_main
def main(argv=None):
    opt = build_parser().parse_args(argv)
    from waitress.server import create_server

    from onmt_cont.serve.app import create_app
    from onmt_cont.serve.models import read_config

    if not 0 <= opt.port <= 65535 or opt.workers < 1 or not opt.request_timeout > 0:
        raise UserError("-port must be from 0 to 65535, -workers at least 1 and -request_timeout positive")
    apply_threads(opt.threads)
    entries = read_config(opt.config)
    for entry in entries.values():
        if entry.preload:
            entry.ensure_loaded()
    app = create_app(entries, opt.url_root, opt.request_timeout)
    _one_address(opt.host, opt.port)
    try:
        server = create_server(app, host=opt.host, port=opt.port, threads=opt.workers, ident="onmt_cont")
    except OSError as exc:
        raise UserError(f"cannot listen on {opt.host}:{opt.port}: {(exc.strerror or str(exc)).lower()}") from None
    stop = threading.Event()
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda *_: stop.set())
    threading.Thread(target=_unload_idle, args=(entries, stop), daemon=True).start()
    print(f"onmt_cont_server: serving {len(entries)} model(s) on http://{server.effective_host}:"
          f"{server.effective_port}{url_path(opt.url_root)}", file=sys.stderr, flush=True)
    while not stop.is_set():
        server.asyncore.loop(timeout=0.2, map=server._map, count=1)
    # a stop: no new connection, the requests in flight answered, then out
    app.stopping = True
    server.accepting = False
    server.close()
    deadline = time.monotonic() + opt.request_timeout
    while (app.in_flight.n or any(getattr(c, "total_outbufs_len", 0) for c in list(server._map.values()))) \
            and time.monotonic() < deadline:
        server.asyncore.loop(timeout=0.05, map=server._map, count=1)
    server.task_dispatcher.shutdown(timeout=5)
    for entry in entries.values():
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
        raise UserError(f"-host {host} names {len(found)} addresses ({', '.join(found)}): give one of them, e.g. "
                        f"-host {found[-1]}")


def _unload_idle(entries, stop):
    while not stop.wait(1.0):
        now = time.monotonic()
        for entry in entries.values():
            if entry.unload_if_idle(now):
                print(f"onmt_cont_server: model {entry.id} unloaded after {entry.timeout:g} s idle", file=sys.stderr,
                      flush=True)


if __name__ == "__main__":
    main()
