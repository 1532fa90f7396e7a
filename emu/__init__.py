"""Bit-level arithmetic: formats, rounding, matrix-unit and FMA kernels, GEMM and convolution.

Glossary: *significand* the integer digits of a float; *exponent* the power of two of its least
significant (or, for alignment, its leading) digit; *ulp* the spacing of a format at a value;
*RNE* round to nearest, ties to even; *RZ* toward zero; *RD* toward −∞; *FTZ* flush subnormals
to zero; *group* the terms one unit step fuses; *fused_terms* its size.

Public API: :func:`dot_add` (one unit over a K vector) and :func:`gemm` (a GEMM in an explicit
accumulation order) share one convention, ``(a, b, c, unit)``: operands, accumulator, unit, and
return float32 (float16 for a unit with fp16 output). :class:`Schedule` is a kernel's whole
accumulation schedule (splits, reductions, epilogue); :class:`GemmOrder` its older, narrower
form. The modules ``formats``, ``rounding``,
``atomics`` (split-K partials and atomic add orders), ``blockscale`` (MX and NVFP4 block-scaled
operands: :func:`dot_add` and :func:`gemm` take their scales as ``scale_a`` and ``scale_b``), ``conv`` (convolutions as the kernels'
GEMMs), ``implicit_gemm`` (convolutions as the libraries' implicit GEMMs), ``simt`` (fp32 GEMMs
as chains of fp32 FMAs: SIMT kernels, fp32 without TF32) and ``winograd`` (Winograd
convolutions in fp32) are imported with the package.
"""

from . import atomics, blockscale, conv, formats, implicit_gemm, rounding, simt, winograd
from .dot import dot_add
from .gemm import GemmOrder, gemm, split_partials, strided_k_order
from .schedule import Schedule
from .units import Family, Format, Rounding, ScaleFormat, UnitParams

__all__ = [
    "dot_add",
    "gemm",
    "GemmOrder",
    "Schedule",
    "split_partials",
    "strided_k_order",
    "Family",
    "Format",
    "Rounding",
    "ScaleFormat",
    "UnitParams",
    "atomics",
    "blockscale",
    "conv",
    "formats",
    "implicit_gemm",
    "rounding",
    "simt",
    "winograd",
]
