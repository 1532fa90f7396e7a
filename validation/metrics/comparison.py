"""The entry point: :func:`compare`, and :class:`Comparison` for callers that choose which elements
to visit. They resolve the data types and options, prepare each chunk (float64, the study's float
arithmetic, the validation's rounding), feed the :class:`~validation.metrics.accumulate.Accumulator`
and read back the :class:`~validation.metrics.Element` at each reported index."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from emu.formats import FP16, FP32, FloatFormat, format_bits, resolve_format, spacing
from emu.rounding import round_rne

from .accumulate import Accumulator
from .constants import DEFAULT_CHUNK, TORCH_TOLERANCES
from .policy import StudyPolicy, check_policy
from .results import ComparisonResult, Element

# ------------------------------------------------------------------------------------------------
# Data types


def resolve_dtype(dtype: Any) -> str:
    """Short name ("fp16", "bf16", "fp32", "fp64") of a data type given by name or numpy dtype
    (:func:`emu.formats.resolve_format`: ``ValueError`` naming the valid names for an unknown
    name, ``TypeError`` for a dtype that is not one of the four float types)."""
    return resolve_format(dtype).short_name


def _dtype_name_of(a: np.ndarray) -> str:
    """Short name of an input array's type; integer and bool arrays are read as float64."""
    if a.dtype.kind in "biu":
        return "fp64"
    return resolve_dtype(a.dtype)


def _bits_hex(value: Any, fmt: FloatFormat) -> str:
    """Bit pattern of one value of ``fmt``, as 0x-prefixed hex of the format's width."""
    return format_bits(int(np.asarray(value, dtype=fmt.float_dtype).view(fmt.uint_dtype)), fmt)


def _orig_bits(a: np.ndarray, i: int, fmt: FloatFormat) -> str:
    """Bit pattern of element ``i`` of an input array as stored (NaN payloads kept)."""
    x = np.asarray(a.flat[i])
    if x.dtype == fmt.float_dtype:
        return format_bits(int(x.view(fmt.uint_dtype)), fmt)
    return _bits_hex(float(x), fmt)  # integer input read as float64


def _chunks(a: np.ndarray, size: int) -> Iterator[tuple[int, np.ndarray]]:
    """(start, 1-D chunk) in row-major order; contiguous arrays are sliced without copying."""
    flat = a.reshape(-1) if a.flags.c_contiguous else None
    for start in range(0, a.size, size):
        stop = min(start + size, a.size)
        yield start, (flat[start:stop] if flat is not None else a.flat[start:stop])


# ------------------------------------------------------------------------------------------------
# Entry point


def _preparer(quirks: StudyPolicy | None, rv: FloatFormat | None):
    """The chunk preparation of :func:`compare`: (validation, kernel) chunks as float64, in the
    study's float arithmetic and rounded as the verifier rounds the validation."""

    def prepare(vc: np.ndarray, kc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        v64 = vc.astype(np.float64)
        k64 = kc.astype(np.float64)
        if quirks is not None:
            # C: the validation is a float ((float)acc), then truncf to f16 and back
            with np.errstate(over="ignore", invalid="ignore"):
                v64 = v64.astype(np.float32).astype(np.float64)
                k64 = k64.astype(np.float32).astype(np.float64)
        if rv is not None:
            v64 = round_rne(v64, rv)
        return v64, k64

    return prepare


def _element_reader(va: np.ndarray, ka: np.ndarray, fmt: FloatFormat, quirks: StudyPolicy | None,
                    rv: FloatFormat | None, prepare, v_name: str, k_name: str, v_cmp_name: str,
                    k_cmp_name: str):  # fmt: skip
    """element(i): the :class:`Element` at flat index ``i`` of :func:`compare`'s inputs."""
    shape = tuple(int(s) for s in va.shape)
    v_fmt, k_fmt = resolve_format(v_cmp_name), resolve_format(k_cmp_name)

    def element(i: int) -> Element:
        coords = tuple(int(c) for c in np.unravel_index(i, shape)) if shape else ()
        v_in = np.asarray(va.flat[i]).reshape(1)
        v64, k64 = prepare(v_in, np.asarray(ka.flat[i]).reshape(1))
        v, k = float(v64[0]), float(k64[0])
        with np.errstate(all="ignore"):
            if quirks is not None:
                c32, g32 = np.float32(v), np.float32(k)
                d = float(np.abs(c32 - g32))
                interval = float(quirks.interval(np.array([min(abs(c32), abs(g32))], np.float32))[0])
            else:
                d = abs(v - k)
                interval = float(spacing(min(abs(v), abs(k)), fmt, "ulp"))
            eps = 0.0 if v == k else (d / interval if interval else math.inf)
            rel = d / abs(v) if v != 0 and not math.isnan(v) else math.nan
        if v == k:
            d, rel = 0.0, (0.0 if v != 0 else math.nan)
        return Element(
            index=i,
            coords=coords,
            validation=v,
            kernel=k,
            validation_bits=_orig_bits(va, i, v_fmt)
            if v_fmt.short_name == v_name and rv is None
            else _bits_hex(v, v_fmt),
            kernel_bits=(_orig_bits(ka, i, k_fmt) if k_fmt.short_name == k_name else _bits_hex(k, k_fmt)),
            validation_format=v_fmt.short_name,
            kernel_format=k_fmt.short_name,
            validation_input=float(np.asarray(v_in, dtype=np.float64)[0]),
            abs_diff=d,
            rel_diff=rel,
            epsilon_diff=eps,
        )

    return element


class Comparison:
    """:func:`compare` one piece at a time, for callers that choose which elements to visit.

    The constructor takes the two whole arrays and the options of :func:`compare` (and resolves
    them the same way); :meth:`add` feeds input values (as given, 1-D) in visiting order,
    :meth:`add_equal` accounts for equal elements left out (study mode), :meth:`result`
    finishes. ``compare(v, k, **options)`` is ``Comparison(v, k, **options)`` fed every element
    in row-major order, ``chunk`` at a time.
    """

    def __init__(
        self,
        validation: Any,
        kernel: Any,
        *,
        dtype_hint: Any = None,
        top: int = 10,
        study_quirks: Any = None,
        round_validation: Any = None,
        allclose: tuple[float, float] | None = None,
        equal_nan: bool = False,
        distinct_pairs: bool = True,
    ) -> None:
        va = np.asarray(validation)
        ka = np.asarray(kernel)
        if va.shape != ka.shape:
            raise ValueError(f"shapes differ: validation {va.shape}, kernel {ka.shape}")
        v_name, k_name = _dtype_name_of(va), _dtype_name_of(ka)
        fmt = resolve_format(dtype_hint if dtype_hint is not None else k_name)
        quirks = check_policy(study_quirks)
        rv = None if round_validation is None else resolve_format(round_validation)
        if quirks is not None:
            if rv is not None and rv.short_name != "fp16":
                raise ValueError("study mode rounds the validation to fp16; round_validation must "
                                 f"be None or 'fp16', got {rv.short_name!r}")  # fmt: skip
            rv = FP16
        if allclose is None:
            tol = TORCH_TOLERANCES[fmt.short_name]
        else:
            tol = (float(allclose[0]), float(allclose[1]))
        if tol[0] < 0 or tol[1] < 0:
            raise ValueError(f"allclose tolerances must be >= 0, got rtol={tol[0]}, atol={tol[1]}")
        v_cmp = rv if rv is not None else resolve_format(v_name)
        k_cmp = resolve_format(k_name)
        if quirks is not None and k_cmp.bits > 32:
            k_cmp = FP32  # C: (float)gpuVal
        pack32 = v_cmp.bits <= 32 and k_cmp.bits <= 32
        self._shape = tuple(int(s) for s in va.shape)
        self._input_dtypes = (v_name, k_name)
        self._round_validation = None if rv is None else rv.short_name
        self._prepare = _preparer(quirks, rv)
        on_grid = (v_cmp.short_name == fmt.short_name, k_cmp.short_name == fmt.short_name)
        self._acc = Accumulator(fmt=fmt, quirks=quirks, top=top, allclose=tol, equal_nan=equal_nan,
                                pack32=pack32, on_grid=on_grid, distinct_pairs=distinct_pairs)  # fmt: skip
        self._element = _element_reader(va, ka, fmt, quirks, rv, self._prepare, v_name, k_name,
                                        v_cmp.short_name, k_cmp.short_name)  # fmt: skip

    def add(self, position: int, validation: np.ndarray, kernel: np.ndarray) -> None:
        """Elements at visiting positions ``position``, ``position + 1``, ...: 1-D input values as
        given (they are rounded and widened here as :func:`compare` does)."""
        v64, k64 = self._prepare(validation, kernel)
        self._acc.add(position, v64, k64)

    def add_equal(self, count: int, max_mag: float) -> None:
        """``count`` elements with ``v == k`` that were not added, and the largest
        max(|v|, |k|) among them (study mode: they count in N, the exact matches and the RMS
        denominator only; the histograms and float64 metrics cover the added elements)."""
        self._acc.add_equal(count, max_mag)

    def result(self, positions: np.ndarray | None = None) -> ComparisonResult:
        """The :class:`ComparisonResult`. ``positions[p]``: the flat row-major index of the element
        added at visiting position ``p`` (default: positions are the flat indices)."""
        element = self._element
        if positions is not None:
            element_at = element

            def element(p: int) -> Element:
                return element_at(int(positions[p]))

        return self._acc.result(shape=self._shape, element=element,
                                round_validation=self._round_validation,
                                input_dtypes=self._input_dtypes)  # fmt: skip


def compare(
    validation: Any,
    kernel: Any,
    *,
    dtype_hint: Any = None,
    chunk: int = DEFAULT_CHUNK,
    top: int = 10,
    study_quirks: Any = None,
    round_validation: Any = None,
    allclose: tuple[float, float] | None = None,
    equal_nan: bool = False,
    distinct_pairs: bool = True,
) -> ComparisonResult:
    """Measure how far ``kernel`` is from ``validation``, element by element.

    Parameters
    ----------
    validation, kernel
        Arrays of the same shape (float16, bfloat16, float32 or float64; integer arrays are read
        as float64). Visited in row-major order, which decides the first element at a maximum:
        to reproduce a C verifier's reported pairs, pass arrays shaped in the tensor's memory
        layout.
    dtype_hint
        The test's data type ("fp16", "bf16", "fp32", "fp64" or a dtype): the epsilon format,
        the torch tolerances, the MLU-OPS diff3 split and the native arithmetic of
        ``max_rel_diff_old_native``. Default: the kernel array's type.
    chunk
        Elements per chunk (memory scales with it, not with the array size).
    top
        How many worst elements (by epsilonDiff) and non-finite mismatches to keep.
    study_quirks
        The policy of a run set of the 2022 study (a :class:`~validation.metrics.StudyPolicy`, e.g.
        ``validation.verify.study_quirks("fair_3")``): the headline metrics then follow that run
        set's C verifier exactly (:mod:`validation.metrics`). Implies ``round_validation="fp16"``.
    round_validation
        Round the validation to this format (RNE) before measuring, as rocMLIR's verifiers did
        (``truncf`` to f16). None: measure the values as given.
    allclose
        (rtol, atol) of the allclose metric; default the torch.testing defaults of the data type.
    equal_nan
        Whether NaN against NaN passes allclose.
    distinct_pairs
        Collect the distinct (validation, kernel) mismatch pairs of MLU-OPS diff4 (a sort of
        every mismatch: most of the cost of a comparison with many). False skips them for
        callers whose checks do not read diff4: the result's ``diff4`` is then the shares over
        all mismatches (``diff4_distinct`` False, ``diff4_measured`` False) and
        ``metric("diff4")`` raises.

    Returns
    -------
    ComparisonResult
    """
    va = np.asarray(validation)
    ka = np.asarray(kernel)
    for name, a in (("validation", va), ("kernel", ka)):
        if a.dtype.kind in "bcOUSMm":  # bfloat16 (ml_dtypes) is kind V
            raise TypeError(
                f"{name}: expected an array of numbers (float16/32/64, or uint16 fp16 bit patterns), got {a.dtype}"
            )
    if dtype_hint is not None and resolve_dtype(dtype_hint) == "fp16":
        # uint16 arrays under an fp16 hint are fp16 bit patterns, as against(), dot_add and run(inputs=) read them
        va = va.view(np.float16) if va.dtype == np.uint16 else va
        ka = ka.view(np.float16) if ka.dtype == np.uint16 else ka
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 0:
        raise ValueError(f"top: a whole number ≥ 0 of worst elements to keep, got {top!r}")
    if va.shape != ka.shape:
        raise ValueError(f"shapes differ: validation {va.shape}, kernel {ka.shape}")
    if chunk < 1:
        raise ValueError(f"chunk must be positive, got {chunk}")
    comparison = Comparison(va, ka, dtype_hint=dtype_hint, top=top, study_quirks=study_quirks,
                            round_validation=round_validation, allclose=allclose,
                            equal_nan=equal_nan, distinct_pairs=distinct_pairs)  # fmt: skip
    for (start, vc), (_, kc) in zip(_chunks(va, chunk), _chunks(ka, chunk)):
        comparison.add(start, vc, kc)
    return comparison.result()
