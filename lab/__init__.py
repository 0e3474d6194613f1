"""The lab beside the toolkit: the benchmarks (lab/bench), the research tools that serve only the results
(lab/tools) and the recipes that reproduce the results tables (lab/recipes). None of it is part of onmt_cont:
it is a project of its own (lab/pyproject.toml), installed beside the toolkit from a checkout (``pip install -e lab``,
the last line of requirements.txt) so that its scripts import ``lab`` and ``onmt_cont`` as packages wherever they
are started; ``pip install .`` installs the toolkit without it."""

import gzip
import importlib.util
import os

# The checkout the lab lives in: the recipes, the sample data and the root scripts the benchmarks run.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def repo_module(path):
    """A script of the checkout outside the installed packages (tools/, tests/), loaded from its file ``path``
    (relative to ROOT), as the tests load the tools."""
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def log_path(path):
    """``path``, or ``path + ".gz"`` where only that exists: lab/results keeps the runs' logs gzipped
    (``train.log.gz``) while the recipes' run folders hold plain ones, so a tool given ``.../train.log`` reads
    whichever is there."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        return path + ".gz"
    return path


def open_text(path, errors="strict"):
    """``path`` opened for reading as UTF-8 text, through gzip when its name ends in ``.gz``."""
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", errors=errors)
    return open(path, encoding="utf-8", errors=errors)
