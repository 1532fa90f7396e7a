"""Helpers the library-capture tests share: a capture of ``tests/data/captures`` (the test skips
with the path where it is absent) and the count of outputs whose bits differ."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from validation.captures.capture import load_capture

DATA = Path(__file__).resolve().parent / "data" / "captures"


def capture_or_skip(path: Path):
    """The capture at ``path``; the calling test skips, naming the path, where it is absent."""
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    return load_capture(path)


def differing_bits(a, b) -> int:
    """How many elements of ``a`` and ``b`` (same shape and itemsize) differ in their bit patterns."""
    kind = np.dtype(f"u{a.dtype.itemsize}")
    return int(np.count_nonzero(np.ascontiguousarray(a).view(kind) != np.ascontiguousarray(b).view(kind)))


def archived(archive: str, name: str, folder: Path) -> Path:
    """The capture ``name`` (without .npz) of the archive ``h200_probes/ARCHIVE`` unpacked into
    ``folder``: its path (the calling test skips where the archive is absent)."""
    import tarfile

    path = DATA / "h200_probes" / archive
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    with tarfile.open(path) as tar:
        (member,) = [m for m in tar.getmembers() if Path(m.name).name == f"{name}.npz"]
        tar.extract(member, folder, filter="data")
    return folder / member.name
