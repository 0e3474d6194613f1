"""The training session train.py runs, in rooms:

- ``options``: train.py's parser, built from the typed configurations: ``session_options`` (the session's
  flags) and ``optim_options`` (the optimiser's) beside the model's and the loss's; ``checks``: what the fields'
  ranges cannot check (combinations), and derived defaults;
- ``build``: the target table, model, loss, optimiser and Trainer from the options (Run and the
  benchmarks build them the same way); ``optim``: the optimiser and the learning-rate schedule;
- ``step``: one training step and a validation pass (Trainer); ``average``: -average_decay;
- ``session``: a run (Run) and its loop: validation, model selection, checkpoints;
- ``stopping``: the best score and early stopping; ``validate``: validation BLEU;
- ``resume``: -train_from and -resume auto; ``log``: the log and its progress lines;
- ``start``: :func:`train`, from parsed options to a finished run.
"""

from onmt_cont.train.start import train

__all__ = ["train"]
