"""The smaller scripts' flags come from typed configurations (issue 78): every flag but -h is a field of the
script's configuration, in -h's order, with the field's default and help, and a value outside a field's range or
check is refused in the field's words before any file is read."""

import dataclasses

import pytest

from onmt_cont.align.fast_align import AlignConfig
from onmt_cont.align.options import GROUPS, LexiconConfig
from onmt_cont.bin import build_lexicon, convert, embeddings_to_torch, release
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
    "build_lexicon": (build_lexicon, LexiconConfig),
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
        (LexiconConfig, "iterations", 0, "-iterations must be from 1 to 1000, got 0"),
        (LexiconConfig, "iterations", 10**20, f"-iterations must be from 1 to 1000, got {10**20}"),
        (LexiconConfig, "p0", 1.0, "-p0 must be in [0, 1), got 1.0"),
        (LexiconConfig, "p0", float("nan"), "-p0 must be in [0, 1), got nan"),
        (LexiconConfig, "tension", -5.0, "-tension must be from 0 to 100, got -5.0"),
        (LexiconConfig, "tension", float("inf"), "-tension must be from 0 to 100, got inf"),
        (LexiconConfig, "vb_alpha", 0.0, "-vb_alpha must be above 0 and at most 1e+06, got 0.0"),
        (LexiconConfig, "vb_alpha", 1e308, "-vb_alpha must be above 0 and at most 1e+06, got 1e+308"),
        (LexiconConfig, "vb_alpha", float("nan"), "-vb_alpha must be above 0 and at most 1e+06, got nan"),
        (LexiconConfig, "max_length", -1, "-max_length must be at least 0, got -1"),
        (LexiconConfig, "min_count", 0, "-min_count must be at least 1, got 0"),
    ],
)
def test_the_ranges_on_the_fields(config, name, value, message):
    with pytest.raises(UserError) as exc:
        check_ranges({name: value}, config)
    assert str(exc.value) == message


def test_the_aligner_flags_default_to_none_and_their_help_states_align_config_default():
    """None: not given, so that build_lexicon.py can refuse them beside -alignments; AlignConfig fills the rest."""
    aligner = dict(GROUPS)["aligner (fast_align's model; defaults are fast_align's)"]
    assert all(f.default is None for f in dataclasses.fields(LexiconConfig) if f.name in aligner)
    for f in dataclasses.fields(AlignConfig):
        assert f.name in aligner
        if f.default is not None and not isinstance(f.default, bool):
            assert f"(default {f.default})" in LexiconConfig.__dataclass_fields__[f.name].metadata["help"]
    opt = build_lexicon.build_parser().parse_args(["-src", "s", "-tgt", "t", "-output", "o", "-p0", "0.1"])
    assert build_lexicon._config(opt) == AlignConfig(p0=0.1)


def test_a_lexicon_range_is_refused_before_the_corpus_is_read(tmp_path, capsys):
    missing = tmp_path / "no_such.fr"  # never read: the ranges come first (-max_length was checked after reading)
    argv = ["-src", missing, "-tgt", missing, "-output", tmp_path / "lex.txt", "-max_length", -1]
    err = fails(capsys, build_lexicon.main, argv, "-max_length must be at least 0, got -1")
    assert str(missing) not in err
    argv[-2:] = ["-alignments", tmp_path / "al.txt", "-iterations", 0]  # beside -alignments: refused as such first
    fails(capsys, build_lexicon.main, argv, "-iterations only apply when training the aligner")


def test_a_table_range_is_refused_before_the_vocabulary_is_read(tmp_path, capsys):
    missing = tmp_path / "no_such.vocab.pt"  # never read: the ranges come first
    argv = ["-init", "random_sphere", "-dim", 0, "-dict_file", missing, "-output_file", tmp_path / "e"]
    err = fails(capsys, embeddings_to_torch.main, argv, "-dim must be at least 1, got 0")
    assert str(missing) not in err
