"""What the benchmarks against OpenNMT-py share: their data options, the check that OpenNMT-py is installed
(a benchmark-only dependency, never in requirements.txt) and the one-thread environment both toolkits run in."""

import importlib.util
import os

# the Transformer both toolkits train in peer_decode.py and peer_early_steps.py (d_model 256, 2+2 layers)
SIZE = {"layers": 2, "d": 256, "heads": 4, "ff": 1024}

# one thread each; OpenNMT-py 3.5.1's checkpoints hold objects that torch 2.13's default weights-only load refuses
ENV = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")


def add_data_args(p, data_help, out_help):
    """-data, -src, -tgt, -out."""
    p.add_argument("-data", required=True, help=data_help)
    p.add_argument("-src", default="fr")
    p.add_argument("-tgt", default="en")
    p.add_argument("-out", required=True, help=out_help)


def installed():
    """Whether OpenNMT-py can be imported; says how to install it when not."""
    if importlib.util.find_spec("onmt") is None:
        print("OpenNMT-py is not installed: nothing to compare (see lab/bench/peer_decode.py to install it)")
        return False
    return True
