"""serve/options.py: the server's flags are ServeConfig's fields (OpenNMT-py's spellings their aliases), and their
ranges are checked from the fields before anything is loaded."""

import dataclasses

import pytest

from onmt_cont.bin import server
from onmt_cont.serve.options import ServeConfig
from tests.helpers import fails

FIELDS = {f.name: f for f in dataclasses.fields(ServeConfig)}


def test_every_server_flag_comes_from_a_serve_config_field():
    flags = [a for a in server.build_parser()._actions if a.dest != "help"]
    assert [a.dest for a in flags] == list(FIELDS)  # each field once, in -h's order
    for action in flags:
        f = FIELDS[action.dest]
        assert action.option_strings == [f"-{f.name}", *f.metadata["aliases"]]
        assert action.default == f.default and action.help == f.metadata["help"]
    spellings = {a.dest: a.option_strings for a in flags}
    assert spellings["config"] == ["-config", "--config", "-c"] and spellings["host"] == ["-host", "--ip"]
    opt = server.build_parser().parse_args(["-c", "conf.json", "--ip", "0.0.0.0", "--port", "8080"])
    assert (opt.config, opt.host, opt.port) == ("conf.json", "0.0.0.0", 8080)


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("-port", -1, "-port must be at least 0, got -1"),
        ("-port", 65536, "-port must be at most 65535, got 65536"),
        ("-workers", 0, "-workers must be at least 1, got 0"),
        ("-connection_limit", 0, "-connection_limit must be at least 1, got 0"),
        ("-request_timeout", 0, "-request_timeout must be positive, got 0.0"),
        ("-request_timeout", "nan", "-request_timeout must be positive, got nan"),
        ("-connection_timeout", -1, "-connection_timeout must be positive, got -1.0"),
        ("-threads", -1, "-threads must be from 0 (PyTorch's default) to 1024, got -1"),
        ("-threads", 1025, "-threads must be from 0 (PyTorch's default) to 1024, got 1025"),
    ],
)
def test_a_value_out_of_range_is_refused_before_the_models_are_read(tmp_path, capsys, flag, value, message):
    missing = tmp_path / "no_such_conf.json"  # never read: the ranges come first
    err = fails(capsys, server.main, ["-config", missing, flag, value], message)
    assert str(missing) not in err
