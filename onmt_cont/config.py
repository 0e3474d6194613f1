"""Typed component configurations: a dataclass field per option, carrying its help, default, argparse settings
and range, from which the commands' flags are built (:func:`add_flags`) and their ranges checked
(:func:`check_ranges`). The components' configurations: translate/config.py (decoding, and translate.py's -ann
flags), translate/session_options.py (translate.py's session: files, raw text, batches, devices, reporting),
models/options.py (the model), losses/options.py (the loss), train/optim_options.py (the optimiser and its
schedule), train/session_options.py (train.py's session: data, batches, devices, validation, checkpoints, logging),
inputters/options.py (preprocess.py's data), serve/options.py (the server), and the smaller scripts':
inputters/table_options.py (embeddings_to_torch.py), export/options.py (onmt_cont_convert), align/options.py
(build_lexicon.py) and bin/release.py's own; every train.py flag but -config and -save_config is a field of one of
the train.py configurations, every translate.py flag but -config of one of the translate.py configurations."""

from __future__ import annotations

import dataclasses
from argparse import ArgumentParser, ArgumentTypeError, _ArgumentGroup
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from onmt_cont.utils.errors import UserError

T = TypeVar("T")


@dataclass(frozen=True)
class Range:
    """The values a numeric option takes, and how a value outside them is refused: ``low`` / ``high`` (None: no
    bound), each inclusive unless ``*_open``; a note on a bound ("0: PyTorch's init") follows it in the message.
    A range of floats with both bounds reads as an interval ("in [0, 1)"), one of whole numbers as a count and its
    cap ("at least 1", "at most 1000")."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    low_note: str = ""
    high_note: str = ""

    def problem(self, value: float) -> str | None:
        """What is wrong with ``value`` ("must be at least 1"), or None where it is in the range. NaN is in no
        range."""
        low_ok = self.low is None or (value > self.low if self.low_open else value >= self.low)
        high_ok = self.high is None or (value < self.high if self.high_open else value <= self.high)
        if low_ok and high_ok:
            return None
        if self.low is not None and self.high is not None and float in (type(self.low), type(self.high)):
            left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
            return f"must be in {left}{_number(self.low)}, {_number(self.high)}{right}{_note(self.low_note)}"
        if not low_ok:
            assert self.low is not None
            if self.low_open:
                bound = "positive" if self.low == 0 else f"above {_number(self.low)}"
            else:
                bound = f"at least {_number(self.low)}"
            return f"must be {bound}{_note(self.low_note)}"
        assert self.high is not None
        bound = f"below {_number(self.high)}" if self.high_open else f"at most {_number(self.high)}"
        return f"must be {bound}{_note(self.high_note)}"


def _number(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


def _note(note: str) -> str:
    return f" ({note})" if note else ""


def option(
    default: Any,
    help: str | Callable[[], str] | None,
    flag: str | None = None,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    low_note: str = "",
    high_note: str = "",
    check: Callable[[Any], str | None] | None = None,
    aliases: Sequence[str] = (),
    **argparse_kwargs: Any,
) -> Any:
    """A configuration field that carries its command-line flag: its help (or a function that writes it when the
    parser is built, for a help that lists a registry; ``choices`` may be such a function too; None where the
    choices say it all), the flag's name where it is not the field's, argparse's type, choices, nargs, const or
    metavar (:func:`add_flags`), and its range
    (:class:`Range`, :func:`check_ranges`). Where a range cannot say what is allowed (-keep_checkpoint: -1 or at
    least 1), ``check`` does: a function of the value that returns what is wrong with it ("must be ...") or None.
    ``aliases`` are further option strings of the flag, dashes included (the server's "--config", "-c")."""
    bounds = Range(low, high, low_open, high_open, low_note, high_note)
    has_range = low is not None or high is not None
    metadata = {
        "help": help,
        "flag": flag,
        "range": bounds if has_range else None,
        "check": check,
        "aliases": tuple(aliases),
        **argparse_kwargs,
    }
    return field(default=default, metadata=metadata)


SWITCH_VALUES = {
    "true": True,
    "yes": True,
    "on": True,
    "1": True,
    "false": False,
    "no": False,
    "off": False,
    "0": False,
}


def switch(text: str) -> bool:
    """A switch's optional value on the command line: true or false (yes/no, on/off, 1/0), so that a switch a preset
    turns on can be turned off (``-word_bias false``)."""
    try:
        return SWITCH_VALUES[text.lower()]
    except KeyError:
        raise ArgumentTypeError(f"expected true or false, got {text!r}") from None


def add_flags(group: ArgumentParser | _ArgumentGroup, config_cls: type, names: Sequence[str]) -> None:
    """The flags of these fields of ``config_cls``, in this order, from the fields' defaults and metadata (a bool
    field is a switch: the flag alone turns it on and ``-flag false`` off, so a preset's ``flag: true`` can be
    overridden; a callable help or choices is called now; ``nargs="?"`` with ``const``: a flag whose value may be
    left out, as -amp's; a list flag's default, a tuple, is given as a list, or None where it has none, as
    translate.py's -model), in an argument group or the parser itself. A flag with aliases keeps its own name
    as the destination ("--ip" sets -host's)."""
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    for name in names:
        f = fields[name]
        meta = dict(f.metadata)
        flag = meta.pop("flag") or name
        meta.pop("range")
        meta.pop("check")
        strings = [f"-{flag}", *meta.pop("aliases")]
        if len(strings) > 1:
            meta.setdefault("dest", flag)
        for key in ("help", "choices"):  # a help or choices that list a registry, read when the parser is built
            if callable(meta.get(key)):
                meta[key] = meta[key]()
        if isinstance(f.default, bool):
            group.add_argument(*strings, nargs="?", const=True, default=f.default, type=switch, metavar="BOOL", **meta)
        elif meta.get("nargs") not in (None, "?") and f.default is not None:
            assert isinstance(f.default, tuple)  # a list option's default (a dataclass default is immutable)
            group.add_argument(*strings, default=list(f.default), **meta)
        else:
            group.add_argument(*strings, default=f.default, **meta)


def check_ranges(values: Mapping[str, Any], config_cls: type, names: Sequence[str] | None = None) -> None:
    """Each value of a field of ``config_cls`` (those of ``names``, default all) that declares a range or a check
    passes it: UserError "-name must be at least 1, got 0" for the first that does not, in the fields' order.
    None (an option left to its default rule) and a name missing from ``values`` are not checked."""
    for f in dataclasses.fields(config_cls):
        bounds, check = f.metadata.get("range"), f.metadata.get("check")
        if (bounds is None and check is None) or (names is not None and f.name not in names):
            continue
        value = values.get(f.name)
        if value is None:
            continue
        problem = bounds.problem(value) if bounds is not None else None
        if problem is None and check is not None:
            problem = check(value)
        if problem:
            raise UserError(f"-{f.metadata['flag'] or f.name} {problem}, got {value}")


def from_values(config_cls: type[T], values: Mapping[str, Any]) -> T:
    """An instance of ``config_cls`` holding the values of its fields in ``values`` (a parsed Namespace's
    ``vars``, a checkpoint's upgraded options), each field missing there at its default: the typed view of
    one component's options. List options are stored as tuples, as the fields' defaults are."""
    kwargs = {}
    fields: Any = config_cls  # any dataclass
    for f in dataclasses.fields(fields):
        if f.name in values:
            value = values[f.name]
            kwargs[f.name] = tuple(value) if isinstance(value, list) else value
    return config_cls(**kwargs)
