"""Make the repository root importable (``emu``, ``models``, ``validation``) under any pytest
invocation, whatever the working directory, and register the shared test helpers of ``tests/``
(``reference_data``, ``exact_reference``, ``adversarial``, ``recipes``) as importable modules.

``tests/`` itself is not put on ``sys.path``: its folders ``emu/`` and ``models/`` would shadow
the real packages. The helpers are loaded by file path instead, once, under their own names.
"""

import importlib.util
import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parent
_ROOT = str(_TESTS.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

HELPERS = ("reference_data", "exact_reference", "adversarial", "recipes")


def _load_helper(name: str) -> None:
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, _TESTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


for _name in HELPERS:
    _load_helper(_name)
