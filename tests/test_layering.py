"""Dependencies flow one way: validation → models → emu; no module imports another's private names.

Walks every import of every module of the three packages, the benchmarks and the tests.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {"emu": {"emu"}, "models": {"emu", "models"}, "validation": {"emu", "models", "validation"}}
SCANNED = ("emu", "models", "validation", "benchmarks", "tests")


def _imports(path: Path, package: str):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: stays inside the package
                yield package
            elif node.module:
                yield node.module.split(".")[0]


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_no_wrong_way_imports(package):
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no modules found under {package}/"
    bad = [
        (str(f.relative_to(ROOT)), name)
        for f in files
        for name in _imports(f, package)
        if name in ALLOWED and name not in ALLOWED[package]
    ]
    assert not bad, f"wrong-way imports: {bad}"


def _private_imports(path: Path):
    """(line, text) of every ``from X import _name`` and ``import X._mod`` where X is another
    module (``from . import _x`` inside a package counts too: a package's private module is its own)."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            private_module = any(p.startswith("_") and not p.startswith("__") for p in module.split(".") if p)
            for alias in node.names:
                if (alias.name.startswith("_") and not alias.name.startswith("__")) or private_module:
                    yield node.lineno, f"from {'.' * node.level}{module} import {alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if any(p.startswith("_") and not p.startswith("__") for p in alias.name.split(".")):
                    yield node.lineno, f"import {alias.name}"


# A package may import its own private modules (emu's kernels are private implementation files).
_OWN_PRIVATE = {"emu": ("._scalar", "._tiles", ".kernels._scalar", ".kernels._tiles")}


@pytest.mark.parametrize("folder", SCANNED)
def test_no_private_names_across_modules(folder):
    bad = []
    for f in sorted((ROOT / folder).rglob("*.py")):
        for line, text in _private_imports(f):
            own = _OWN_PRIVATE.get(folder, ())
            if folder == "emu" and any(text.startswith(f"from {o} import") for o in own):
                continue
            bad.append(f"{f.relative_to(ROOT)}:{line}: {text}")
    assert not bad, "private names imported from another module:\n" + "\n".join(bad)


def test_the_private_import_check_catches_both_forms(tmp_path):
    """The checker itself: a module that imports a private name, or from a private module, fails."""
    f = tmp_path / "m.py"
    f.write_text("from validation.metrics import _study_compare\nimport emu._jit\nfrom x import public\n")
    assert [t for _, t in _private_imports(f)] == ["from validation.metrics import _study_compare", "import emu._jit"]
