"""Bit-level arithmetic: formats, rounding, matrix-unit and FMA kernels, GEMM and convolution.

Glossary: *significand* the integer digits of a float; *exponent* the power of two of its least
significant (or, for alignment, its leading) digit; *ulp* the spacing of a format at a value;
*RNE* round to nearest, ties to even; *RZ* toward zero; *RD* toward −∞; *FTZ* flush subnormals
to zero; *group* the terms one unit step fuses; *fused_terms* its size.

Public API: :func:`dot_add` (one unit over a K vector), :func:`gemm` (a GEMM in an explicit
accumulation order), plus the modules ``formats`` and ``rounding``.
"""

from .units import Family, Format, Rounding, UnitParams
from .dot import dot_add
from .gemm import GemmOrder, gemm, gemm_split_ensemble, strided_k_order

__all__ = ["dot_add", "gemm", "GemmOrder", "gemm_split_ensemble", "strided_k_order", "Family", "Format", "Rounding", "UnitParams"]
