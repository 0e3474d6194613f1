"""How much of the public API carries type hints (issue 78: the public functions of translate/, models/, losses/
and inputters/ typed, as joeynmt's are, with mypy run over them in CI).

Counted with ast, per package: the public functions of its modules and the public methods (``__init__``
included) of its public classes. A function is typed when every parameter but ``self``/``cls`` is annotated
and it has a return annotation (``__init__`` needs none). THRESHOLDS holds the share each package must keep;
a package's entry goes in, or up, with the commit that types it."""

import ast
from pathlib import Path

from tests import helpers

ROOT = helpers.ROOT / "onmt_cont"
PACKAGES = ("inputters", "models", "losses", "translate")
THRESHOLDS = {"inputters": 0.80, "models": 0.80, "losses": 0.80, "translate": 0.80}


def is_public(name: str) -> bool:
    return not name.startswith("_")


def is_typed(fn: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> bool:
    a = fn.args
    params = a.posonlyargs + a.args + a.kwonlyargs + [p for p in (a.vararg, a.kwarg) if p is not None]
    if method and params and params[0].arg in ("self", "cls"):
        params = params[1:]
    return all(p.annotation is not None for p in params) and (fn.returns is not None or fn.name == "__init__")


def public_functions(path: Path) -> list[tuple[str, bool]]:
    """``(qualified name, typed)`` of each public function and public-class method of a module."""
    found = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and is_public(node.name):
            found.append((node.name, is_typed(node, method=False)))
        elif isinstance(node, ast.ClassDef) and is_public(node.name):
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and (
                    is_public(fn.name) or fn.name == "__init__"
                ):
                    found.append((f"{node.name}.{fn.name}", is_typed(fn, method=True)))
    return found


def package_share(package: str) -> tuple[float, list[str]]:
    """The typed share of a package's public functions, and the untyped ones by ``module:name``."""
    typed, untyped = 0, []
    for path in sorted((ROOT / package).rglob("*.py")):
        if not is_public(path.stem) and path.stem != "__init__":
            continue
        for name, ok in public_functions(path):
            typed += ok
            if not ok:
                untyped.append(f"{path.relative_to(ROOT).with_suffix('')}:{name}")
    total = typed + len(untyped)
    return (typed / total if total else 1.0), untyped


def test_counting_rules(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "def f(a: int, *rest: int) -> int: ...\ndef g(a, b: int) -> None: ...\ndef h(a: int): ...\n"
        "def _p(a): ...\nclass C:\n    def __init__(self, a: int): ...\n    def m(self) -> None: ...\n"
        "    def n(self, x) -> None: ...\n    def _q(self): ...\nclass _D:\n    def m(self): ...\n",
        encoding="utf-8",
    )
    assert public_functions(module) == [
        ("f", True),
        ("g", False),
        ("h", False),
        ("C.__init__", True),
        ("C.m", True),
        ("C.n", False),
    ]


def test_public_api_typed() -> None:
    shares = {package: package_share(package) for package in PACKAGES}
    summary = ", ".join(f"{package} {share:.0%}" for package, (share, _) in shares.items())
    for package, minimum in THRESHOLDS.items():
        share, untyped = shares[package]
        assert share >= minimum, (
            f"{package}/: {share:.0%} of public functions typed, expected at least "
            f"{minimum:.0%} (all packages: {summary}); untyped: {', '.join(untyped)}"
        )
