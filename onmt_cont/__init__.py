"""onmt_cont: an OpenNMT-style NMT toolkit with continuous-output decoding."""

__version__ = "0.1.0"
