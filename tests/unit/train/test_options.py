"""train.py's options come from typed configurations (issue 78): every flag but -config and -save_config is a
field of the model's, the loss's, the optimiser's or the session's configuration."""

import dataclasses

from onmt_cont.train.optim_options import OptimConfig
from onmt_cont.train.options import CONFIGS, build_parser
from onmt_cont.train.session_options import SessionConfig


def test_every_flag_is_a_config_field_and_each_field_one_flag():
    dests = [a.dest for a in build_parser()._actions]
    names = [f.name for config in CONFIGS for f in dataclasses.fields(config)]
    assert len(names) == len(set(names))  # no option declared by two configurations
    assert set(dests) - {"help", "config", "save_config"} == set(names)


def test_the_flags_defaults_are_the_fields():
    parser = build_parser()
    for config in (OptimConfig, SessionConfig):
        for f in dataclasses.fields(config):
            assert parser.get_default(f.name) == f.default, f.name
