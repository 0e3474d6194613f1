"""onmt_cont: an OpenNMT-style NMT toolkit with continuous-output decoding.

import onmt_cont
model = onmt_cont.load("run/model_best.pt", src_lang="fr", tgt_lang="en")
model.translate(["Un chien court dans l'herbe."])
"""

__version__ = "0.2.0"
__all__ = ["load", "Model"]


def __getattr__(name):  # the API loads torch and the models only when asked for
    if name in ("load", "Model"):
        from onmt_cont import api

        return getattr(api, name)
    raise AttributeError(f"module 'onmt_cont' has no attribute {name!r}")
