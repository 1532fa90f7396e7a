"""Dependencies flow one way: validation → models → emu. Walks every import of every module."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {"emu": {"emu"}, "models": {"emu", "models"}, "validation": {"emu", "models", "validation"}}


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
    bad = [(str(f.relative_to(ROOT)), name) for f in files for name in _imports(f, package)
           if name in ALLOWED and name not in ALLOWED[package]]
    assert not bad, f"wrong-way imports: {bad}"
