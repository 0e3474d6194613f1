"""Command-line options, OpenNMT style: grouped single-dash flags, readable from ``-config FILE.yaml``.

A YAML config holds ``option_name: value`` pairs (names without the dash). Values from the
config replace the defaults, and flags on the command line replace the config's values, as in
OpenNMT-py: ``train.py -config configs/transformer_continuous.yaml -dropout 0.1`` trains the preset
with dropout 0.1. Each such override is said on stderr (``note: -dropout 0.1 on the command line
replaces 0.0 from configs/...``), so nothing changes silently. An unknown key is an error.
"""

import argparse
import datetime
import os
import sys
from pathlib import Path

import yaml

from onmt_cont.config import switch
from onmt_cont.utils.errors import UserError


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse exits 2 too; keep its usage line, say which script
        self.print_usage(sys.stderr)
        raise UserError(message)

    def parse_known_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(self._single_dash(args), namespace)

    def _single_dash(self, args):
        """OpenNMT-py's double-dash spellings: ``--beam_size 5`` and ``--beam_size=5`` are ``-beam_size``'s,
        where the parser has no ``--beam_size`` of its own (after ``--``, nothing is an option)."""
        known, out = self._option_string_actions, []
        for i, arg in enumerate(args):
            if arg == "--":
                return out + args[i:]
            name, eq, value = arg.partition("=")
            if name.startswith("--") and name not in known and name[1:] in known:
                arg = name[1:] + eq + value
            out.append(arg)
        return out


def new_parser(description):
    p = _Parser(description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument(
        "-config",
        help="YAML file of option: value pairs (names without the dash), or the name of a "
        f"preset shipped with onmt_cont ({', '.join(preset_names()) or 'configs/*.yaml'})",
    )
    return p


def _preset_dirs():
    """Where the presets are: configs/ of a checkout, or onmt_cont/configs of an installed package."""
    here = Path(__file__).resolve().parent
    return [d for d in (here / "configs", here.parent / "configs") if d.is_dir()]


def preset_names():
    return sorted({p.stem for d in _preset_dirs() for p in d.glob("*.yaml")})


def resolve_config(path):
    """``-config`` as given: a file, or a preset's bare name (``transformer_continuous``) when no
    such file exists."""
    if os.path.exists(path) or os.sep in path or path.endswith((".yaml", ".yml")):
        return path
    for d in _preset_dirs():
        if (d / f"{path}.yaml").is_file():
            return str(d / f"{path}.yaml")
    return path


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
        args.config = resolve_config(args.config)
        _merge_config(parser, args, argv)
    missing = [f"-{d}" for d in required if getattr(args, d, None) is None]
    if missing:
        raise UserError(f"missing required option(s): {' '.join(missing)}")
    return args


# what a config may hold: a page of options, not a data file
MAX_CONFIG_BYTES = 1 << 20
MAX_CONFIG_DEPTH = 50


class _Refused(yaml.MarkedYAMLError):
    """Valid YAML that a config may not use (said as it is, not as "not valid YAML")."""


class _ConfigLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases (``*name``: a few hundred bytes of nested aliases expand
    to billions of values) and nesting deeper than MAX_CONFIG_DEPTH (PyYAML composes recursively:
    a RecursionError otherwise)."""

    depth = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(
                problem=f"an alias (*{event.anchor}) is not accepted in a config: write the value out "
                "(aliases can make a small file expand without bound)",
                problem_mark=event.start_mark,
            )
        if self.depth >= MAX_CONFIG_DEPTH:
            raise _Refused(problem=f"nested more than {MAX_CONFIG_DEPTH} levels deep", problem_mark=event.start_mark)
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_yaml_int(self, node):
        """YAML 1.1 reads 010 as 8, 0x20 as 32, 0b11 as 3 and 1:30 as 90; the same text on the command
        line is 10 or an error. A config must mean what the command line means: refused."""
        body = str(node.value).replace("_", "").lstrip("+-")
        if ":" in body or body[:2].lower() in ("0x", "0b") or (len(body) > 1 and body.startswith("0")):
            kind = (
                "base 60"
                if ":" in body
                else "hexadecimal"
                if body[:2].lower() == "0x"
                else "binary"
                if body[:2].lower() == "0b"
                else "octal"
            )
            article = "an" if kind == "octal" else "a"
            raise _Refused(
                problem=f"{node.value!r} is {article} {kind} number in YAML (the command line reads it "
                "otherwise): write the number in decimal, or quote it",
                problem_mark=node.start_mark,
            )
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node):
        if ":" in str(node.value):  # YAML 1.1's base-60 floats: 1:30.5 is 90.5
            raise _Refused(
                problem=f"{node.value!r} is a base 60 number in YAML (the command line reads it "
                "otherwise): write the number in decimal, or quote it",
                problem_mark=node.start_mark,
            )
        return super().construct_yaml_float(node)


_ConfigLoader.add_constructor("tag:yaml.org,2002:int", _ConfigLoader.construct_yaml_int)
_ConfigLoader.add_constructor("tag:yaml.org,2002:float", _ConfigLoader.construct_yaml_float)


def _short(value, limit=60):
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def load_config(path):
    """Read a YAML config -> ``(mapping, {key: line number})``.

    ``yaml.SafeLoader`` only: a ``!!python/...`` tag is refused, never run. A key given twice
    is an error (PyYAML would silently keep the last value), and so is a key that is not text.
    What the loader accepts is bounded: at most MAX_CONFIG_BYTES, no aliases, no deep nesting."""
    from onmt_cont.utils.io import check_regular_file

    if os.path.exists(path):  # a missing file: the caller's "cannot read config" below
        check_regular_file(path, "a YAML config")
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise UserError(f"{path}: cannot read config ({exc.strerror})") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise UserError(f"{path}: larger than {MAX_CONFIG_BYTES >> 20} MB: a config holds option: value pairs")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise UserError(f"{path}, line {line}: invalid UTF-8 ({exc.reason}); save the config as UTF-8") from None
    loader = _ConfigLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:  # an empty file or only comments
            return {}, {}
        if not isinstance(node, yaml.MappingNode):
            kind = type(loader.construct_document(node)).__name__
            raise UserError(f"{path}: expected a mapping of option: value, got {kind}")
        lines = {}
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if not isinstance(key, str):
                raise UserError(
                    f"{path}, line {line}: an option name must be text, got a YAML {type(key).__name__} {_short(key)}"
                )
            if key in lines:
                raise UserError(f"{path}, line {line}: option {key!r} is given twice (first on line {lines[key]})")
            lines[key] = line
        return loader.construct_document(node), lines
    except _Refused as exc:
        raise UserError(f"{path}, line {exc.problem_mark.line + 1}: {exc.problem}") from None
    except yaml.MarkedYAMLError as exc:  # a syntax error, or a tag SafeLoader refuses (!!python/...)
        mark = exc.problem_mark or exc.context_mark
        line = f", line {mark.line + 1}" if mark else ""
        raise UserError(f"{path}{line}: not valid YAML ({exc.problem or exc.context})") from None
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: not valid YAML ({exc})") from None
    finally:
        loader.dispose()


def _merge_config(parser, args, argv):
    config, lines = load_config(args.config)
    actions = {a.dest: a for a in parser._actions if a.dest not in ("help", "config")}
    explicit = _explicit_dests(parser, argv)
    for key, value in config.items():
        where = f"{args.config}, line {lines[key]}"
        dest = str(key).lstrip("-")
        if dest not in actions:
            raise UserError(f"{where}: unknown option {key!r}")
        action = actions[dest]
        value = _config_value(action, value, f"{where}: option {key!r}")
        if action.choices is not None and value not in action.choices:
            raise UserError(f"{where}: option {key!r}: {value!r} is not one of {list(action.choices)}")
        if dest in explicit:
            if getattr(args, dest) != value:
                print(
                    f"note: -{dest} {getattr(args, dest)!r} on the command line replaces {value!r} from {where}",
                    file=sys.stderr,
                )
            continue
        setattr(args, dest, value)


def _config_value(action, value, where):
    """Convert a YAML value as the command line would convert its text: ``shard_size: 2.5``
    and ``shard_size: true`` are errors (not 2 and 1), ``save_data: 2019`` is the string "2019",
    an on/off flag takes only true or false, and a list or mapping only goes to an option that
    takes several values. ``tgt_lang: no`` is YAML's false, not the text "no": refused, since
    no option that takes text means a boolean. An empty value (null) is refused unless the
    option's default is unset anyway."""
    if value is None:
        if action.default is None:
            return None
        raise UserError(
            f"{where}: no value (YAML null); give one, or remove the line to keep the default {action.default!r}"
        )
    if action.nargs == 0 or action.type is switch:  # store_true / store_false, or a switch (config.switch)
        if not isinstance(value, bool):
            raise UserError(f"{where}: expected true or false, got {value!r}")
        return value
    several = action.nargs not in (None, "?")
    if isinstance(value, dict) or (isinstance(value, list) and not several):
        raise UserError(f"{where}: expected a single value, got a YAML {type(value).__name__} {_short(value)}")
    for v in value if isinstance(value, list) else [value]:
        _check_scalar(v, where)
    if isinstance(value, bool) and action.type in (None, str):  # int/float options say "invalid value" below
        raise UserError(
            f"{where}: got the YAML boolean {value!r} (yes/no/on/off/true/false); quote it if you mean the text"
        )
    convert = action.type or str
    try:
        if isinstance(value, list):
            return [convert(str(v)) for v in value]
        return convert(str(value))
    except (TypeError, ValueError, argparse.ArgumentTypeError):
        raise UserError(f"{where}: invalid value {value!r}") from None


def _check_scalar(value, where):
    """A value the command line could have given as text: refuse binary (``!!binary``: it would
    become a path like ``b'...'``), dates and timestamps (their text is not the one written), sets
    and other collections."""
    if isinstance(value, (bytes, bytearray)):
        raise UserError(f"{where}: expected text, got binary data (!!binary)")
    if isinstance(value, (datetime.date, datetime.datetime)):
        kind = "timestamp" if isinstance(value, datetime.datetime) else "date"
        raise UserError(f"{where}: got the YAML {kind} {value}; quote it if you mean the text")
    if not isinstance(value, (str, int, float)):  # bool is an int
        raise UserError(f"{where}: expected a single value, got a YAML {type(value).__name__} {_short(value)}")


def save_config(args, path):
    """Write the effective options as YAML (``-save_config``), atomically."""
    from onmt_cont.utils.atomic import atomic_write_text

    # unset options are left out, so the file can be reused with them given on the command line
    data = {k: v for k, v in sorted(vars(args).items()) if k not in ("config", "save_config") and v is not None}
    atomic_write_text(path, yaml.dump(data, Dumper=_NoAliasDumper, sort_keys=False))


class _NoAliasDumper(yaml.SafeDumper):
    """safe_dump writes a list that two options share once, with an alias (&id001 ... *id001),
    which load_config refuses: write it out each time."""

    def ignore_aliases(self, data):
        return True


# A checkpoint's options where they predate an option: the value that reproduces how such a checkpoint was
# trained (not always today's default: an old model had no word bias, whatever the presets say now).
# upgrade() fills them in once, where stored options are read, so the code reads opt.name.
LEGACY = {
    "encoder_type": None,
    "decoder_type": None,  # None: -brnn's rnn/brnn, as before -encoder_type existed
    "word_bias": False,
    "train_table": False,
    "joint_dropout": None,
    "joint_sample": None,
    "rewe_hidden": None,
    "rewe_lambda": None,
    "share_embeddings": False,
    "share_decoder_embeddings": False,
    "param_init_glorot": False,
    "emb_init": "default",
    "layer_norm": "pre",
    "ff_dropout": None,
    "alignment_layer": None,
    "tie_emb": False,
    "vmf_form": "paper",
    "vmf_lambda": 0.2,
    "prefix_window": None,
    "expected_counts": None,
    "sampling_correction": False,
    "amp": False,
    "word_bias_update": "dense",
    "normalization": "tokens",
    "early_stopping_window": 1,  # each score alone, as before the window existed
}


def upgrade(opt):
    """Training options as a checkpoint stored them (a dict or a Namespace, perhaps from an older version) ->
    a Namespace with every option of LEGACY present. Idempotent; ``opt`` itself is not changed."""
    values = dict(opt) if isinstance(opt, dict) else dict(vars(opt))
    return argparse.Namespace(**{**LEGACY, **values})
