"""translate.py's options come from typed configurations (issue 78): every flag but -config is a field of the
decoding configuration, of the approximate search's or of the session's, each declared once, and a value
outside a session field's range is refused by check_options in the field's own words."""

import dataclasses

import pytest

from onmt_cont.translate.config import AnnConfig, DecodingConfig
from onmt_cont.translate.options import build_parser, check_options, decoding_config, parse_options
from onmt_cont.translate.session_options import TranslateSessionConfig
from onmt_cont.utils.errors import UserError

CONFIGS = (DecodingConfig, AnnConfig, TranslateSessionConfig)


def flag_fields():
    """(flag, config, field) of every field that declares a flag (DecodingConfig.ann, the API's dict, does not)."""
    return [
        (f.metadata["flag"] or f.name, config, f)
        for config in CONFIGS
        for f in dataclasses.fields(config)
        if "help" in f.metadata
    ]


def test_every_flag_is_a_config_field_and_each_field_one_flag():
    flags = [flag for flag, _, _ in flag_fields()]
    assert len(flags) == len(set(flags))  # no flag declared by two configurations
    dests = [a.dest for a in build_parser()._actions]
    assert len(dests) == len(set(dests))
    assert set(dests) - {"help", "config"} == set(flags)
    names = {f.name for f in dataclasses.fields(DecodingConfig)}
    assert names - {flag for flag, config, _ in flag_fields() if config is DecodingConfig} == {
        "ann",
        "ban_unk",
        "lexicon",
    }


def test_the_flags_defaults_are_the_fields():
    parser = build_parser()
    for flag, _, f in flag_fields():
        default = parser.get_default(flag)
        assert (tuple(default) if isinstance(default, list) else default) == f.default, flag


def test_the_ann_flags_are_the_decoding_configs_index():
    parser = build_parser()
    assert decoding_config(parser.parse_args(["-model", "m.pt"])).ann is None
    opt = parser.parse_args(["-model", "m.pt", "-ann", "faiss", "-ann_index", "hnsw", "-ann_hnsw_m", "8"])
    assert decoding_config(opt).ann == {"kind": "hnsw", "nlist": None, "nprobe": 64, "hnsw_m": 8, "ef_search": 64}


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("batch_size", 0, "-batch_size must be at least 1, got 0"),
        ("chunk_size", -3, "-chunk_size must be at least 1, got -3"),
        ("threads", -1, "-threads must be from 0 (PyTorch's default) to 1024, got -1"),
        ("threads", 1025, "-threads must be from 0 (PyTorch's default) to 1024, got 1025"),
    ],
)
def test_check_options_refuses_a_value_outside_its_field(name, value, message, tmp_path):
    opt = parse_options(["-model", str(tmp_path / "m.pt"), "-src", str(tmp_path / "s.txt")])
    setattr(opt, name, value)
    with pytest.raises(UserError) as exc:
        check_options(opt, decoding_config(opt))
    assert str(exc.value) == message
