"""The package's layering and the architecture registries (issue 16, "structure first")."""

import ast

import pytest

from onmt_cont.bin import train
from onmt_cont.models import model as model_mod
from onmt_cont.models.architecture import DECODERS, ENCODERS
from onmt_cont.models.decoder import InputFeedRNNDecoder
from onmt_cont.models.encoder import BiRNNEncoder, RNNEncoder
from tests.helpers import ROOT

PKG = ROOT / "onmt_cont"

# Lower layers first; a module may import its own layer and those before it, never a later one.
LAYERS = [
    {"constants", "config", "vmf", "outputs", "ann", "utils", "distributed", "evaluate", "text"},
    {"losses", "inputters", "opts", "align"},
    {"models"},
    {"translate"},
    {"train", "export"},
    {"bin", "api", "serve"},
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def top_part(module):
    """'onmt_cont.models.generators' -> 'models'; None outside the package."""
    parts = module.split(".")
    return parts[1] if parts[0] == "onmt_cont" and len(parts) > 1 else None


def package_imports(path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "onmt_cont":  # from onmt_cont import opts, distributed
                yield from (alias.name for alias in node.names)
            else:
                yield top_part(node.module)
        elif isinstance(node, ast.Import):
            yield from (top_part(alias.name) for alias in node.names)


def test_no_import_runs_from_a_lower_layer_to_a_higher_one():
    upward = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        own = rel.parts[0].removesuffix(".py")
        if own == "__init__":
            continue
        assert own in RANK, f"onmt_cont/{rel}: add its part to LAYERS"
        for part in package_imports(path):
            if part is None:
                continue
            assert part in RANK, f"onmt_cont/{rel} imports onmt_cont.{part}: add it to LAYERS"
            if RANK[part] > RANK[own]:
                upward.append(f"onmt_cont/{rel} -> onmt_cont.{part}")
    assert upward == []


@pytest.mark.parametrize("brnn", [False, True])
def test_build_model_takes_the_architecture_from_the_registries(brnn, monkeypatch):
    """build_model constructs what ENCODERS / DECODERS name, not a hard-coded class; -encoder_type brnn is
    bidirectional with or without -brnn."""

    class MyEncoder(BiRNNEncoder if brnn else RNNEncoder):
        pass

    class MyDecoder(InputFeedRNNDecoder):
        pass

    name = "brnn" if brnn else "rnn"
    monkeypatch.setitem(ENCODERS, name, MyEncoder)
    monkeypatch.setitem(DECODERS, "rnn", MyDecoder)
    args = ["-loss", "ce", "-rnn_size", "8", "-word_vec_size", "4", "-enc_layers", "2", "-encoder_type", name]
    opt = train.build_parser().parse_args(args)
    model = model_mod.build_model(opt, 11, 13)
    assert type(model.encoder) is MyEncoder and type(model.decoder) is MyDecoder
    assert model.encoder.bidirectional == brnn and model.encoder.num_layers == 2
    assert model.decoder.num_layers == opt.dec_layers and model.decoder.embeddings.out_size == 4


def test_the_package_takes_a_torch_range_and_requirements_pin_it():
    """A user's pip install of the package must not replace their torch (issue 70.7); the project's own
    machines install the one version it is tested with."""
    import re
    import tomllib

    root = ROOT
    deps = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    (torch_spec,) = [d for d in deps if re.match(r"torch\b", d)]
    assert "==" not in torch_spec and ">=" in torch_spec and "<3" in torch_spec
    assert "torch==2.13.0" in (root / "requirements.txt").read_text(encoding="utf-8").splitlines()


def test_the_package_is_in_rooms_and_the_lab_stays_outside():
    """No module of onmt_cont/ is over 500 lines (issue 68: the 1,118-line training file became
    onmt_cont/train/); nothing in it imports the lab; the lab and the tools import the installed
    packages instead of editing sys.path."""
    root = PKG.parent
    long = {
        str(p.relative_to(root)): n
        for p in PKG.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500
    }
    assert long == {}
    into_lab = []
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            into_lab += [f"{path.relative_to(root)}: {n}" for n in names if n.split(".")[0] == "lab"]
    assert into_lab == []
    # lab/results holds the records of past runs as they ran, not maintained scripts
    hacks = [
        str(p.relative_to(root))
        for folder in ("lab/bench", "lab/tools", "tools")
        for p in (root / folder).rglob("*.py")
        if "sys.path.insert" in p.read_text(encoding="utf-8")
    ]
    assert hacks == []


def test_every_console_script_has_its_entry_and_the_tools_are_among_them():
    """Issue 70.7: the user tools of tools/ are console scripts too (tests/integration/test_install.py runs each
    -h from an installed venv); here, that every entry of pyproject.toml exists and names a script with a main()."""
    import tomllib

    from onmt_cont.bin import launch

    root = ROOT
    scripts = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    tools = sorted(p.stem for p in (root / "tools").glob("*.py") if p.stem != "__init__")
    assert {f"onmt_cont_{name}" for name in tools} <= set(scripts)
    for name, target in scripts.items():
        module, attr = target.split(":")
        assert module == "onmt_cont.bin.launch" and callable(getattr(launch, attr)), name
    for name in tools:
        assert "\ndef main(" in (root / "tools" / f"{name}.py").read_text(encoding="utf-8"), name


def test_every_package_folder_is_installed():
    """A folder of onmt_cont/ with an __init__.py that pyproject.toml does not list would be missing from a
    `pip install .` (the editable install and the checkout would not show it); the same for lab/ and
    lab/pyproject.toml. The lab is a project of its own: `pip install .` installs the toolkit without it."""
    import tomllib

    root = ROOT

    def listed(project):
        config = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
        return set(config["tool"]["setuptools"]["packages"])

    for top, project in (("onmt_cont", root), ("lab", root / "lab")):
        found = {".".join(p.parent.relative_to(root).parts) for p in (root / top).rglob("__init__.py")}
        assert found <= listed(project), sorted(found - listed(project))
    assert not any(name.split(".")[0] == "lab" for name in listed(root))
