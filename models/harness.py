"""The rocMLIR 2022 test harness's inputs, bit for bit: glibc ``rand``, the float and integer
generators, the truncating fp16 conversion, re-seeding per tensor and the fill order.

What the harness did (``mlir/tools/miopen-gen/miopen-gen.cpp`` and
``mlir/lib/ExecutionEngine/conv-validation-wrappers.cpp``, mid/late 2022, github.com/ROCm/rocMLIR):

* The kernel's three memrefs are filter, input, output (in that order, index 0, 1, 2), each a
  5-D memref in its layout's letter order (``gkcyx``, ``ngchw``, ``ngkhw``, ...). Every one of
  them is filled, the output too (its values are overwritten by the kernel, except where a
  backward-data kernel writes nothing).
* ``-rand fixed`` (the default from mid-2022): the repeating pattern {0.5, -1, 0.75} indexed by
  the row-major position mod 3 ({1, -1, 2} for integer element types).
* Otherwise each fill calls ``srand(seed)`` first (``seed == 0``: ``srand(time(0))``), then visits
  the memref in index order (= memory order) drawing one ``rand()`` per element:

  - float: ``static_cast<float>((max - min) * (double)rand() / (double)RAND_MAX) + (float)min``
    (``max - min`` is an int, the product and quotient are double, the cast to float rounds to
    nearest even, the add is a float add); if ``min == max`` the value is ``(float)min * 0.1f``;
  - int: ``rand() % (max - min) + min`` as a ``short`` (``min`` if ``min == max``), then
    converted to float.

  ``min``/``max`` are C ``short``. The defaults are [-1, 1] for float and [-5, 5) for int;
  ``-rand none`` leaves min = max = 1 (all 1 for int, all 0.1 for float), and so does every
  tensor that ``-rand_side`` does not select.
* An f16 tensor is then converted with ``float_to_fp16``, the fox-toolkit table conversion, which
  truncates toward zero (:func:`emu.rounding.fp32_to_fp16_truncate`); a bf16 tensor (``-t bf16``)
  gets ``float_to_bfloat16``, the float's top 16 bits: truncation toward zero too, not rounding
  (``mcpuMemset5DBF16RandInt``/``RandFloat`` store ``float_to_bfloat16(randomFloatValue(...))``; the
  same file, github.com/ROCm/rocMLIR ``mlir/lib/ExecutionEngine/conv-validation-wrappers.cpp`` as
  of mid-2022, whose ``float_to_fp16`` makes the fp16 tensors); an f32 tensor keeps
  the float. (Later rocmlir-gen versions, 2023 on, store ``arith.truncf`` of the float instead,
  which rounds to nearest even: not the harness modelled here.)

glibc's ``rand()`` is ``random()`` with the default TYPE_3 state: an additive lagged-Fibonacci
generator ``r[i] = r[i-3] + r[i-31] (mod 2^32)`` seeded by ``r[i] = 16807·r[i-1] mod (2^31-1)``
(Schrage's method, as glibc's ``__srandom_r`` does it, in 32-bit ``int32_t``), with the first 310
outputs discarded and each output ``r >> 1``. :class:`GlibcRand` reproduces it exactly and
generates long runs with a compiled loop.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np

from emu.conv import normalize_layout
from emu.jit import jit
from emu.rounding import fp32_to_fp16_truncate

__all__ = [
    "RAND_MAX",
    "GlibcRand",
    "glibc_srand_state",
    "harness_float_values",
    "harness_int_values",
    "harness_float_tensor",
    "harness_int_tensor",
    "fixed_pattern",
    "to_fp16_truncate",
    "harness_range",
    "tensor_layout_shape",
    "harness_tensor",
    "harness_inputs",
    "TENSOR_ORDER",
    "DIRECTION_TENSORS",
    "TIME_SEED_WARNING",
]

RAND_MAX = 2**31 - 1

#: The harness's memref order: filter, input, output (``idx`` 0, 1, 2 of ``getRandomTestData``).
TENSOR_ORDER = ("filter", "input", "output")

#: The tensors each direction reads (the third is its result).
DIRECTION_TENSORS = {
    "fwd": ("filter", "input"),
    "bwd_data": ("filter", "output"),
    "bwd_weight": ("input", "output"),
}

#: What the ``rand_side`` option's first letter selects (``getRandomTestData``).
_SIDE_INDEX = {"f": "filter", "i": "input", "o": "output"}

TIME_SEED_WARNING = (
    "seed 0 means srand(time(0)), as the harness did: the inputs depend on the clock and cannot "
    "be reproduced; pass a nonzero seed to get a reproducible run"
)

_DEG = 31  # TYPE_3 degree
_SEP = 3  # TYPE_3 separation
_DISCARD = 310  # 10 * degree outputs thrown away by srandom


def _int32(v: int) -> int:
    """C conversion of an integer to ``int32_t`` (two's complement wraparound, as gcc does)."""
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _c_div(a: int, b: int) -> int:
    """C integer division (truncation toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def glibc_srand_state(seed: int) -> np.ndarray:
    """The 31 words ``r[i-31..i-1]`` (uint32) just before glibc's first ``rand()`` output.

    ``seed`` is taken as C ``unsigned int`` (reduced mod 2^32); 0 is replaced by 1, as glibc does.
    """
    seed = int(seed) & 0xFFFFFFFF
    if seed == 0:
        seed = 1
    r = [_int32(seed)]
    word = r[0]
    for _ in range(1, _DEG):
        hi = _c_div(word, 127773)
        lo = word - hi * 127773  # C remainder (sign of the dividend)
        word = _int32(16807 * lo - 2836 * hi)
        if word < 0:
            word = _int32(word + 2147483647)
        r.append(word)
    # Selinger's formulation of the ring buffer: r[31..33] = r[0..2], then
    # r[i] = r[i-3] + r[i-31]; output k is r[k + 344] >> 1 (r[34..343] are the 310 discards).
    seq = [w & 0xFFFFFFFF for w in r]
    seq += seq[0:_SEP]
    for i in range(_DEG + _SEP, _DEG + _SEP + _DISCARD):
        seq.append((seq[i - 31] + seq[i - 3]) & 0xFFFFFFFF)
    return np.array(seq[-_DEG:], dtype=np.uint32)


# The compiled generators keep the last 31 words in a 32-entry ring: r[i] sits at ring[i & 31],
# r[i] = r[i-31] + r[i-3] (mod 2^32, by the uint32 store), output = r[i] >> 1. ``hist`` holds
# r[i-31..i-1] oldest first on entry and is updated on exit, so the stream continues across calls.


@jit
def _load_ring(hist):  # pragma: no cover - compiled
    ring = np.empty(32, np.uint32)
    for j in range(31):
        ring[j] = hist[j]
    return ring


@jit
def _store_ring(ring, i, hist):  # pragma: no cover - compiled
    for j in range(31):
        hist[j] = ring[(i - 31 + j) & 31]


@jit
def _raw_into(hist, out):  # pragma: no cover - compiled
    ring = _load_ring(hist)
    i = 31
    for t in range(out.shape[0]):
        ring[i & 31] = ring[(i - 31) & 31] + ring[(i - 3) & 31]
        out[t] = ring[i & 31] >> 1
        i += 1
    _store_ring(ring, i, hist)


@jit
def _float_into(hist, out, span, fmin):  # pragma: no cover - compiled
    # static_cast<float>((max - min) * (double)rand() / (double)RAND_MAX) + (float)min
    ring = _load_ring(hist)
    i = 31
    for t in range(out.shape[0]):
        ring[i & 31] = ring[(i - 31) & 31] + ring[(i - 3) & 31]
        r = np.float64(ring[i & 31] >> 1)
        out[t] = np.float32((span * r) / 2147483647.0) + fmin
        i += 1
    _store_ring(ring, i, hist)


@jit
def _int_into(hist, out, span, lo):  # pragma: no cover - compiled
    # (short)(rand() % (max - min) + min); rand() >= 0, so C's remainder is rand() % |max - min|
    ring = _load_ring(hist)
    aspan = abs(span)
    i = 31
    for t in range(out.shape[0]):
        ring[i & 31] = ring[(i - 31) & 31] + ring[(i - 3) & 31]
        m = np.int64(ring[i & 31] >> 1) % aspan + lo
        out[t] = np.float32(((m + 32768) & 0xFFFF) - 32768)
        i += 1
    _store_ring(ring, i, hist)


class GlibcRand:
    """glibc's ``srand`` / ``rand`` (TYPE_3 ``random``), exactly, with fast bulk generation.

    >>> g = GlibcRand(1)
    >>> g.rand()
    1804289383
    """

    def __init__(self, seed: int = 1):
        self.srand(seed)

    def srand(self, seed: int) -> None:
        """Re-seed (C ``srand``: ``seed`` as unsigned int; 0 behaves like 1)."""
        self._hist = glibc_srand_state(seed)

    seed = srand

    def rand(self) -> int:
        """The next value of C ``rand()``, in [0, RAND_MAX]."""
        return int(self.rand_array(1)[0])

    def rand_array(self, n: int) -> np.ndarray:
        """The next ``n`` values of ``rand()`` as an int32 array (continues the stream)."""
        n = int(n)
        if n < 0:
            raise ValueError(f"n: {n} is negative; a count of values must be >= 0")
        out = np.empty(n, dtype=np.int32)
        _raw_into(self._hist, out)
        return out

    def fill_float(self, out: np.ndarray, rand_min: int, rand_max: int) -> np.ndarray:
        """Fill float32 ``out`` with the harness's ``randomFloatValue(min, max)``, one ``rand()``
        each (min != max), continuing the stream."""
        _float_into(self._hist, out, np.float64(int(rand_max) - int(rand_min)), np.float32(int(rand_min)))
        return out

    def fill_int(self, out: np.ndarray, rand_min: int, rand_max: int) -> np.ndarray:
        """Fill float32 ``out`` with the harness's ``(float)randomIntegerValue(min, max)``."""
        _int_into(self._hist, out, np.int64(int(rand_max) - int(rand_min)), np.int64(int(rand_min)))
        return out

    def __iter__(self):
        while True:
            yield self.rand()


def _resolve_seed(seed: int) -> int:
    """The value ``srand`` gets: the seed as ``uint32``, or ``time(0)`` (with a warning) for 0."""
    seed = int(seed)
    if seed & 0xFFFFFFFF == 0:
        warnings.warn(TIME_SEED_WARNING, stacklevel=3)
        return int(time.time()) & 0xFFFFFFFF
    return seed & 0xFFFFFFFF


def _short(name: str, v: int) -> int:
    v = int(v)
    if not -32768 <= v <= 32767:
        raise ValueError(f"{name}: {v} does not fit the harness's C short (-32768..32767)")
    return v


_CHUNK = 1 << 22


def harness_float_values(n_elements: int, seed: int, rand_min: int = -1, rand_max: int = 1) -> np.ndarray:
    """``n_elements`` float32 values of ``randomFloatValue(min, max)`` after ``srand(seed)``.

    ``float((max-min)·(double)rand()/RAND_MAX) + (float)min``; ``(float)min · 0.1f`` for every
    element if min == max (no ``rand()`` is drawn then). Seed 0 means ``time(0)`` (warns).
    """
    lo, hi = _short("rand_min", rand_min), _short("rand_max", rand_max)
    n = int(n_elements)
    if n < 0:
        raise ValueError(f"n_elements: {n} is negative; it must be >= 0")
    if lo == hi:  # no rand() is drawn: the seed does not matter
        return np.full(n, np.float32(lo) * np.float32(0.1), dtype=np.float32)
    out = np.empty(n, dtype=np.float32)
    return GlibcRand(_resolve_seed(seed)).fill_float(out, lo, hi)


def harness_int_values(n_elements: int, seed: int, rand_min: int = -5, rand_max: int = 5) -> np.ndarray:
    """``n_elements`` values of ``randomIntegerValue(min, max)`` after ``srand(seed)``, as float32.

    ``(short)(rand() % (max - min) + min)``, or ``min`` everywhere if min == max.
    """
    lo, hi = _short("rand_min", rand_min), _short("rand_max", rand_max)
    n = int(n_elements)
    if n < 0:
        raise ValueError(f"n_elements: {n} is negative; it must be >= 0")
    if lo == hi:  # no rand() is drawn: the seed does not matter
        return np.full(n, np.float32(lo), dtype=np.float32)
    out = np.empty(n, dtype=np.float32)
    return GlibcRand(_resolve_seed(seed)).fill_int(out, lo, hi)


def to_fp16_truncate(values: np.ndarray) -> np.ndarray:
    """float32 → fp16 bit patterns (uint16) by the harness's table conversion (truncation)."""
    v = np.ascontiguousarray(values, dtype=np.float32)
    out = np.empty(v.shape, dtype=np.uint16)
    flat_in, flat_out = v.reshape(-1), out.reshape(-1)
    for start in range(0, flat_in.shape[0], _CHUNK):
        flat_out[start : start + _CHUNK] = fp32_to_fp16_truncate(flat_in[start : start + _CHUNK])
    return out


def _convert(values: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "f16":
        return to_fp16_truncate(values).view(np.float16)
    if dtype == "f32":
        return values
    if dtype == "bf16":
        import ml_dtypes

        return (values.view(np.uint32) >> np.uint32(16)).astype(np.uint16).view(ml_dtypes.bfloat16)
    raise ValueError(f"dtype: {dtype!r} is not one of the harness's element types 'f16', 'f32', 'bf16'")


def harness_float_tensor(
    n_elements: int, seed: int, rand_min: int = -1, rand_max: int = 1, dtype: str = "f32"
) -> np.ndarray:
    """One tensor of the harness's float random data, flat, in memory order (one ``srand``).

    ``dtype`` "f32" (default): the float32 values the harness computed (convert them with
    :func:`to_fp16_truncate`); "f16": ``numpy.float16`` values already converted by truncation;
    "bf16": ``ml_dtypes.bfloat16``, the top 16 bits of the float (``float_to_bfloat16``:
    truncation toward zero, see the module docstring).
    """
    return _convert(harness_float_values(n_elements, seed, rand_min, rand_max), dtype)


def harness_int_tensor(
    n_elements: int, seed: int, rand_min: int = -5, rand_max: int = 5, dtype: str = "f32"
) -> np.ndarray:
    """One tensor of the harness's integer random data (``-rand_type int``), flat, memory order."""
    return _convert(harness_int_values(n_elements, seed, rand_min, rand_max), dtype)


def fixed_pattern(n_elements: int, dtype: str = "f16") -> np.ndarray:
    """The harness's data without random numbers (``-rand fixed``): 0.5, -1, 0.75 repeating
    over the row-major (memory) position; exact in every float format."""
    n = int(n_elements)
    pattern = np.array([0.5, -1.0, 0.75], dtype=np.float32)
    return _convert(np.resize(pattern, n), dtype)


def harness_range(rand_type: str, rand_min: int | None = None, rand_max: int | None = None) -> tuple[int, int]:
    """The (min, max) the harness uses: the given bounds, else [-1, 1] (float) / [-5, 5) (int)."""
    if rand_type not in ("float", "int"):
        raise ValueError(f"rand_type: {rand_type!r} is not 'float' or 'int'")
    lo_d, hi_d = (-1, 1) if rand_type == "float" else (-5, 5)
    return (lo_d if rand_min is None else int(rand_min), hi_d if rand_max is None else int(rand_max))


# ------------------------------------------------------------------------------------------------
# Whole-problem inputs


def tensor_layout_shape(problem: Any, tensor: str) -> tuple[str, tuple[int, ...]]:
    """``(layout, shape)`` of the harness's memref for ``tensor`` ("filter", "input", "output").

    miopen-gen allocated every tensor as a 5-D memref in the 5-letter layout (a 4-letter layout
    gets its ``g`` by :func:`emu.conv.normalize_layout`, as miopen-gen's ``correctParameters``
    did), with g = G, c = C/G, k = K/G; input h, w = H, W; output h, w = Ho, Wo. The shape follows
    the layout's letters, outermost first, so row-major order is memory order (and any other
    view of the same tensor, e.g. ``problem.tensor_shape(role)``, is a reshape of it).
    """
    fields = {"filter": "fil_layout", "input": "in_layout", "output": "out_layout"}
    if tensor not in fields:
        raise ValueError(f"tensor: {tensor!r} is not one of 'filter', 'input', 'output'")
    layout = normalize_layout(getattr(problem, fields[tensor]), tensor)
    g = problem.groups
    sizes = {"g": g, "n": problem.n, "c": problem.c // g, "k": problem.k // g, "y": problem.y, "x": problem.x}
    if tensor == "input":
        sizes.update(h=problem.h, w=problem.w)
    elif tensor == "output":
        sizes.update(h=problem.out_h, w=problem.out_w)
    return layout, tuple(int(sizes[ch]) for ch in layout)


def harness_tensor(
    problem: Any,
    tensor: str,
    seed: int | str | None = 1,
    rand_min: int | None = None,
    rand_max: int | None = None,
    rand_type: str = "int",
    *,
    rand_side: str = "both",
    dtype: str = "f16",
) -> np.ndarray:
    """One of the harness's tensors as its 5-D memref (see :func:`harness_inputs`)."""
    _, shape = tensor_layout_shape(problem, tensor)
    n = int(np.prod(shape, dtype=np.int64))
    if seed is None or (isinstance(seed, str) and seed == "fixed"):
        return fixed_pattern(n, dtype).reshape(shape)
    if isinstance(seed, str) and seed.strip().isdigit():
        seed = int(seed)
    if isinstance(seed, str) and seed == "none":
        lo = hi = 1
        seed_value = 1
    else:
        if isinstance(seed, str):
            raise ValueError(f"seed: {seed!r} is not an integer, 'fixed', 'none' or None")
        seed_value = int(seed)
        lo, hi = harness_range(rand_type, rand_min, rand_max)
        side = (rand_side or "both")[:1]
        if side in _SIDE_INDEX and _SIDE_INDEX[side] != tensor:
            lo = hi = 1  # the tensor -rand_side does not select
    if rand_type == "float":
        return harness_float_tensor(n, seed_value, lo, hi, dtype).reshape(shape)
    if rand_type == "int":
        return harness_int_tensor(n, seed_value, lo, hi, dtype).reshape(shape)
    raise ValueError(f"rand_type: {rand_type!r} is not 'float' or 'int'")


def harness_inputs(
    problem: Any,
    seed: int | str | None = 1,
    rand_min: int | None = None,
    rand_max: int | None = None,
    rand_type: str = "int",
    *,
    rand_side: str = "both",
    dtype: str = "f16",
    tensors: Iterable[str] | None = None,
) -> dict[str, np.ndarray]:
    """The tensors the harness fills for ``problem``, each as its 5-D memref in memory order
    (shape from :func:`tensor_layout_shape`; reshape to ``problem.tensor_shape(role)`` as needed).

    Parameters
    ----------
    problem
        An ``emu.conv.ConvProblem`` (direction, sizes, layouts).
    seed
        ``-rand``: an integer seed (each tensor re-seeds ``srand(seed)``; 0 = ``time(0)``, which
        warns), ``None`` or "fixed" for the 0.5, -1, 0.75 pattern, "none" for min = max = 1.
    rand_min, rand_max
        The range (C ``short``); ``None`` = the harness's default for ``rand_type``.
    rand_type
        "int" (miopen-gen's default) or "float" (the 2022 study's choice).
    rand_side
        "both" (default), "filter", "input" or "output": the other tensors get min = max = 1.
    dtype
        "f16" (numpy float16, truncating conversion), "f32" or "bf16" (``ml_dtypes.bfloat16``,
        the float's top 16 bits).
    tensors
        Which of "filter", "input", "output" to return; default: the two the direction reads
        (fwd: filter, input; bwd_data: filter, output; bwd_weight: input, output).

    Returns
    -------
    ``{name: array}`` in the harness's fill order (filter, input, output). Because every tensor
    re-seeds, each is independent of which others are generated.
    """
    if tensors is None:
        if problem.direction not in DIRECTION_TENSORS:
            raise ValueError(f"problem.direction: {problem.direction!r} is not one of {', '.join(DIRECTION_TENSORS)}")
        wanted = set(DIRECTION_TENSORS[problem.direction])
    else:
        wanted = set(tensors)
        unknown = wanted - set(TENSOR_ORDER)
        if unknown:
            raise ValueError(f"tensors: {sorted(unknown)} are not among 'filter', 'input', 'output'")
    if isinstance(seed, (int, np.integer)) and int(seed) & 0xFFFFFFFF == 0:
        # time(0) once for the whole harness run (the tensors are filled within the same second)
        warnings.warn(TIME_SEED_WARNING, stacklevel=2)
        seed = int(time.time()) & 0xFFFFFFFF or 1
    out: dict[str, np.ndarray] = {}
    for name in TENSOR_ORDER:
        if name in wanted:
            out[name] = harness_tensor(
                problem, name, seed, rand_min, rand_max, rand_type, rand_side=rand_side, dtype=dtype
            )
    return out
