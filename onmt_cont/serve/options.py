"""onmt_cont_server's options: where it listens, its models' configuration file (read by serve/config.py), and
the limits on requests, connections and threads, as one typed configuration (:class:`ServeConfig`) from which
the parser's flags are built and their ranges checked (:mod:`onmt_cont.config`). OpenNMT-py's onmt_server
spellings are the flags' aliases: --config/-c, --ip, --port, --url_root."""

from __future__ import annotations

from argparse import ArgumentParser
from dataclasses import dataclass, fields

from onmt_cont.config import add_flags, option
from onmt_cont.utils.threads import HELP as THREADS_HELP
from onmt_cont.utils.threads import threads_problem

MAX_PORT = 65535


@dataclass
class ServeConfig:
    """onmt_cont_server's flags, each field with its help, default and range."""

    config: str | None = option(
        None, aliases=("--config", "-c"), required=True, help="the models' configuration file (JSON)"
    )
    host: str = option(
        "127.0.0.1",
        aliases=("--ip",),
        help="the address to listen on (0.0.0.0: every interface; OpenNMT-py's --ip)",
    )
    port: int = option(
        5000,
        type=int,
        aliases=("--port",),
        low=0,
        high=MAX_PORT,
        help="the port (0: any free one, printed at start-up)",
    )
    url_root: str = option(
        "/translator", aliases=("--url_root",), help="the API's path: URL_ROOT/translate, URL_ROOT/models"
    )
    request_timeout: float = option(
        600.0, type=float, low=0, low_open=True, help="seconds a request may wait for its answer"
    )
    workers: int = option(16, type=int, low=1, help="HTTP worker threads (requests handled at once)")
    connection_limit: int = option(
        100,
        type=int,
        low=1,
        help="open connections at most; more wait to be accepted (waitress's connection_limit)",
    )
    connection_timeout: float = option(
        10.0,
        type=float,
        low=0,
        low_open=True,
        help="seconds a connection may stay silent without a whole request before it is closed, so that "
        "idle or half-sent connections cannot hold every slot",
    )
    threads: int | None = option(None, type=int, check=threads_problem, help=THREADS_HELP)


def add_serve_options(p: ArgumentParser) -> None:
    """Add the server's flags to its parser ``p`` (no group: -h lists them under "options"), one per
    :class:`ServeConfig` field."""
    add_flags(p, ServeConfig, [f.name for f in fields(ServeConfig)])
