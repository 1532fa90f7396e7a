"""Convolution problems and their mapping to GEMM (implicit GEMM), for every direction and layout.

The mapping is rocMLIR's ``ConvToGemm`` of mid-2022 (github.com/ROCm/rocMLIR, Rock version
@3df931f1, ``ConvToGemm.cpp`` and ``GridwiseGemmParams.cpp``). Each GEMM computes, per group g,
``C[m, n] = Σ_k A[m, k]·B[k, n]`` with k running in the kernel's *gemmK order*:

* fwd:        A = filter k × (c,y,x);      B = input (c,y,x) × (n,ho,wo);   C → output (k; n,ho,wo)
* bwd_weight: A = dy k × (n,ho,wo);        B = input (n,ho,wo) × (c,y,x);   C → filter (k; c,y,x)
* bwd_data:   A = filter c × (k,ydot,xdot); B = dy (k,ydot,xdot) × (n,ht,wt); C → dx (c; n,hi,wi)

where (c,y,x) stands for the filter layout's own order of its c, y, x letters (c,y,x for kcyx,
y,x,c for kyxc and yxck), on both operands. M = K/G, K/G, C/G: the channel counts of one group.
(ConvToGemm.cpp merges the input side's c, y, x in the *input* layout's order; for a filter and an
input layout that disagree, e.g. kyxc with nchw, the real kernel would then pair mismatched
elements: inferred from the code, not observed. This module computes the true convolution in the
filter's order; compare :attr:`ConvProblem.input_cyx_order` to spot such problems.)
Split-K for backward weight (KBlocks) cuts gemmK = (n, ho, wo) into KBlocks contiguous ranges of
(N/KBlocks)·Ho·Wo; that, like the accumulation order, is the ``gemm`` callable's business.

**Backward data** runs yTilda·xTilda sub-GEMMs, yTilda = strideH / gcd(strideH, dilationH) (same
for x), indexed by gemmId = iYTilda·xTilda + iXTilda; a sub-GEMM with yDotSlice·xDotSlice = 0 is
not run. With yDot = ⌈Y/yTilda⌉, hTilda = Ho + ⌈dilationH·(Y−1)/strideH⌉,
iHTildaLeft = ⌊max(0, padH_left − dilationH·(yTilda−1)) / strideH⌋,
iHTildaRight = min(hTilda, ⌈(padH_left + Hi − 1)/strideH⌉ + 1) and
yDotSlice = ⌈(Y − iYTilda)/yTilda⌉, sub-GEMM (iYTilda, iXTilda) has gemmK = (K/G)·yDotSlice·xDotSlice
in (k, ydot, xdot) order and gemmN = N·hTildaSlice·wTildaSlice in (n, htilda, wtilda) order, and
multiplies

* the filter at y = ydot·yTilda + iYTilda,
* dy at ho = htilda − ydot·(dilationH / gcd) (zero outside [0, Ho)),

into dx at hi = iYTilda·dilationH + htilda·strideH − padH_left (dropped outside [0, Hi)).
Pixels of dx that no sub-GEMM writes are +0 (the zero-init kernel).

**Zero padding**: an input position outside the tensor reads +0.0 (fp16 0x0000); the product
stays in the gemmK sequence, as the kernel multiplies it.

**Layouts and tensor shapes.** A layout is a string of dimension letters in memory order,
outermost first: input over {n, g, c, h, w}, filter over {g, k, c, y, x}, output over
{n, g, k, h, w}. A 5-letter layout gives letter sizes g = G, c = C/G, k = K/G (input and output
h, w are H, W and Ho, Wo; filter y, x are Y, X). A 4-letter layout gets its g as miopen-gen
did in 2022 (``correctParameters``): nchw → ngchw, nhwc → nhwgc, nkhw → ngkhw, nhwk → nhwgk, and
any other layout L → gL (kcyx → gkcyx, kyxc → gkyxc, yxck → gyxck, chwn → gchwn). An array for a
4-letter layout has the shape of its letters with the g folded into the channel letter it
precedes (input c = C, output k = K, filter k = K; the filter's c is always C/G), e.g.
kcyx → (K, C/G, Y, X), nhwc → (N, H, W, C), chwn → (C, H, W, N). Where the rule puts g outermost
but not next to a channel letter (yxck, hwcn, … with G > 1) no 4-D shape describes the memory, and
the tensor's shape is the 5-D one of the normalised layout (:meth:`ConvProblem.tensor_shape`).
Every function also takes the normalised layout's 5-D shape, or flat 1-D arrays of the right size
in memory order. Results come back in :meth:`ConvProblem.tensor_shape` of the written tensor.

Public API: :class:`ConvProblem`, :func:`normalize_layout`, :func:`sub_gemms`, :func:`gemm_sizes`,
:class:`ConvGemm` (gathered operands per group, sub-GEMM and gemmN chunk, for reuse; its
:meth:`ConvGemm.compute` runs many kernel models in one pass over them), :class:`ConvArithmetic`
(what one model needs, with its hooks), :class:`Step` (a pass of :meth:`ConvGemm.execute`'s
loop), :func:`bwd_weight_taps` (the in-bounds products of each filter tap),
:func:`gemm_operands`, :func:`conv`.

Modules: :mod:`~emu.conv.layout` (layout letters, tensors as flat bits),
:mod:`~emu.conv.geometry` (the problem, its sub-GEMMs, the bwd-data tilda axes),
:mod:`~emu.conv.indexing` (where A, B and C elements live; in-bounds taps; tile numbers),
:mod:`~emu.conv.kernels` (the numba gather and scatter kernels), :mod:`~emu.conv.operands`
(:class:`~emu.conv.operands.ConvOperands`: gather A and B, scatter C), and
:mod:`~emu.conv.executor` (the one loop over sub-GEMMs, groups and chunks, and the passes in it).
"""

from __future__ import annotations

from .executor import DECODED_A_BYTES, INBOUNDS_B_BYTES, ConvArithmetic, ConvGemm, Step, conv, order_view
from .geometry import DIRECTIONS, ConvProblem, SubGemm, gemm_sizes, sub_gemms
from .geometry import TildaAxis as _TildaAxis  # noqa: F401  (the name tests patch)
from .indexing import bwd_weight_taps
from .layout import normalize_layout
from .operands import CHUNK_BYTES, ConvOperands, gemm_operands

__all__ = [
    "DIRECTIONS",
    "ConvProblem",
    "SubGemm",
    "ConvOperands",
    "ConvGemm",
    "ConvArithmetic",
    "Step",
    "order_view",
    "bwd_weight_taps",
    "normalize_layout",
    "sub_gemms",
    "gemm_sizes",
    "gemm_operands",
    "conv",
    "CHUNK_BYTES",
    "DECODED_A_BYTES",
    "INBOUNDS_B_BYTES",
]
