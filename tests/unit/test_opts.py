"""-config YAML files: they set options; flags on the command line override them, and say so."""

import os

import pytest
import yaml

from onmt_cont import opts
from onmt_cont.bin import preprocess
from onmt_cont.utils.errors import UserError


def config(tmp_path, text, name="c.yaml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def parse(argv):
    return opts.parse(preprocess.build_parser(), [str(x) for x in argv])


def toy_parser():
    p = opts.new_parser("toy")
    p.add_argument("-loss", choices=["nllvmf", "cosine", "l2"], default="nllvmf", help="loss")
    p.add_argument("-lambda2", type=float, default=0.1, help="regularizer")
    p.add_argument("-layers", type=int, nargs="+", default=[1], help="sizes")
    p.add_argument("-save_config", help="write the options here")
    return p


def test_config_sets_options(tmp_path):
    cfg = config(tmp_path, "shard_size: 7\nshuffle: true\nsave_data: out/prefix\nsrc_seq_length: '50'\n")
    args = parse(["-config", cfg])
    assert args.shard_size == 7 and args.shuffle is True and args.save_data == "out/prefix"
    assert args.src_seq_length == 50  # converted as the command line would
    assert args.tgt_seq_length == 100 and args.lower is False  # untouched defaults


def test_config_values_are_converted_like_command_line_text(tmp_path):
    args = parse(["-config", config(tmp_path, "save_data: 2019\ntrain_src: 1.5\n")])
    assert args.save_data == "2019" and args.train_src == "1.5"
    args = opts.parse(toy_parser(), ["-config", config(tmp_path, "lambda2: 1\nlayers: [2, '3']\n")])
    assert args.lambda2 == 1.0 and isinstance(args.lambda2, float) and args.layers == [2, 3]


def test_config_keys_may_carry_the_dash(tmp_path):
    assert parse(["-config", config(tmp_path, "-shard_size: 3\n")]).shard_size == 3


def test_command_line_overrides_the_config_and_says_so(tmp_path, capsys):
    cfg = config(tmp_path, "shard_size: 7\nseed: 1\n")
    args = parse(["-config", cfg, "-shard_size", "8"])
    assert args.shard_size == 8 and args.seed == 1  # the config's other values stay
    err = capsys.readouterr().err
    assert "note: -shard_size 8 on the command line replaces 7 from" in err and "c.yaml, line 1" in err


def test_command_line_overrides_even_when_it_repeats_the_default(tmp_path):
    cfg = config(tmp_path, "seed: 1\n")
    assert parse(["-config", cfg, "-seed", "3435"]).seed == 3435


def test_a_switch_on_the_command_line_overrides_false_in_the_config(tmp_path):
    cfg = config(tmp_path, "shuffle: false\n")
    assert parse(["-shuffle", "-config", cfg]).shuffle is True


def test_same_value_on_both_is_fine_and_quiet(tmp_path, capsys):
    cfg = config(tmp_path, "shard_size: 7\nshuffle: true\n")
    args = parse(["-shard_size", "7", "-config", cfg, "-shuffle"])
    assert args.shard_size == 7 and args.shuffle is True
    assert "note:" not in capsys.readouterr().err


def test_a_bad_config_value_is_an_error_even_when_the_command_line_overrides_it(tmp_path):
    cfg = config(tmp_path, "shard_size: many\n")
    with pytest.raises(UserError, match="invalid value 'many'"):
        parse(["-config", cfg, "-shard_size", "8"])


@pytest.mark.parametrize(
    "text, message",
    [
        ("shard_sise: 7\n", "unknown option 'shard_sise'"),
        ("config: other.yaml\n", "unknown option 'config'"),
        ("shard_size: many\n", "option 'shard_size': invalid value 'many'"),
        ("shard_size: 2.5\n", "option 'shard_size': invalid value 2.5"),  # not silently 2
        ("shard_size: true\n", "option 'shard_size': invalid value True"),  # not silently 1
        ("shuffle: 'no'\n", "option 'shuffle': expected true or false, got 'no'"),
        ("lower: 1\n", "option 'lower': expected true or false"),
        ("- shard_size\n- 7\n", "expected a mapping of option: value, got list"),
        ("shard_size: [7\n", "not valid YAML"),
    ],
)
def test_bad_config_is_an_error(tmp_path, capsys, text, message):
    cfg = config(tmp_path, text)
    with pytest.raises(UserError) as exc:
        parse(["-config", cfg])
    assert cfg in str(exc.value) and message in str(exc.value)
    with pytest.raises(SystemExit) as exc:
        preprocess.main(["-config", cfg])
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_invalid_choice_in_config(tmp_path):
    with pytest.raises(UserError, match=r"option 'loss': 'vmf' is not one of \['nllvmf', 'cosine', 'l2'\]"):
        opts.parse(toy_parser(), ["-config", config(tmp_path, "loss: vmf\n")])
    assert opts.parse(toy_parser(), ["-config", config(tmp_path, "loss: l2\n")]).loss == "l2"


def test_invalid_choice_on_command_line(capsys):
    with pytest.raises(UserError, match="invalid choice"):
        opts.parse(toy_parser(), ["-loss", "vmf"])
    assert "usage:" in capsys.readouterr().err  # the usage line goes to stderr, with the error


def test_missing_config_file(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        preprocess.main(["-config", str(tmp_path / "none.yaml")])
    assert exc.value.code == 2 and f"{tmp_path / 'none.yaml'}: cannot read config" in capsys.readouterr().err


def test_unknown_command_line_option(capsys):
    with pytest.raises(SystemExit) as exc:
        preprocess.main(["-train_source", "x"])
    assert exc.value.code == 2 and "unrecognized arguments: -train_source" in capsys.readouterr().err


def test_required_options_can_come_from_the_config(tmp_path, capsys):
    d = tmp_path / "in"
    d.mkdir()
    for name, text in [("s", "a b\nc\n"), ("t", "x\ny z\n")]:
        (d / name).write_text(text, encoding="utf-8")
    (tmp_path / "out").mkdir()
    cfg = config(
        tmp_path,
        yaml.safe_dump(
            {
                "train_src": str(d / "s"),
                "train_tgt": str(d / "t"),
                "valid_src": str(d / "s"),
                "valid_tgt": str(d / "t"),
                "save_data": str(tmp_path / "out" / "d"),
                "shard_size": 1,
            }
        ),
    )
    preprocess.main(["-config", cfg])
    assert sorted(os.listdir(tmp_path / "out")) == [
        "d.shards.json",
        "d.train.0.pt",
        "d.train.1.pt",
        "d.valid.0.pt",
        "d.vocab.pt",
        "d.vocab.src.txt",
        "d.vocab.tgt.txt",
    ]
    capsys.readouterr()


def test_required_options_missing_everywhere(tmp_path, capsys):
    cfg = config(tmp_path, "train_src: a\ntrain_tgt: b\nvalid_src: null\n")
    with pytest.raises(SystemExit) as exc:
        preprocess.main(["-config", cfg, "-valid_tgt", "d"])
    assert exc.value.code == 2
    assert "missing required option(s): -valid_src -save_data" in capsys.readouterr().err


def test_save_config_round_trips(tmp_path):
    args = parse(
        [
            "-train_src",
            "a b.txt",
            "-save_data",
            "2019",
            "-shard_size",
            "12",
            "-shuffle",
            "-config",
            config(tmp_path, "lower: true\nseed: 7\n"),
        ]
    )
    path = str(tmp_path / "saved.yaml")
    opts.save_config(args, path)
    data = yaml.safe_load(open(path, encoding="utf-8"))
    assert "config" not in data and data["shard_size"] == 12 and data["save_data"] == "2019"
    again = parse(["-config", path])
    assert {k: v for k, v in vars(again).items() if k != "config"} == {
        k: v for k, v in vars(args).items() if k != "config"
    }
    # and the saved file can be combined with the same values on the command line
    assert parse(["-config", path, "-shard_size", "12"]).shard_size == 12
    assert [f for f in os.listdir(tmp_path) if f.startswith(".tmp-")] == []


def test_save_config_round_trips_toy_parser(tmp_path):
    parser = toy_parser()
    args = opts.parse(
        parser, ["-loss", "cosine", "-layers", "4", "5", "-lambda2", "0.5", "-save_config", str(tmp_path / "x.yaml")]
    )
    opts.save_config(args, args.save_config)
    again = opts.parse(toy_parser(), ["-config", str(tmp_path / "x.yaml")])
    assert (again.loss, again.layers, again.lambda2, again.save_config) == ("cosine", [4, 5], 0.5, None)


def test_double_dash_spellings_are_the_flags(tmp_path):
    """Issue 78: OpenNMT-py's users write --beam_size 5 and --train_steps=100; the parsers take both spellings."""
    from onmt_cont.translate.options import build_parser

    args = opts.parse(
        build_parser(), ["--model", "m.pt", "--beam_size", "3", "--n_best=2", "-with_score", "--ban_unk_token"]
    )
    assert (args.model, args.beam_size, args.n_best, args.with_score, args.ban_unk_token) == (
        ["m.pt"],
        3,
        2,
        True,
        True,
    )
    with pytest.raises(UserError, match="unrecognized arguments: --no_such_flag"):
        opts.parse(build_parser(), ["--model", "m.pt", "--no_such_flag"])
    config(tmp_path, "beam_size: 4\n")
    assert opts.parse(build_parser(), ["--config", str(tmp_path / "c.yaml"), "-model", "m.pt"]).beam_size == 4


def test_upgrade_gives_old_checkpoints_the_options_they_were_trained_with():
    """Issue 78: defaults for options a checkpoint predates were repeated in some 30 getattr calls; upgrade()
    fills them in once (opts.LEGACY), where stored options are read, and every name in it is a train.py option."""
    from onmt_cont.train.options import build_parser

    old = {"loss": "ce", "brnn": True}
    new = opts.upgrade(old)
    assert (new.loss, new.brnn, new.word_bias, new.encoder_type, new.layer_norm, new.vmf_lambda) == (
        "ce",
        True,
        False,
        None,
        "pre",
        0.2,
    )
    assert old == {"loss": "ce", "brnn": True} and vars(opts.upgrade(new)) == vars(new)
    assert opts.upgrade({"word_bias": True}).word_bias is True  # a stored value wins
    train_options = {a.dest for a in build_parser()._actions}
    assert set(opts.LEGACY) <= train_options, set(opts.LEGACY) - train_options
