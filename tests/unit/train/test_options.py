"""train.py's options come from typed configurations (issue 78): every flag but -config and -save_config is a
field of the model's, the loss's, the optimiser's or the session's configuration, and a value outside a field's
range or check is refused by check_options in the field's own words."""

import dataclasses

import pytest

from onmt_cont.train import checks
from onmt_cont.train.optim_options import OptimConfig
from onmt_cont.train.options import CONFIGS, build_parser
from onmt_cont.train.session_options import SessionConfig
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.numbers import SEED_MAX


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


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("batch_size", 0, "-batch_size must be at least 1, got 0"),
        ("valid_steps", -1, "-valid_steps must be at least 0 (0: at each epoch's end only), got -1"),
        ("keep_checkpoint", 0, "-keep_checkpoint must be -1 (keep every one) or at least 1 (keep the last N), got 0"),
        ("keep_checkpoint", -2, "-keep_checkpoint must be -1 (keep every one)"),
        ("early_stopping", -1, "-early_stopping must be 0 (off) or a number of validations, got -1"),
        ("drop_final_punct", 1.5, "-drop_final_punct is a probability in [0, 1] (0: off; e.g. 0.05), got 1.5"),
        ("seq_unlikelihood", -1.0, "-seq_unlikelihood is a weight: at least 0 (0: off), got -1.0"),
        ("seed", SEED_MAX + 1, f"-seed must be an integer from 0 to {SEED_MAX}, got {SEED_MAX + 1}"),
        ("threads", -1, "-threads must be from 0 (PyTorch's default) to 1024, got -1"),
        ("threads", 1025, "-threads must be from 0 (PyTorch's default) to 1024, got 1025"),
        ("dist_timeout", 0.0, "-dist_timeout must be a positive number of seconds, got 0.0"),
        ("learning_rate", 0.0, "-learning_rate must be positive, got 0.0"),
        ("warmup_steps", 0, "-warmup_steps must be at least 1, got 0"),
        ("adam_beta2", 1.0, "-adam_beta2 must be in [0, 1), got 1.0"),
        ("max_grad_norm", -1.0, "-max_grad_norm must be at least 0 (0: no clipping), got -1.0"),
        ("average_decay", 2.0, "-average_decay must be in [0, 1] (0: off; e.g. 1e-4), got 2.0"),
        ("accum_count", 0, "-accum_count must be at least 1, got 0"),
    ],
)
def test_check_options_refuses_a_value_outside_its_field(name, value, message):
    opt = build_parser().parse_args(["-loss", "ce"])
    setattr(opt, name, value)  # a Namespace built otherwise: the parser's types refuse some of these already
    with pytest.raises(UserError) as exc:
        checks.check_options(opt)
    assert str(exc.value).startswith(message), str(exc.value)
