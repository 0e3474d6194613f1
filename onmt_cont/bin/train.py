"""train.py: train an encoder-decoder with a softmax or a continuous output layer.

This file parses the options and calls train(); the parser is in onmt_cont/train/options.py and the
session in onmt_cont/train/."""

from onmt_cont import opts
from onmt_cont.inputters.corpus import data_files
from onmt_cont.train import train
from onmt_cont.train.options import build_parser
from onmt_cont.utils.errors import cli_main
from onmt_cont.utils.overwrite import Prefix, refuse_output_over_inputs

# The checkpoints of -save_model PREFIX (PREFIX + these)
CHECKPOINT_FILES = r"_(step_\d+|epoch_\d+|best|last)\.pt"


def refuse_overwriting_inputs(opt):
    """No file this run writes may be one it reads. -train_from may be one of -save_model's own
    checkpoints (a resume goes on writing them), but not the log or -save_config's file."""
    inputs = {"-data": data_files(opt.data) if opt.data else None, "-tgt_emb": opt.tgt_emb, "-config": opt.config}
    refuse_output_over_inputs(
        {
            "-save_model": Prefix(opt.save_model, CHECKPOINT_FILES) if opt.save_model else None,
            "-log_file": opt.log_file,
            "-save_config": opt.save_config,
        },
        inputs,
    )
    refuse_output_over_inputs(
        {"-log_file": opt.log_file, "-save_config": opt.save_config}, {"-train_from": opt.train_from}
    )


@cli_main
def main(argv=None):
    parser = build_parser()
    opt = opts.parse(parser, argv)
    refuse_overwriting_inputs(opt)
    if opt.save_config:
        opts.save_config(opt, opt.save_config)
        print(f"wrote {opt.save_config}")
        return
    return train(opt, parser.get_default)


def console():
    """The onmt_cont_train console script: :func:`main` without its return value (a console script's
    return value becomes its exit status)."""
    main()


if __name__ == "__main__":
    main()
