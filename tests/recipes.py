"""The capture recipes of ``benchmarks/captures/`` (plain scripts, not a package) for the tests
that rebuild a capture's operands from them: each loaded once by file path, under its own name."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

CAPTURES = Path(__file__).resolve().parents[1] / "benchmarks" / "captures"


def capture_recipe(name: str):
    """The module ``benchmarks/captures/NAME.py`` (``probe_orders``, ``cudnn_algos``); the calling
    test skips, naming the path, where it is absent."""
    if name in sys.modules:
        return sys.modules[name]
    path = CAPTURES / f"{name}.py"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module
