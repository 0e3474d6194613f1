"""inputters/options.py: preprocess.py's flags are DataConfig's fields, group by group, and their ranges are
checked from the fields with the wording they had."""

import dataclasses

import pytest

from onmt_cont.bin import preprocess
from onmt_cont.config import check_ranges
from onmt_cont.inputters.options import GROUPS, REQUIRED, DataConfig
from onmt_cont.utils.errors import UserError
from tests.helpers import fails, pp_argv, pp_files

FIELDS = [f.name for f in dataclasses.fields(DataConfig)]


def test_every_preprocess_flag_comes_from_a_data_config_field_in_its_group():
    parser = preprocess.build_parser()
    own = {"help", "config"}  # argparse's -h and opts.new_parser's -config, every script's
    flags = [a for a in parser._actions if a.dest not in own]
    assert [a.dest for a in flags] == FIELDS  # each field once, in -h's order
    assert [n for _, names in GROUPS for n in names] == FIELDS
    defaults = {f.name: f.default for f in dataclasses.fields(DataConfig)}
    for action in flags:
        assert action.option_strings == [f"-{action.dest}"] and action.default == defaults[action.dest]
        assert action.help == DataConfig.__dataclass_fields__[action.dest].metadata["help"]
    assert [g.title for g in parser._action_groups[2:]] == [title for title, _ in GROUPS]  # after argparse's two
    assert set(REQUIRED) <= set(FIELDS)


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("shard_size", 0, "-shard_size must be at least 1, got 0"),
        ("src_vocab_size", -1, "-src_vocab_size must be at least 0, got -1"),
        ("tgt_vocab_size", -1, "-tgt_vocab_size must be at least 0, got -1"),
        ("src_seq_length", 0, "-src_seq_length must be at least 1, got 0"),
        ("tgt_seq_length", 0, "-tgt_seq_length must be at least 1, got 0"),
    ],
)
def test_the_ranges_on_the_fields_keep_preprocess_py_wording(name, value, message):
    with pytest.raises(UserError) as exc:
        check_ranges({name: value}, DataConfig)
    assert str(exc.value) == message
    check_ranges({name: value + 1}, DataConfig)  # the bound itself is allowed


def test_a_range_is_refused_before_anything_is_read_or_written(tmp_path, capsys):
    files = pp_files(tmp_path, "le chat\n", "the cat\n")
    fails(capsys, preprocess.main, pp_argv(files, "-tgt_vocab_size", -5), "-tgt_vocab_size must be at least 0, got -5")
    assert list((tmp_path / "out").iterdir()) == []


def test_the_seed_keeps_its_range_in_its_type():
    parser = preprocess.build_parser()
    assert parser.parse_args(["-seed", str(2**32 - 1)]).seed == 2**32 - 1
    with pytest.raises(UserError, match="a seed is an integer from 0 to"):
        parser.parse_args(["-seed", str(2**32)])
