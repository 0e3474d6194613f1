"""Shared test settings, and the word-choice models that several test files decode with."""

import os
import signal

import pytest
import torch

# The tests train tiny models: one intra-op thread avoids oversubscribing a 2-core CI machine
# (PyTorch's default of one thread per core made tiny models ~100x slower under load).
torch.set_num_threads(1)
# train.py and translate.py (-threads' default) and the scripts the tests start honour it
os.environ["OMP_NUM_THREADS"] = "1"


# --- models trained once per session (test_word_choice.py, test_calibration.py) ----------------------


@pytest.fixture(scope="session")
def wc_data(tmp_path_factory):
    """The memorisation corpus with a 16-d table (test_word_choice.py's ``data``)."""
    from tests.helpers import memorisation_data

    return memorisation_data(tmp_path_factory.mktemp("wc"), 16)


@pytest.fixture(scope="session")
def wc_infonce(wc_data, tmp_path_factory):
    """An infonce model with a learned word bias, test_word_choice.py's WC options: its m_last.pt.
    Decoded (never written) by the prior, CSLS and calibration tests."""
    from tests.helpers import WC, run_train

    out = tmp_path_factory.mktemp("wc_infonce")
    run_train(wc_data, out, loss="infonce", word_bias=True, **WC)
    return out / "m_last.pt"


@pytest.fixture(scope="session")
def wc_ce(wc_data, tmp_path_factory):
    """A softmax (ce) model with the WC options, untied: its m_last.pt."""
    from tests.helpers import WC, run_train

    out = tmp_path_factory.mktemp("wc_ce")
    run_train(wc_data, out, loss="ce", **{**WC, "tie_emb": False})
    return out / "m_last.pt"


@pytest.fixture(autouse=True, scope="session")
def sigint_default():
    """The Ctrl-C tests need Python's KeyboardInterrupt handler. A shell that starts pytest in the background
    (`cmd &`, nohup) makes it ignore SIGINT, and its children inherit that; give them the default."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
