"""Command-line options, OpenNMT style: grouped single-dash flags, readable from ``-config FILE.yaml``.

A YAML config holds ``option_name: value`` pairs (names without the dash). Values from the
config replace the defaults; an unknown key, or a key also given on the command line with a
different value, is an error: nothing is silently overridden.
"""

import argparse
import sys

import yaml

from onmt_cont.utils.errors import UserError


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse exits 2 too; keep its usage line, say which script
        self.print_usage(sys.stderr)
        raise UserError(message)


def new_parser(description):
    p = _Parser(description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("-config", help="YAML file of option: value pairs (names without the dash)")
    return p


def _explicit_dests(parser, argv):
    """The option destinations given on the command line itself (not from defaults)."""
    saved = {a.dest: a.default for a in parser._actions}
    try:
        for a in parser._actions:
            a.default = argparse.SUPPRESS
        ns, _ = parser.parse_known_args(argv)
    finally:
        for a in parser._actions:
            a.default = saved[a.dest]
    return set(vars(ns))


def parse(parser, argv=None, required=()):
    """Parse ``argv`` (``None``: ``sys.argv``) with ``-config`` support; returns a Namespace.

    ``required`` names options that must be set by the command line or the config (argparse's
    own ``required=True`` would refuse a value that comes from the config)."""
    args = parser.parse_args(argv)
    if args.config:
        _merge_config(parser, args, argv)
    missing = [f"-{d}" for d in required if getattr(args, d, None) is None]
    if missing:
        raise UserError(f"missing required option(s): {' '.join(missing)}")
    return args


def _merge_config(parser, args, argv):
    try:
        with open(args.config, encoding="utf-8") as f:
            config = yaml.safe_load(f) or {}
    except OSError as exc:
        raise UserError(f"{args.config}: cannot read config ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise UserError(f"{args.config}: not valid YAML ({exc})") from None
    if not isinstance(config, dict):
        raise UserError(f"{args.config}: expected a mapping of option: value, got {type(config).__name__}")
    actions = {a.dest: a for a in parser._actions if a.dest not in ("help", "config")}
    explicit = _explicit_dests(parser, argv)
    for key, value in config.items():
        dest = str(key).lstrip("-")
        if dest not in actions:
            raise UserError(f"{args.config}: unknown option {key!r}")
        action = actions[dest]
        value = _config_value(action, value, f"{args.config}: option {key!r}")
        if action.choices is not None and value not in action.choices:
            raise UserError(f"{args.config}: option {key!r}: {value!r} is not one of {list(action.choices)}")
        if dest in explicit and getattr(args, dest) != value:
            raise UserError(
                f"option -{dest} is given both in {args.config} ({value!r}) "
                f"and on the command line ({getattr(args, dest)!r}); keep one"
            )
        setattr(args, dest, value)


def _config_value(action, value, where):
    """Convert a YAML value as the command line would convert its text: ``shard_size: 2.5``
    and ``shard_size: true`` are errors (not 2 and 1), ``save_data: 2019`` is the string "2019",
    and an on/off flag takes only true or false."""
    if value is None:
        return None
    if action.nargs == 0:  # store_true / store_false
        if not isinstance(value, bool):
            raise UserError(f"{where}: expected true or false, got {value!r}")
        return value
    convert = action.type or str
    try:
        if isinstance(value, list):
            return [convert(str(v)) for v in value]
        return convert(str(value))
    except (TypeError, ValueError, argparse.ArgumentTypeError):
        raise UserError(f"{where}: invalid value {value!r}") from None


def save_config(args, path):
    """Write the effective options as YAML (``-save_config``), atomically."""
    from onmt_cont.utils.io import atomic_write_text

    # unset options are left out, so the file can be reused with them given on the command line
    data = {k: v for k, v in sorted(vars(args).items()) if k not in ("config", "save_config") and v is not None}
    atomic_write_text(path, yaml.safe_dump(data, sort_keys=False))
