"""Special tokens shared by every vocabulary. They always take the first four indices."""

PAD = "<blank>"
UNK = "<unk>"
BOS = "<s>"
EOS = "</s>"
SPECIALS = (PAD, UNK, BOS, EOS)
PAD_ID, UNK_ID, BOS_ID, EOS_ID = range(4)

# Bumped whenever the layout of a saved vocab, shard or checkpoint changes.
FORMAT_VERSION = 1
