"""Operands of every input format as the unit kernels take them.

A unit multiplies operands of one :class:`emu.units.InputFormat`. The kernels see two kinds of
arrays (:mod:`emu.kernels._tiles`):

* fp16 and the fp8 formats run as **fp16 bit patterns** (uint16): every fp8 value (e4m3fn,
  e5m2 and their fnuz forms) is an fp16 value, so the fp16 decode, layouts and kernels apply
  unchanged; what differs, the field exponent of the format's subnormals, reaches the kernels
  as a parameter (:func:`emu.units.kernel_vector`).
* bf16 and tf32 (8-bit exponents, products from 2^-298 to 2^256) run as **float64 values**, exact
  for every operand and product.

A flushing unit (``flush_inputs``) flushes each format at its own smallest normal: fp16 inside
the fp16 decode, the others here, before the conversion.

Mixed operands (``UnitParams.b_input_format``: e4m3 × e5m2 on NVIDIA's fp8 instructions, fp8 ×
bf8 on MI300) run the same way: each operand is converted from its own format (``side``), and
the kernels take each operand's subnormal exponent (:func:`emu.units.kernel_vector`).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .units import INPUT_EMIN, WIDE_INPUTS, InputFormat, UnitParams, operand_formats

__all__ = [
    "INPUT_NAMES",
    "input_format",
    "input_name",
    "input_pair",
    "pair_name",
    "is_wide",
    "decode_flush",
    "operand",
    "multiplied_values",
    "round_to_tf32",
    "tf32_operands",
    "TF32_ROUNDINGS",
    "value_dtype",
    "pattern_dtype",
    "PATTERN_BITS",
]

#: the float dtype of each format's values (tf32 travels in float32 containers)
_VALUE_DTYPE = {
    InputFormat.FP16: np.dtype(np.float16),
    InputFormat.BF16: np.dtype(ml_dtypes.bfloat16),
    InputFormat.TF32: np.dtype(np.float32),
    InputFormat.E4M3: np.dtype(ml_dtypes.float8_e4m3fn),
    InputFormat.E5M2: np.dtype(ml_dtypes.float8_e5m2),
    InputFormat.E4M3FNUZ: np.dtype(ml_dtypes.float8_e4m3fnuz),
    InputFormat.E5M2FNUZ: np.dtype(ml_dtypes.float8_e5m2fnuz),
    InputFormat.E2M1: np.dtype(ml_dtypes.float4_e2m1fn),
    InputFormat.E2M3: np.dtype(ml_dtypes.float6_e2m3fn),
    InputFormat.E3M2: np.dtype(ml_dtypes.float6_e3m2fn),
}
#: the unsigned dtype of each format's bit patterns
_PATTERN_DTYPE = {
    InputFormat.FP16: np.dtype(np.uint16),
    InputFormat.BF16: np.dtype(np.uint16),
    InputFormat.TF32: np.dtype(np.uint32),
    InputFormat.E4M3: np.dtype(np.uint8),
    InputFormat.E5M2: np.dtype(np.uint8),
    InputFormat.E4M3FNUZ: np.dtype(np.uint8),
    InputFormat.E5M2FNUZ: np.dtype(np.uint8),
    InputFormat.E2M1: np.dtype(np.uint8),
    InputFormat.E2M3: np.dtype(np.uint8),
    InputFormat.E3M2: np.dtype(np.uint8),
}
#: the width of the fp4 and fp6 formats' patterns (held one per uint8, in the low bits)
PATTERN_BITS = {InputFormat.E2M1: 4, InputFormat.E2M3: 6, InputFormat.E3M2: 6}
#: tf32 keeps 10 of fp32's 23 fraction bits; the units drop the 13 low ones (RZ)
TF32_DROPPED = np.uint32((1 << 13) - 1)


#: How a kernel makes tf32 operands of fp32 values before its tf32 unit (:func:`tf32_operands`):
#: ``"rne"`` to nearest, ties to even (CUTLASS's ``NumericConverter<tfloat32_t, float>``, cuBLAS's
#: tf32 GEMMs, code built for sm_90: PTX ``cvt.rn.tf32.f32``); ``"rna"`` to nearest, ties away from
#: zero (PTX ``cvt.rna.tf32.f32``, the only rounding conversion to tf32 that code built for sm_80
#: has: cuDNN's sm80 tf32 convolution kernels); ``""``: the fp32 bits reach the unit, which drops
#: the 13 low ones.
TF32_ROUNDINGS = ("rne", "rna", "")


def round_to_tf32(x, ties: str = "even") -> np.ndarray:
    """fp32 values (float32, or uint32 patterns) rounded to tf32's 10 fraction bits to nearest,
    ties to even (``ties="even"``) or away from zero (``"away"``), as float32 (uint32 for
    patterns); infinities and NaNs kept, a value rounding past the largest tf32 becomes infinite.

    A tf32 unit drops the 13 low bits of what reaches it (:func:`operand`); a library kernel
    that converts its fp32 operands first rounds them this way, so ``operand(round_to_tf32(x),
    …)`` is what its matrix unit multiplies. Ties to even: CUTLASS's tf32 GEMMs (the
    ``cutlass_80_tensorop_s1688gemm`` kernels cuBLAS runs with ``allow_tf32``) and the sm90
    kernels (PTX ``cvt.rn.tf32.f32``, sm_90 and later); ties away: PTX ``cvt.rna.tf32.f32``
    (sm_80), what cuDNN's sm80 tf32 convolution kernels do (NVIDIA H200 captures; the PTX ISA,
    "cvt"; LLVM's ``BuiltinsNVPTX.td``: ``__nvvm_f2tf32_rna`` SM_80, ``__nvvm_f2tf32_rn`` SM_90)."""
    a = np.asarray(x)
    if a.dtype not in (np.float32, np.uint32):
        raise TypeError(f"x: expected float32 values or uint32 patterns, got dtype {a.dtype}")
    if ties not in ("even", "away"):
        raise ValueError(f"ties: {ties!r} is not one of even, away")
    b = a.view(np.uint32)
    # half of the dropped part's ulp, less one where a tie goes down (ties to even, kept bit 0)
    half = np.uint32(0x1000) if ties == "away" else np.uint32(0xFFF) + ((b >> np.uint32(13)) & np.uint32(1))
    with np.errstate(over="ignore"):
        r = (b + half) & ~TF32_DROPPED
    out = np.where((b & np.uint32(0x7F800000)) == np.uint32(0x7F800000), b, r).astype(np.uint32)
    return out if a.dtype == np.uint32 else out.view(np.float32)


def tf32_operands(x, rounding: str) -> np.ndarray:
    """fp32 values or uint32 patterns as a kernel hands them to its tf32 unit, ``rounding`` one of
    :data:`TF32_ROUNDINGS` (``"rne"``, ``"rna"``: :func:`round_to_tf32` with ties to even or
    away; ``""``: unchanged, the unit drops the low bits). ValueError for any other rounding."""
    if rounding not in TF32_ROUNDINGS:
        raise ValueError(f"tf32_rounding: {rounding!r} is not one of {', '.join(map(repr, TF32_ROUNDINGS))}")
    if not rounding:
        return np.asarray(x)
    return round_to_tf32(x, "even" if rounding == "rne" else "away")


#: Every name :func:`input_format` accepts (lower case) and the format it stands for.
INPUT_NAMES = {
    "fp16": InputFormat.FP16,
    "f16": InputFormat.FP16,
    "float16": InputFormat.FP16,
    "half": InputFormat.FP16,
    "bf16": InputFormat.BF16,
    "bfloat16": InputFormat.BF16,
    "tf32": InputFormat.TF32,
    "xf32": InputFormat.TF32,
    "e4m3": InputFormat.E4M3,
    "e4m3fn": InputFormat.E4M3,
    "float8_e4m3fn": InputFormat.E4M3,
    "fp8": InputFormat.E4M3,
    "e5m2": InputFormat.E5M2,
    "float8_e5m2": InputFormat.E5M2,
    "bf8": InputFormat.E5M2,
    "e4m3fnuz": InputFormat.E4M3FNUZ,
    "float8_e4m3fnuz": InputFormat.E4M3FNUZ,
    "e5m2fnuz": InputFormat.E5M2FNUZ,
    "float8_e5m2fnuz": InputFormat.E5M2FNUZ,
    "e2m1": InputFormat.E2M1,
    "fp4": InputFormat.E2M1,
    "float4_e2m1fn": InputFormat.E2M1,
    "e2m3": InputFormat.E2M3,
    "float6_e2m3fn": InputFormat.E2M3,
    "e3m2": InputFormat.E3M2,
    "float6_e3m2fn": InputFormat.E3M2,
}
_CANONICAL = {
    InputFormat.FP16: "fp16",
    InputFormat.BF16: "bf16",
    InputFormat.TF32: "tf32",
    InputFormat.E4M3: "e4m3",
    InputFormat.E5M2: "e5m2",
    InputFormat.E4M3FNUZ: "e4m3fnuz",
    InputFormat.E5M2FNUZ: "e5m2fnuz",
    InputFormat.E2M1: "e2m1",
    InputFormat.E2M3: "e2m3",
    InputFormat.E3M2: "e3m2",
}


def input_format(name) -> InputFormat:
    """The :class:`InputFormat` of a name (``"bf16"``, ``"tf32"``/``"xf32"``, ``"e4m3"``,
    ``"e5m2"``, ``"e4m3fnuz"``, ``"e5m2fnuz"``, ``"fp16"``; any case), a member, or its int;
    ValueError naming the accepted names otherwise."""
    if isinstance(name, InputFormat):
        return name
    if isinstance(name, (int, np.integer)) and not isinstance(name, bool):
        try:
            return InputFormat(int(name))
        except ValueError:
            pass
    elif isinstance(name, str) and name.strip().lower() in INPUT_NAMES:
        return INPUT_NAMES[name.strip().lower()]
    raise ValueError(f"input format: {name!r} is not one of {', '.join(_CANONICAL.values())}")


def input_name(fmt) -> str:
    """The canonical short name of an input format (``"bf16"``, ``"e4m3"``, …)."""
    return _CANONICAL[input_format(fmt)]


#: what separates A's format from B's in a pair's name (``"e4m3xe5m2"``)
PAIR_SEPARATOR = "x"


def input_pair(spec) -> tuple[InputFormat, InputFormat]:
    """(A's format, B's format) of an operand-format spec: one format for both (anything
    :func:`input_format` takes), a pair ``("e4m3", "e5m2")``, or its name ``"e4m3xe5m2"``
    (:func:`pair_name`). ValueError naming the accepted forms otherwise."""
    if isinstance(spec, (tuple, list)):
        if len(spec) != 2:
            raise ValueError(f"input format: a pair (A's format, B's format), got {len(spec)} entries: {spec!r}")
        return input_format(spec[0]), input_format(spec[1])
    if isinstance(spec, str) and spec.strip().lower() not in INPUT_NAMES and PAIR_SEPARATOR in spec.lower():
        parts = spec.strip().lower().split(PAIR_SEPARATOR)
        if len(parts) == 2:
            return input_format(parts[0]), input_format(parts[1])
        raise ValueError(f"input format: {spec!r}: a pair is written A{PAIR_SEPARATOR}B, e.g. 'e4m3xe5m2'")
    fmt = input_format(spec)
    return fmt, fmt


def pair_name(a_fmt, b_fmt=None) -> str:
    """The name of an operand-format pair: ``"e4m3"`` when both are e4m3, ``"e4m3xe5m2"`` for
    A in e4m3 and B in e5m2 (:func:`input_pair` reads it back)."""
    a = input_name(a_fmt)
    b = a if b_fmt is None else input_name(b_fmt)
    return a if a == b else f"{a}{PAIR_SEPARATOR}{b}"


def is_wide(params: UnitParams) -> bool:
    """Whether the unit's operands run as float64 values (bf16, tf32) rather than fp16 patterns."""
    return any(f in WIDE_INPUTS for f in operand_formats(params))


def decode_flush(params: UnitParams) -> bool:
    """The flush flag of the fp16 decode: the unit's ``flush_inputs`` for fp16 operands; the
    other formats are flushed at their own threshold by :func:`operand`."""
    return bool(params.flush_inputs) and operand_formats(params) == (InputFormat.FP16, InputFormat.FP16)


def value_dtype(fmt) -> np.dtype:
    """The float dtype of a format's values (``ml_dtypes.bfloat16``, ``float8_e4m3fn``, …;
    float32 for tf32)."""
    return _VALUE_DTYPE[input_format(fmt)]


def pattern_dtype(fmt) -> np.dtype:
    """The unsigned dtype of a format's bit patterns (uint8 for fp8, fp6 and fp4)."""
    return _PATTERN_DTYPE[input_format(fmt)]


def multiplied_values(values: np.ndarray, fmt) -> np.ndarray:
    """The values (float64) a unit of input format ``fmt`` multiplies, from an array of that
    format's values (its :func:`value_dtype`): the same values, but tf32's with their 13 low
    fraction bits dropped (RZ), as the units do. No flush."""
    fmt = input_format(fmt)
    if fmt == InputFormat.TF32:
        values = (np.asarray(values, np.float32).view(np.uint32) & ~TF32_DROPPED).view(np.float32)
    return np.asarray(values).astype(np.float64)


def operand(x, name: str, params: UnitParams, *, side: str = "a") -> np.ndarray:
    """``x`` (values of the unit's input format for that operand, or its bit patterns) as the
    kernels take it: uint16 fp16 patterns for fp16 and fp8, float64 values for bf16 and tf32
    (:mod:`emu.operands`). ``side``: ``"a"`` or ``"b"``, which operand ``x`` is (they differ in
    format for mixed units, :func:`emu.units.operand_formats`).

    Accepted: fp16 — float16 or uint16; bf16 — ``ml_dtypes.bfloat16`` or uint16; tf32 — float32
    (its 13 low fraction bits dropped, as the units do) or uint32; e4m3 / e5m2 / e4m3fnuz /
    e5m2fnuz — the ``ml_dtypes`` float8 type or uint8. TypeError naming the accepted dtypes
    otherwise (a float64 array is never rounded silently into a format)."""
    if side not in ("a", "b"):
        raise ValueError(f"side: {side!r} is not one of 'a', 'b'")
    fmt = operand_formats(params)[side == "b"]
    x = np.asarray(x)
    vdt, pdt = _VALUE_DTYPE[fmt], _PATTERN_DTYPE[fmt]
    if x.dtype == pdt:
        width = PATTERN_BITS.get(fmt, 8 * pdt.itemsize)
        if width < 8 and x.size and int(x.max()) >> width:
            raise ValueError(
                f"{name}: {_CANONICAL[fmt]} bit patterns are {width} bits (below {1 << width}), got {int(x.max())}"
            )
        values = x.view(vdt)
    elif x.dtype == vdt:
        values = x
    else:
        raise TypeError(
            f"{name}: the unit multiplies {_CANONICAL[fmt]}: expected {vdt.name} values or {pdt.name} bit "
            f"patterns, got dtype {x.dtype}"
        )
    if fmt == InputFormat.FP16:
        return values.view(np.uint16)
    flush = bool(params.flush_inputs)
    if fmt in WIDE_INPUTS:
        out = multiplied_values(values, fmt)
        if flush:
            out[np.abs(out) < 2.0 ** INPUT_EMIN[fmt]] = 0.0
        return out
    half = values.astype(np.float16)  # exact: every fp8 value is an fp16 value
    if flush:
        half[np.abs(half) < np.float16(2.0 ** INPUT_EMIN[fmt])] = 0
    return half.view(np.uint16)
