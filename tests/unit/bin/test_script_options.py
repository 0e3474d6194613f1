"""The smaller scripts' flags come from typed configurations (issue 78): every flag but -h is a field of the
script's configuration, in -h's order, with the field's default and help, and a value outside a field's range or
check is refused in the field's words before any file is read."""

import dataclasses

import pytest

from onmt_cont.bin import convert, embeddings_to_torch, release
from onmt_cont.bin.release import ReleaseConfig
from onmt_cont.config import check_ranges
from onmt_cont.export.options import ExportConfig
from onmt_cont.inputters.table_options import TableConfig
from onmt_cont.utils.errors import UserError
from tests.helpers import fails

SCRIPTS = {
    "embeddings_to_torch": (embeddings_to_torch, TableConfig),
    "onmt_cont_convert": (convert, ExportConfig),
    "onmt_cont_release": (release, ReleaseConfig),
}


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_flag_is_a_field_of_the_script_config(name):
    module, config = SCRIPTS[name]
    fields = {f.name: f for f in dataclasses.fields(config)}
    flags = [a for a in module.build_parser()._actions if a.dest not in ("help", "config")]
    assert [a.dest for a in flags] == list(fields)  # each field once, in -h's order
    for action in flags:
        f = fields[action.dest]
        assert action.option_strings == [f"-{f.name}"]
        assert action.default == f.default and action.help == f.metadata["help"]


@pytest.mark.parametrize(
    "config, name, value, message",
    [
        (TableConfig, "alpha", 1.5, "-alpha must be in [0, 1], got 1.5"),
        (TableConfig, "alpha", float("nan"), "-alpha must be in [0, 1], got nan"),
        (TableConfig, "dim", 0, "-dim must be at least 1, got 0"),
        (TableConfig, "dim", 65537, "-dim must be at most 65536, got 65537"),
        (TableConfig, "center_pcs", -1, "-center_pcs must be at least 0, got -1"),
    ],
)
def test_the_ranges_on_the_fields(config, name, value, message):
    with pytest.raises(UserError) as exc:
        check_ranges({name: value}, config)
    assert str(exc.value) == message


def test_a_table_range_is_refused_before_the_vocabulary_is_read(tmp_path, capsys):
    missing = tmp_path / "no_such.vocab.pt"  # never read: the ranges come first
    argv = ["-init", "random_sphere", "-dim", 0, "-dict_file", missing, "-output_file", tmp_path / "e"]
    err = fails(capsys, embeddings_to_torch.main, argv, "-dim must be at least 1, got 0")
    assert str(missing) not in err
