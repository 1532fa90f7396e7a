"""Loaders for the read-only reference data in ``../shared/reference`` (relative to the repo root).

The package never reads these files; only tests do. A test that needs a file calls
:func:`require`, which skips the test (naming the missing path) when the folder is not there, so
the suite still runs on a checkout without the shared data.

Bit patterns are returned as unsigned integer arrays (``uint16`` for fp16 values, ``uint32`` for
fp32 values), so tests compare bits, never floats.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

__all__ = [
    "REPO_ROOT",
    "REFERENCE_DIR",
    "NVIDIA_HW_GPUS",
    "NVIDIA_HW_UNIT",
    "TensorCoreRows",
    "require",
    "load_nvidia_hw",
    "load_probe_vectors",
    "load_amd_predicted",
    "parse_hex",
    "f16_bits",
    "f32_bits",
    "hex16",
    "hex32",
]

REPO_ROOT = Path(__file__).resolve().parents[1]
REFERENCE_DIR = REPO_ROOT.parent / "shared" / "reference"

# GPU folders of nvidia_tensor_core_hw/ and the named unit each one is measured against.
NVIDIA_HW_GPUS = ("V100", "A100", "A2", "Ada", "L40S", "H100", "H200", "B200")
NVIDIA_HW_UNIT = {
    "V100": "v100",
    "A100": "a100",
    "A2": "a100",
    "Ada": "ada",
    "L40S": "ada",
    "H100": "h100",
    "H200": "h100",
    "B200": "b200",
}


def require(*parts: str) -> Path:
    """The path ``REFERENCE_DIR/parts...``; skips the calling test if it does not exist."""
    path = REFERENCE_DIR.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"reference data not found: {path} (expected ../shared/reference beside the repo)")
    return path


def require_study_raw_results() -> Path:
    """The 2022 study's raw results folder (``verify_results_*`` inside); skips the calling test
    where it is absent or empty."""
    root = require("fp16_study_raw_results")
    if not any(root.glob("verify_results_*")):
        pytest.skip(f"no verify_results_* folders under {root}")
    return root


# ---------------------------------------------------------------------------------------------
# Bit-pattern helpers


def f16_bits(x) -> np.ndarray:
    """uint16 bit patterns of a float16 array (or of a uint16 array, unchanged)."""
    x = np.asarray(x)
    if x.dtype == np.uint16:
        return x
    if x.dtype != np.float16:
        raise TypeError(f"f16_bits: expected float16 or uint16, got {x.dtype}")
    return x.view(np.uint16)


def f32_bits(x) -> np.ndarray:
    """uint32 bit patterns of a float32 array; a float16 array is widened first (exact)."""
    x = np.asarray(x)
    if x.dtype == np.uint32:
        return x
    if x.dtype == np.float16:
        x = x.astype(np.float32)
    if x.dtype != np.float32:
        raise TypeError(f"f32_bits: expected float32, float16 or uint32, got {x.dtype}")
    return x.view(np.uint32)


def hex16(u) -> str:
    return f"0x{int(u):04x}"


def hex32(u) -> str:
    return f"0x{int(u):08x}"


def parse_hex(words, dtype) -> np.ndarray:
    """``["0x3c00", ...]`` (or a single string) → an array of ``dtype`` (uint16 / uint32)."""
    if isinstance(words, str):
        return np.array(int(words, 16), dtype=dtype)
    return np.array([int(w, 16) for w in words], dtype=dtype)


# ---------------------------------------------------------------------------------------------
# nvidia_tensor_core_hw/ (north-numerical-computing/MATLAB-tensor-core, model_validation/)
#
# File formats (checked on every file, fp16 and bf16):
#   a_<GPU>_<fmt>.txt, b_<GPU>_<fmt>.txt   one dot product per line; K whitespace-separated words,
#                                          each the 8-digit hex fp32 pattern of an fp16/bf16 value
#   c_<GPU>_fp32.txt, d_<GPU>_fp32.txt     one 32-character binary string per line (fp32 bits)
#   d_<GPU>_fp16.txt                       the same, the fp32 bits of the fp16 output value


@dataclass(frozen=True)
class TensorCoreRows:
    """One measured run: row ``i`` is ``d[i] = c[i] + Σ_k a[i,k]·b[i,k]`` on ``gpu``."""

    gpu: str
    input_format: str  # "fp16" or "bf16"
    a: np.ndarray  # (N, K) uint16: fp16 (or bf16) bit patterns
    b: np.ndarray  # (N, K) uint16
    c: np.ndarray  # (N,) uint32: fp32 accumulator bits
    d_fp32: np.ndarray  # (N,) uint32: fp32-output result bits
    d_fp16: np.ndarray | None  # (N,) uint32: fp32 bits of the fp16-output result (fp16 runs only)

    @property
    def k(self) -> int:
        return self.a.shape[1]

    def __len__(self) -> int:
        return self.a.shape[0]


def _read_hex_matrix(path: Path) -> np.ndarray:
    rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
    widths = {len(r) for r in rows}
    if len(widths) != 1:
        raise ValueError(f"{path}: rows of different lengths {sorted(widths)}")
    return np.array([[int(w, 16) for w in r] for r in rows], dtype=np.uint32)


def _read_binary_column(path: Path) -> np.ndarray:
    words = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    bad = [w for w in words if len(w) != 32 or set(w) - {"0", "1"}]
    if bad:
        raise ValueError(f"{path}: not 32-bit binary strings, e.g. {bad[0]!r}")
    return np.array([int(w, 2) for w in words], dtype=np.uint32)


def _narrow_inputs(words: np.ndarray, input_format: str, path: Path) -> np.ndarray:
    """fp32 patterns of fp16/bf16 values → uint16 patterns; raises if a value is not exact."""
    if input_format == "bf16":
        if np.any(words & 0xFFFF):
            raise ValueError(f"{path}: a value is not a bf16 value")
        return (words >> 16).astype(np.uint16)
    if input_format != "fp16":
        raise ValueError(f"input_format: {input_format!r} is not 'fp16' or 'bf16'")
    as32 = words.view(np.float32)
    as16 = as32.astype(np.float16)
    if not np.array_equal(as16.astype(np.float32).view(np.uint32), words):
        raise ValueError(f"{path}: a value is not an fp16 value")
    return as16.view(np.uint16)


@functools.cache
def load_nvidia_hw(gpu: str, input_format: str = "fp16") -> TensorCoreRows:
    """The measured rows of ``nvidia_tensor_core_hw/<gpu>/<input_format>/`` (skips if absent)."""
    folder = require("nvidia_tensor_core_hw", gpu, input_format)

    a_path = folder / f"a_{gpu}_{input_format}.txt"
    b_path = folder / f"b_{gpu}_{input_format}.txt"
    a = _narrow_inputs(_read_hex_matrix(a_path), input_format, a_path)
    b = _narrow_inputs(_read_hex_matrix(b_path), input_format, b_path)
    c = _read_binary_column(folder / f"c_{gpu}_fp32.txt")
    d32 = _read_binary_column(folder / f"d_{gpu}_fp32.txt")
    d16_path = folder / f"d_{gpu}_fp16.txt"
    d16 = _read_binary_column(d16_path) if d16_path.exists() else None
    if d16 is not None:
        v = d16.view(np.float32)
        if not np.array_equal(v.astype(np.float16).astype(np.float32).view(np.uint32), d16):
            raise ValueError(f"{d16_path}: a value is not an fp16 value")
    n = a.shape[0]
    for name, arr in (("b", b), ("c", c), ("d_fp32", d32), ("d_fp16", d16)):
        if arr is not None and arr.shape[0] != n:
            raise ValueError(f"{folder}: {name} has {arr.shape[0]} rows, a has {n}")
    if b.shape != a.shape:
        raise ValueError(f"{folder}: a is {a.shape}, b is {b.shape}")
    for arr in (a, b, c, d32, d16):
        if arr is not None:
            arr.setflags(write=False)
    return TensorCoreRows(gpu, input_format, a, b, c, d32, d16)


# ---------------------------------------------------------------------------------------------
# Probe vectors


@functools.cache
def _load_json(name: str):
    return json.loads(require(name).read_text())


def load_probe_vectors() -> list[dict]:
    """The 64 entries of ``probe_vectors.json`` (outputs stated by a source, NVIDIA hardware).

    Fields: ``id, hardware, instruction_or_op, a, b`` (fp16 hex, logical k order), ``c`` (fp32
    hex, or fp16 hex when ``output_format`` is ``binary16``), ``published_result`` (hex in the
    output format), ``output_format``, ``source``, ``evidence``, ``note``.
    """
    return list(_load_json("probe_vectors.json"))


def load_amd_predicted() -> dict:
    """``probe_vectors_amd_model_predicted.json``: ``vectors`` each with ``a_fp16_hex``,
    ``b_fp16_hex`` (K = 8), ``c_fp32_hex`` and ``predicted_fp32_hex`` {model name: hex}."""
    return dict(_load_json("probe_vectors_amd_model_predicted.json"))
