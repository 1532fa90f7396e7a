"""The results cache: one JSON file per emulated line, keyed by everything that changes its bits.

An interrupted reproduction resumes from it. A key covers the test's arguments and problem, the
seed and range, the line's combination, the verifier's quirks, the input generator, both models'
identities (units and orders per sub-GEMM), the ensemble settings of an atomic line, and the
fp16emu version. Each file holds ``{"schema", "key", "sha256", "value"}``: the sha256 is over
the value's canonical JSON, so an entry whose numbers were changed by accident after it was
written (a bad disk, a stray edit, a partial copy) is detected. It does not defend against
tampering: whoever can write the cache folder can recompute the sha256, and such an entry is
used; keep the cache in a folder only you can write (the default is under ``--out``).
An entry is read without following a link, without blocking (a FIFO) and up to
:data:`MAX_ENTRY_BYTES`. An entry that is not what :func:`read_entry` expects (not JSON, the wrong shape, another
key, a checksum that does not match, a directory in its place) is recomputed, with one warning
line on stderr naming the file. Writes go through :func:`validation.files.write_atomically` (a
temporary file in the same folder, then a rename; never through a link): a killed run never
leaves a half-written entry.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import sys
from importlib.metadata import version
from pathlib import Path

from models.kernels import ATOMIC_ORDERS

from ..files import open_user_file, write_atomically
from ..verify.study2022 import resolve_study_quirks
from .measured import RANGES
from .recipes import Recipe

__all__ = ["CACHE_VERSION", "Cache", "request_key", "fp16emu_version", "valid_entry", "read_entry", "entry_checksum"]

#: The largest entry read (an ensemble of 64 members' lines is a few tens of KiB).
MAX_ENTRY_BYTES = 16 << 20

#: Bump when the cached content or its meaning changes (4: entries carry a schema, their key and
#: a sha256 of their value; the values mean what they meant in 3).
CACHE_VERSION = 4


def fp16emu_version() -> str:
    try:
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


def entry_checksum(value) -> str:
    """sha256 of ``value``'s canonical JSON (sorted keys, no spaces): what an entry stores."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def read_entry(doc, key: str):
    """The value of a cache file's parsed JSON ``doc`` stored under ``key``; ValueError saying
    what is wrong (shape, key, checksum, value) otherwise."""
    if not isinstance(doc, dict) or set(doc) != {"schema", "key", "sha256", "value"}:
        raise ValueError("not a cache entry (expected an object with schema, key, sha256, value)")
    if doc["schema"] != CACHE_VERSION:
        raise ValueError(f"schema {doc['schema']!r}, expected {CACHE_VERSION}")
    if doc["key"] != key:
        raise ValueError("stored under another key")
    if doc["sha256"] != entry_checksum(doc["value"]):
        raise ValueError("checksum does not match its content (changed after it was written)")
    if not valid_entry(doc["value"]):
        raise ValueError("the value is not an emulated line or ensemble")
    return doc["value"]


class Cache:
    """JSON files under ``directory`` (None: no cache; nothing is read or written)."""

    def __init__(self, directory: str | os.PathLike | None):
        self.directory = None if directory is None else Path(directory)
        self.rejected = 0  # entries found bad (and recomputed) by this object

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def _warn(self, path: Path, why: str) -> None:
        self.rejected += 1
        print(f"fp16emu: warning: cache entry {path}: {why}; recomputing it", file=sys.stderr, flush=True)

    def get(self, key: str):
        """The cached value, or None when it is missing; a bad entry (unreadable, malformed,
        tampered) also gives None, after one warning line on stderr."""
        if self.directory is None:
            return None
        path = self._path(key)
        if not os.path.lexists(path):
            return None
        try:
            # a FIFO, a device or a link (to /dev/zero, say) in an entry's place is never followed,
            # blocked on or read without a bound
            with open_user_file(
                path,
                "cache entry",
                max_bytes=MAX_ENTRY_BYTES,
                follow_links=False,
                fail=lambda why: ValueError(f"cannot be read ({why})"),
            ) as (fh, _):
                raw = fh.read(MAX_ENTRY_BYTES + 1)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as err:  # a directory in its place, no permission, …
            why = str(err) if isinstance(err, ValueError) else f"cannot be read ({err.strerror or type(err).__name__})"
            self._warn(path, why)
            return None
        try:
            return read_entry(json.loads(raw.decode("utf-8")), key)
        except (ValueError, RecursionError) as err:  # JSON / UTF-8 errors are ValueErrors
            why = str(err) if not isinstance(err, (json.JSONDecodeError, UnicodeDecodeError)) else "not valid JSON"
            self._warn(path, why)
            return None

    def put(self, key: str, value) -> None:
        """Store atomically: a temporary file in the entry's folder, then ``os.replace``. An empty
        folder in the entry's place is removed first; when the entry cannot be written (a folder
        with files there, no space, no permission) one warning line says so and the run goes on."""
        if self.directory is None:
            return
        p = self._path(key)
        doc = {"schema": CACHE_VERSION, "key": key, "sha256": entry_checksum(value), "value": value}
        try:
            self._write(p, doc)
        except (OSError, ValueError) as err:  # the result is kept in memory; only its cache copy is lost
            why = (err.strerror or type(err).__name__) if isinstance(err, OSError) else str(err).split(": ", 1)[-1]
            print(
                f"fp16emu: warning: cache entry {p}: cannot be written ({why}); not cached",
                file=sys.stderr,
                flush=True,
            )

    def _write(self, p: Path, doc: dict) -> None:
        if p.parent.is_symlink():  # the entry's subfolder is the cache's own: never through a link
            raise ValueError(f"{p.parent} is a symbolic link, which is not followed")
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.is_dir() and not p.is_symlink():
            p.rmdir()  # an empty folder in the entry's place; OSError when it holds files

        def write(binary):
            text = io.TextIOWrapper(binary, encoding="utf-8")
            json.dump(doc, text)
            text.flush()
            text.detach()

        write_atomically(p, write, "cache entry")
