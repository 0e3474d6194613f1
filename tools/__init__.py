"""The scripts for a user's own models, installed as ``onmt_cont.tools`` with console scripts
(pyproject.toml): average_models, calibrate_offsets, moses_tok, paired_bootstrap, table_stats,
train_vectors. Each also runs as ``python3 tools/NAME.py``."""
