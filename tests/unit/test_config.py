"""onmt_cont/config.py: a field's declared range, checked by check_ranges with train.py's wording, and the flags
add_flags builds from the fields (a help or choices written when the parser is built)."""

import argparse
from dataclasses import dataclass

import pytest

from onmt_cont.config import add_flags, check_ranges, from_values, option
from onmt_cont.utils.errors import UserError

REGISTRY = {"a": "first"}


@dataclass
class Example:
    count: int = option(1, type=int, low=1, high=10, high_note="a cap", help="a count")
    rate: float = option(0.0, type=float, low=0.0, high=1.0, high_open=True, help="a probability")
    share: float | None = option(None, type=float, low=0.0, low_open=True, high=1.0, help="a fraction")
    scale: float = option(1.0, type=float, low=0, low_open=True, help="a scale")
    weight: float = option(0.1, type=float, low=0, low_note="0: off", help="a weight")
    free: float = option(0.5, type=float, help="no range")
    kind: str = option("a", choices=lambda: sorted(REGISTRY), help=lambda: "; ".join(REGISTRY.values()))
    named: bool = option(False, flag="other_name", help="a switch")
    keep: int = option(
        -1, type=int, check=lambda v: None if v == -1 or v >= 1 else "must be -1 (every one) or at least 1", help="k"
    )
    sizes: tuple[int, ...] = option((1, 2), type=int, nargs="+", help="a list")
    files: tuple[str, ...] | None = option(None, nargs="+", help="a list with no default (translate.py's -model)")
    mode: bool | str = option("auto", nargs="?", const=True, metavar="auto|true", help="a value that may be left out")
    plain: str = option("x", choices=["x", "y"], help=None)


@pytest.mark.parametrize(
    "values, message",
    [
        ({"count": 0}, "-count must be at least 1, got 0"),
        ({"count": 11}, "-count must be at most 10 (a cap), got 11"),
        ({"rate": 1.0}, "-rate must be in [0, 1), got 1.0"),
        ({"rate": float("nan")}, "-rate must be in [0, 1), got nan"),
        ({"share": 0.0}, "-share must be in (0, 1], got 0.0"),
        ({"scale": 0.0}, "-scale must be positive, got 0.0"),
        ({"weight": -1.0}, "-weight must be at least 0 (0: off), got -1.0"),
        ({"count": 0, "rate": 2.0}, "-count must be at least 1"),  # the fields' order
    ],
)
def test_a_value_outside_its_range_is_refused_in_train_py_wording(values, message):
    with pytest.raises(UserError) as exc:
        check_ranges(values, Example)
    assert str(exc.value).startswith(message)


def test_values_in_range_none_and_fields_without_a_range_pass():
    check_ranges({"count": 10, "rate": 0.0, "share": None, "scale": 1e-9, "weight": 0.0, "free": -1e9}, Example)
    check_ranges({"count": 0}, Example, ["rate"])  # only the names asked for
    check_ranges({}, Example)  # names missing from the values are not checked


def test_add_flags_builds_the_flags_and_reads_a_callable_help_when_the_parser_is_built(monkeypatch):
    monkeypatch.setitem(REGISTRY, "b", "second")  # registered after the class was defined
    parser = argparse.ArgumentParser(prefix_chars="-")
    add_flags(parser.add_argument_group("Example"), Example, ["kind", "count", "named"])
    actions = {a.dest: a for a in parser._actions}
    assert actions["kind"].help == "first; second" and actions["kind"].choices == ["a", "b"]
    assert actions["count"].type is int and actions["count"].default == 1 and actions["count"].help == "a count"
    opt = parser.parse_args(["-kind", "b", "-other_name"])
    assert opt.kind == "b" and opt.other_name is True and opt.count == 1


def test_add_flags_takes_an_optional_value_with_its_const_and_no_help():
    parser = argparse.ArgumentParser(prefix_chars="-")
    add_flags(parser.add_argument_group("Example"), Example, ["mode", "plain"])
    assert parser.parse_args([]).mode == "auto"
    assert parser.parse_args(["-mode"]).mode is True  # -amp alone
    assert parser.parse_args(["-mode", "on"]).mode == "on"
    actions = {a.dest: a for a in parser._actions}
    assert actions["mode"].metavar == "auto|true" and actions["plain"].help is None


def test_a_check_says_what_a_range_cannot():
    check_ranges({"keep": -1}, Example)
    check_ranges({"keep": 3}, Example)
    for bad in (0, -2):
        with pytest.raises(UserError) as exc:
            check_ranges({"keep": bad}, Example)
        assert str(exc.value) == f"-keep must be -1 (every one) or at least 1, got {bad}"


def test_from_values_is_the_typed_view_of_parsed_options():
    p = argparse.ArgumentParser(prefix_chars="-")
    add_flags(p.add_argument_group("g"), Example, ["count", "sizes"])
    values = vars(p.parse_args(["-count", "3", "-sizes", "4", "5"]))
    values["unrelated"] = "ignored"
    config = from_values(Example, values)
    assert config.count == 3 and config.sizes == (4, 5)  # a list option as a tuple, as its default
    assert config.rate == 0.0 and config.named is False  # fields not in the values: their defaults


def test_a_list_flag_without_a_default_is_none_until_given():
    p = argparse.ArgumentParser(prefix_chars="-")
    add_flags(p.add_argument_group("g"), Example, ["files"])
    assert p.parse_args([]).files is None
    assert from_values(Example, vars(p.parse_args(["-files", "a", "b"]))).files == ("a", "b")


@dataclass
class Aliased:
    host: str = option("127.0.0.1", aliases=("--ip",), help="where")
    config: str | None = option(None, aliases=("--config", "-c"), required=True, help="a file")
    port: int = option(5000, type=int, aliases=("--port",), low=0, high=65535, help="a port")


def test_aliases_are_further_spellings_of_a_flag_that_keeps_its_own_destination():
    p = argparse.ArgumentParser(prog="x")
    add_flags(p, Aliased, ["host", "config", "port"])  # the parser itself, not a group: -h's "options"
    strings = {a.dest: a.option_strings for a in p._actions}
    assert strings["host"] == ["-host", "--ip"] and strings["config"] == ["-config", "--config", "-c"]
    for argv in (["-c", "f", "--ip", "h", "--port", "1"], ["-config", "f", "-host", "h", "-port", "1"]):
        assert vars(p.parse_args(argv)) == {"host": "h", "config": "f", "port": 1}
    assert p.parse_args(["--config", "f"]).host == "127.0.0.1"
    with pytest.raises(SystemExit):
        p.parse_args([])  # required=True is argparse's, passed through
    with pytest.raises(UserError) as exc:
        check_ranges(vars(p.parse_args(["-c", "f", "--port", "70000"])), Aliased)
    assert str(exc.value) == "-port must be at most 65535, got 70000"  # named by the flag, whichever spelling


def test_a_switch_is_on_alone_and_takes_true_or_false():
    """A bool field's flag: alone it turns the switch on; ``-flag false`` turns off what a preset turned on."""
    parser = argparse.ArgumentParser(prefix_chars="-")
    add_flags(parser.add_argument_group("Example"), Example, ["named", "count"])
    assert parser.parse_args([]).other_name is False
    assert parser.parse_args(["-other_name"]).other_name is True
    assert parser.parse_args(["-other_name", "-count", "2"]).other_name is True
    for text, value in [("false", False), ("FALSE", False), ("no", False), ("off", False), ("0", False)]:
        assert parser.parse_args(["-other_name", text]).other_name is value
    for text in ("true", "yes", "on", "1"):
        assert parser.parse_args(["-other_name", text]).other_name is True
    with pytest.raises(SystemExit):
        parser.parse_args(["-other_name", "maybe"])


def test_a_preset_switch_is_turned_off_from_the_command_line(tmp_path, capsys):
    """train.py -config P.yaml (word_bias: true) -word_bias false: the command line wins, and says so; a YAML value
    that is not a boolean is still refused."""
    from onmt_cont import opts
    from onmt_cont.train.options import build_parser

    preset = tmp_path / "p.yaml"
    preset.write_text("word_bias: true\ndropout: 0.1\n", encoding="utf-8")
    base = ["-data", "d", "-save_model", "m", "-config", str(preset)]
    assert opts.parse(build_parser(), base).word_bias is True
    got = opts.parse(build_parser(), [*base, "-word_bias", "false"])
    assert got.word_bias is False and got.dropout == 0.1
    assert "-word_bias False on the command line replaces True" in capsys.readouterr().err
    preset.write_text("word_bias: maybe\n", encoding="utf-8")
    with pytest.raises(UserError, match="expected true or false, got 'maybe'"):
        opts.parse(build_parser(), base)
