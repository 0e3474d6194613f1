"""How the scripts start: import the script's module, then run its main(). A Ctrl-C during the
imports (torch takes seconds to import) ends with one line and status 130, as it does later, instead
of a traceback through the import machinery. The root scripts (train.py, ...) and the console scripts
(onmt_cont_train, ...) come in here."""

import importlib
import sys


def run(name, entry="main", package="onmt_cont.bin"):
    """Import PACKAGE.NAME and call its ``entry``; returns what it returns."""
    try:
        module = importlib.import_module(f"{package}.{name}")
    except KeyboardInterrupt:
        print(f"{name}.py: stopped by SIGINT (Ctrl-C) while starting: nothing was read or written", file=sys.stderr)
        raise SystemExit(130) from None
    return getattr(module, entry)()


# the console scripts: a console script's return value becomes its exit status, so these return None
def preprocess():
    run("preprocess")


def embeddings_to_torch():
    run("embeddings_to_torch")


def build_lexicon():
    run("build_lexicon")


def train():
    run("train", "console")


def translate():
    run("translate")


def release():
    run("release")


def server():
    run("server")


def convert():
    run("convert")


# the user tools (tools/, installed as onmt_cont.tools)
def _tool(name):
    def console():
        run(name, package="onmt_cont.tools")

    console.__name__ = name
    return console


average_models = _tool("average_models")
calibrate_offsets = _tool("calibrate_offsets")
moses_tok = _tool("moses_tok")
paired_bootstrap = _tool("paired_bootstrap")
table_stats = _tool("table_stats")
train_vectors = _tool("train_vectors")
