"""The results cache: one JSON file per emulated line, keyed by everything that changes its bits.

An interrupted reproduction resumes from it. A key covers the test's arguments and problem, the
seed and range, the line's combination, the verifier's quirks, the input generator, both models'
identities (units and orders per sub-GEMM), the ensemble settings of an atomic line, and the
fp16emu version. An entry that is not what :func:`valid_entry` expects (a truncated or
hand-edited file) is treated as missing and recomputed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

from models.kernels import ATOMIC_ORDERS

from ..verifier2022 import resolve_study_quirks
from .measured import RANGES
from .recipes import Recipe

__all__ = ["CACHE_VERSION", "Cache", "request_key", "fp16emu_version", "valid_entry"]

#: Bump when the cached content or its meaning changes.
CACHE_VERSION = 3


def fp16emu_version() -> str:
    try:
        from importlib.metadata import version

        return version("fp16emu")
    except Exception:  # pragma: no cover - not installed
        return "0+unknown"


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def request_key(
    test: str, range_key: str, seed: int, recipe: Recipe, members: int, granularity: str, problem, entry, combo: tuple
) -> str:
    """The cache key of one emulated line."""
    atomic = recipe.kernel.atomic_split(problem) > 0
    return _digest(
        {
            "v": CACHE_VERSION,
            "fp16emu": fp16emu_version(),
            "test": test,
            "args": entry.args,
            "problem": repr(problem),
            "seed": seed,
            "range": RANGES[range_key],
            "combo": combo,
            "quirks": repr(resolve_study_quirks(recipe.quirks)),
            "rand_type": recipe.rand_type,
            "kernel": [recipe.kernel.key, recipe.kernel.identity(problem)],
            "validator": [recipe.validator.key, recipe.validator.identity(problem)],
            "ensemble": [members, granularity, *dataclasses.astuple(ATOMIC_ORDERS)] if atomic else None,
        }
    )


def _valid_line(x) -> bool:
    return (
        isinstance(x, dict)
        and isinstance(x.get("fields"), dict)
        and isinstance(x.get("line"), str)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in x["fields"].items())
    )


def valid_entry(value) -> bool:
    """Whether a cached value has the shape an emulated line has: an exact line, or an ensemble
    with its members' lines."""
    if not isinstance(value, dict):
        return False
    if value.get("mode") == "exact":
        return _valid_line(value)
    if value.get("mode") == "ensemble":
        members = value.get("members")
        return isinstance(members, list) and bool(members) and all(_valid_line(m) for m in members)
    return False


class Cache:
    """JSON files under ``directory`` (None: no cache; nothing is read or written)."""

    def __init__(self, directory: str | os.PathLike | None):
        self.directory = None if directory is None else Path(directory)

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str):
        """The cached value, or None when it is missing, unreadable or malformed."""
        if self.directory is None:
            return None
        try:
            with open(self._path(key), encoding="utf-8") as fh:
                value = json.load(fh)
        except (OSError, ValueError):
            return None
        return value if valid_entry(value) else None

    def put(self, key: str, value) -> None:
        """Store atomically (write a temporary file, then rename)."""
        if self.directory is None:
            return
        p = self._path(key)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(value, fh)
        os.replace(tmp, p)
