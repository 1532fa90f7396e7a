"""cuDNN convolution kernels whose order is not one GEMM per output: ``dgrad2d_alg1_1``; and the
k permutation of the xmma fprop kernel without shared memory (:func:`quad_load_order`).

cuDNN's CUDA-core backward-data kernel ``cudnn::detail::dgrad2d_alg1_1<T, 0, a, b, …>`` (fp16
and fp32, with or without TF32 allowed), measured on H200 captures (cuDNN 9.19, issue 37): the
grad_output positions of each image, flattened as p·Q + q, are cut into chunks of 2^b (the
template's third number: 128 for ``<…, 6, 7, …>``); for each chunk in ascending order, every
grad_input element gets one partial: its filter taps (r, s) ascending whose grad_output position
lies in the chunk, each tap an fp32 FMA chain over the output channels k ascending from +0, the
taps' chains added in fp32 onto +0; the partial is added in fp32 to the element as stored so far
and the sum rounded to the output format (a read-modify-write of grad_input, zeroed first by
``scalePackedTensor_kernel``). Where every tap of an element lies in one chunk this is one
rounding of the tap-by-tap sum; across a chunk bound fp16 outputs carry an extra rounding
(up to hundreds of fp16 ulps where the sum cancels).
"""

from __future__ import annotations

import functools
import re

import ml_dtypes
import numpy as np

from emu.schedule import Schedule
from emu.simt import fma_gemm
from emu.winograd import (
    TransformOrder,
    cudnn_fprop_f4x4_3x3,
    cudnn_fprop_f9x9_5x5,
    cudnn_wgrad_f3x3_4x4,
    cudnn_wgrad_f5x5_9x9,
    winograd_conv2d,
)
from models.libraries import CUDNN_WINOGRAD

from .capture import PASS_OF, Capture

__all__ = [
    "CUDNN_WINOGRAD",
    "DGRAD_ALG1",
    "cudnn_winograd",
    "dgrad_alg1_chunk",
    "dgrad_alg1_output",
    "is_dgrad_alg1",
    "is_winograd_fprop",
    "is_winograd_wgrad",
    "quad_load_order",
    "quad_load_width",
    "SHMEM_TILING",
    "SHMEM_TILING_TREE",
    "shmem_tiling_layout",
    "winograd_fprop_output",
    "winograd_orders",
    "winograd_output",
    "winograd_wgrad_output",
]

#: the kernel-name pattern of cuDNN's CUDA-core backward-data kernel
DGRAD_ALG1 = r"dgrad2d_alg1_1<"


def is_dgrad_alg1(cap: Capture) -> bool:
    """Whether the capture is a backward-data convolution that ran ``dgrad2d_alg1_1``."""
    return (
        cap.conv is not None
        and PASS_OF[cap.op] == "bwd_data"
        and any(re.search(DGRAD_ALG1, str(k)) for k in cap.kernels)
    )


def dgrad_alg1_chunk(kernels) -> int:
    """Grad_output positions per chunk: 2 to the template's third number
    (``dgrad2d_alg1_1<__half, 0, 6, 7, …>`` → 128); 128 where the name does not say."""
    for k in kernels:
        m = re.search(r"dgrad2d_alg1_1<[^,>]+,\s*(\d+),\s*(\d+),\s*(\d+)", str(k))
        if m and int(m.group(3)) < 16:
            return 1 << int(m.group(3))
    return 128


def _values(cap: Capture, name: str) -> np.ndarray:
    """An operand's values as float32 (fp16/bf16 exact; fp32 and tf32-allowed captures whole:
    the kernel multiplies on the CUDA cores)."""
    b = np.asarray(cap.operands[name])
    if cap.input == "fp16":
        return b.view(np.float16).astype(np.float32)
    if cap.input == "bf16":
        return b.view(ml_dtypes.bfloat16).astype(np.float32)
    return b.view(np.float32).astype(np.float32)


def _round(x: np.ndarray, fmt: str) -> np.ndarray:
    """float32 values rounded to ``fmt`` (RNE), back as float32."""
    if fmt == "fp16":
        return x.astype(np.float16).astype(np.float32)
    if fmt == "bf16":
        return x.astype(ml_dtypes.bfloat16).astype(np.float32)
    return x


def dgrad_alg1_output(cap: Capture, chunk: int | None = None) -> np.ndarray:
    """grad_input as ``dgrad2d_alg1_1`` computes it (the module docstring), in the capture's
    output dtype (bit patterns as ``cap.out`` holds them). ``chunk``: grad_output positions per
    chunk (default :func:`dgrad_alg1_chunk` of the kernel names)."""
    s = cap.conv
    chunk = chunk or dgrad_alg1_chunk(cap.kernels)
    dy = _values(cap, "grad_output").reshape(s.N, s.K, s.P, s.Q)
    w = _values(cap, "weight").reshape(s.K, s.Cg, s.R, s.S)
    fmt = cap.out_format
    (sh, sw), (ph, pw), (dh, dw) = s.stride, s.padding, s.dilation
    hh, ww = np.meshgrid(np.arange(s.H), np.arange(s.W), indexing="ij")
    taps = []  # (r, s, valid mask (H, W), p, q, chunk id (H, W))
    for r in range(s.R):
        for t in range(s.S):
            num_p, num_q = hh + ph - r * dh, ww + pw - t * dw
            p, q = num_p // sh, num_q // sw
            ok = (num_p % sh == 0) & (num_q % sw == 0) & (p >= 0) & (p < s.P) & (q >= 0) & (q < s.Q)
            taps.append((r, t, ok, np.where(ok, p, 0), np.where(ok, q, 0), np.where(ok, (p * s.Q + q) // chunk, -1)))
    n_chunks = (s.P * s.Q + chunk - 1) // chunk
    dx = np.zeros((s.N, s.C, s.H, s.W), np.float32)
    one_chain = Schedule(output="fp32")
    for g in range(s.groups):
        ks = slice(g * s.Kg, (g + 1) * s.Kg)
        cs = slice(g * s.Cg, (g + 1) * s.Cg)
        partials = []  # per tap: (N, Cg, H, W) fp32 chains over k from +0 (0 where the tap misses)
        for r, t, ok, p, q, _ in taps:
            part = np.zeros((s.N, s.Cg, s.H, s.W), np.float32)
            if ok.any():
                A = dy[:, ks][:, :, p[ok], q[ok]].transpose(0, 2, 1).reshape(-1, s.Kg)  # (N·valid, Kg)
                res = np.asarray(fma_gemm(A, w[ks, :, r, t], None, one_chain), np.float32)
                part[:, :, ok] = res.reshape(s.N, -1, s.Cg).transpose(0, 2, 1)
            partials.append(part)
        out = np.zeros((s.N, s.Cg, s.H, s.W), np.float32)
        for c in range(n_chunks):
            acc = np.zeros_like(out)
            touched = np.zeros((s.H, s.W), bool)
            for (_, _, _, _, _, cid), part in zip(taps, partials):
                m = cid == c
                if m.any():
                    acc = np.where(m, acc + part, acc).astype(np.float32)
                    touched |= m
            out = np.where(touched, _round(out + acc, fmt), out).astype(np.float32)
        dx[:, cs] = out
    return _as_out(cap, dx)


def _as_out(cap: Capture, x: np.ndarray) -> np.ndarray:
    """float32 values rounded to the capture's output format (RNE), as ``cap.out`` holds them."""
    x = np.ascontiguousarray(x, np.float32).reshape(cap.out.shape)
    if cap.out_format == "fp16":
        return x.astype(np.float16).view(np.uint16).view(cap.out.dtype)
    if cap.out_format == "bf16":
        return x.astype(ml_dtypes.bfloat16).view(np.uint16).view(cap.out.dtype)
    return x.view(cap.out.dtype) if cap.out.dtype.itemsize == 4 else x


#: the kernel-name pattern of cuDNN's fp16/bf16 implicit-GEMM fprop kernel without shared memory
WO_SMEM_FPROP = r"xmma_fprop_implicit_gemm_indexed_wo_smem_(f16|bf16)"


def quad_load_width(kernels) -> int:
    """gemmK elements the four threads of a quad load together (32: 8 each, 16 bytes of fp16 or
    bf16) in cuDNN's ``sm80_xmma_fprop_implicit_gemm_indexed_wo_smem_{f16,bf16}…`` kernel whose A
    operand is 8-aligned (``aligna8``, or no ``aligna`` in the name) and whose k tile (the third
    ``tilesize`` number) holds at least 32; 0 for every other kernel (:func:`quad_load_order`)."""
    for k in map(str, kernels):
        if not re.search(WO_SMEM_FPROP, k):
            continue
        tile = re.search(r"tilesize\d+x\d+x(\d+)", k)
        align = re.search(r"_aligna(\d+)", k)
        if tile and int(tile.group(1)) >= 32 and (align is None or int(align.group(1)) == 8):
            return 32
    return 0


#: the kernel-name pattern of cuDNN's CUDA-core weight gradient with shared-memory tiling
SHMEM_TILING = r"wgrad2d_shmem_tiling"
#: its 8 threads' partials, in the order :func:`shmem_tiling_layout` lists them, added by a
#: count-down butterfly: (t(0,0) + t(0,1)) + (t(1,2) + t(1,3)) and (t(0,2) + t(0,3)) + (t(1,0) + t(1,1)),
#: then the two (the reduction program's steps after each thread's groups)
SHMEM_TILING_TREE = (("fold", 2), ("fold", 4), ("fold", 2))
_SHMEM_THREADS = ((0, 0), (0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (1, 0), (1, 1))


def shmem_tiling_layout(N: int, P: int, Q: int, tile: int = 8) -> tuple[np.ndarray, int, int]:
    """cuDNN ``wgrad2d_shmem_tiling``'s order of a weight gradient's gemmK (n, p, q), flattened
    as (n·P + p)·Q + q: ``(sequence, groups, width)``. The output image is cut into tiles of
    ``tile`` × ``tile`` pixels; thread (ρ, κ) of 8 takes, in every tile, the rows ρ, ρ + 2, … and
    the two columns 2κ, 2κ + 1. For each image n and tile row r ≡ ρ (mod 2) in turn the thread
    sums one group, an fp32 FMA chain over (tile row, tile column, the two columns) in that
    order, and adds it to its running sum; the 8 running sums are then added by
    :data:`SHMEM_TILING_TREE`. ``sequence`` lists the groups thread by thread (the threads in
    that tree's order), each ``width`` = 2·⌈P/tile⌉·⌈Q/tile⌉ entries padded with −1 (a +0
    product) where a pixel lies outside the image; each thread has ``groups`` = N·tile/2 of them.
    Measured on NVIDIA H200 captures (cuDNN 9.19, issue 37): order probes (every pair of
    positions of 8×8 and 7×7 images) and random fp16 and bf16 weight gradients of 7×7 … 15×15
    images, 1,593 captures identical."""
    rows, cols = -(-P // tile), -(-Q // tile)
    seq = []
    for rho, kappa in _SHMEM_THREADS:
        for n in range(N):
            for r in range(rho, tile, 2):
                for tr in range(rows):
                    for tc in range(cols):
                        for dq in range(2):
                            p, q = tr * tile + r, tc * tile + 2 * kappa + dq
                            seq.append((n * P + p) * Q + q if p < P and q < Q else -1)
    out = np.asarray(seq, np.int64)
    out.setflags(write=False)
    return out, N * tile // 2, 2 * rows * cols


def quad_load_order(K: int, width: int = 32) -> np.ndarray:
    """The gemmK positions in the order the matrix unit sums them when each thread of a quad loads
    ``width // 4`` consecutive gemmK elements straight into its ``mma.m16n8k16`` A and B fragments
    (no shared memory to reorder them): gemmK zero-padded to a multiple of ``width`` (−1 marks a
    zero product: the predicated loads of the last chunk), and each chunk taken as its
    ``width // 16`` instructions, instruction i holding elements 4i … 4i+3 of every thread's
    stretch — for width 32: (0–3, 8–11, 16–19, 24–27), then (4–7, 12–15, 20–23, 28–31).

    The fragment layout is PTX's (``mma.m16n8k16`` with .f16/.bf16 A: thread t of a quad holds k
    2t, 2t+1, 2t+8, 2t+9 of each row, docs.nvidia.com/cuda/parallel-thread-execution, "Matrix
    Fragments for mma.m16n8k16"); which gemmK element lands in which register is the kernel's,
    measured on NVIDIA H200 captures (cuDNN 9.19): the ``…wo_smem…tilesize128x32x64`` kernel with 8
    and 16 channels, 3×3 and 5×5 filters — 5 of 5 captures identical with this order, 1–8 outputs
    differ with (r, s, c) ascending, and the zero padding of the last chunk is needed (without it
    2 captures still differ)."""
    per = width // 4
    padded = -(-K // width) * width
    seq = np.concatenate([np.arange(K), np.full(padded - K, -1)])
    inst = [t * per + o for i in range(width // 16) for t in range(4) for o in range(4 * i, 4 * i + 4)]
    return seq.reshape(-1, width)[:, inst].reshape(-1)


def _plain(cap: Capture, pass_: str, r: int) -> bool:
    """Whether the capture is a convolution of the pass ``pass_`` with an r×r filter, stride 1, no
    dilation and no groups: the convolutions Winograd F(·, r×r) kernels compute."""
    s = cap.conv
    return (
        s is not None
        and PASS_OF[cap.op] == pass_
        and (s.R, s.S) == (r, r)
        and tuple(s.stride) == (1, 1)
        and tuple(s.dilation) == (1, 1)
        and s.groups == 1
    )


def winograd_orders(cap: Capture) -> list[tuple[str, np.ndarray]]:
    """The Winograd orders :mod:`emu.winograd` has for the capture, as (description, output in
    the capture's dtype): a forward 3×3 stride-1 convolution without groups or dilation by
    F(2×2, 3×3) and F(4×4, 3×3) (Lavin & Gray, arXiv:1509.09308), the transforms in fp32 unfused
    and fused, the per-position GEMM one fp32 FMA chain over the input channels (cuDNN's
    ``winograd_nonfused`` kernels run an ``…_ffma`` GEMM between its transform kernels); none
    for other passes or shapes (the weight gradient's F(3×3, 2×2) is not in :mod:`emu.winograd`).
    None of these reproduces an H200 capture of cuDNN's Winograd kernels (those are
    :func:`winograd_fprop_output`'s): they are named in the hints of a capture that model misses."""
    if not _plain(cap, "fwd", 3):
        return []
    s = cap.conv
    x = _values(cap, "input").reshape(s.N, s.C, s.H, s.W)
    w = _values(cap, "weight").reshape(s.K, s.C, s.R, s.S)
    out = []
    for tile in ("F(2x2,3x3)", "F(4x4,3x3)"):
        for fused in (False, True):
            how = TransformOrder(fused=fused)
            y = winograd_conv2d(x, w, tile, tuple(s.padding), input_order=how, filter_order=how, output_order=how)
            text = f"Winograd {tile}, transforms in fp32 {'fused' if fused else 'unfused'}, per position one FMA chain over c"
            out.append((text, _as_out(cap, y)))
    return out


def cudnn_winograd(cap: Capture) -> str:
    """The name (a key of :data:`CUDNN_WINOGRAD`) of cuDNN's Winograd order that computes the
    capture: a stride-1 convolution without dilation or groups of the order's pass and filter
    whose kernels include that order's; "" for any other capture."""
    for name, (pass_, r, pattern) in CUDNN_WINOGRAD.items():
        if _plain(cap, pass_, r) and any(re.search(pattern, str(k)) for k in cap.kernels):
            return name
    return ""


def is_winograd_fprop(cap: Capture) -> bool:
    """Whether the capture is a forward convolution that ran cuDNN's ``winogradForward…4x4``
    kernels (3×3 filter) or ``winogradForward…9x9_5x5`` (5×5), stride 1, no dilation, no groups
    (:func:`winograd_fprop_output`)."""
    return cudnn_winograd(cap).startswith("cudnn-fprop-")


def winograd_fprop_output(cap: Capture) -> np.ndarray:
    """The output as cuDNN's forward Winograd kernels and their fp32 FFMA GEMM compute it, in the
    capture's output dtype: ``winogradForward{Data,Filter,Output}4x4`` for a 3×3 filter
    (:func:`emu.winograd.cudnn_fprop_f4x4_3x3`: F(4×4, 3×3) at (0, ±1, ±1/2), the fractions in the
    output transform), ``…9x9_5x5`` for a 5×5 one (:func:`emu.winograd.cudnn_fprop_f9x9_5x5`:
    F(9×9, 5×5) at 13 points); measured on H200 captures. fp16/bf16 operands are widened exactly;
    fp32 operands are used whole."""
    return winograd_output(cap, "cudnn-fprop-9x9" if cap.conv.R == 5 else "cudnn-fprop-4x4")


def is_winograd_wgrad(cap: Capture) -> bool:
    """Whether the capture is a weight gradient that ran cuDNN's ``winogradWgrad…4x4`` kernels
    (3×3 filter) or ``winogradWgrad…9x9_5x5`` (5×5), stride 1, no dilation, no groups
    (:func:`winograd_wgrad_output`)."""
    return cudnn_winograd(cap).startswith("cudnn-wgrad-")


def winograd_wgrad_output(cap: Capture) -> np.ndarray:
    """grad_weight as cuDNN's ``winograd_nonfused`` weight-gradient kernels and their fp32 GEMM
    compute it, in the capture's output dtype: for a 3×3 filter ``winogradWgrad{Data,Delta,
    Output}4x4`` (:func:`emu.winograd.cudnn_wgrad_f3x3_4x4`: F(3×3, 4×4) at (0, ±1, ±1/2)), for a
    5×5 one ``winogradForwardData9x9_5x5`` + ``winogradWgrad{Delta,Output}9x9_5x5``
    (:func:`emu.winograd.cudnn_wgrad_f5x5_9x9`: F(5×5, 9×9) at 13 points); the transforms and the
    GEMM in fp32, the result rounded once to the output format. fp16/bf16 operands are widened
    exactly; fp32 (and TF32-allowed) operands are used whole (the kernels run on the CUDA cores)."""
    return winograd_output(cap, "cudnn-wgrad-9x9" if cap.conv.R == 5 else "cudnn-wgrad-4x4")


def winograd_output(cap: Capture, order: str) -> np.ndarray:
    """The capture's output as cuDNN's Winograd ``order`` (a key of :data:`CUDNN_WINOGRAD`)
    computes it, in the capture's output dtype. Backward data is the forward kernels' convolution
    of grad_output by the filter turned by 180° with K and C swapped, padded R − 1 − padding
    (measured: the same bits as cuDNN's WINOGRAD_NONFUSED backward data, fp32, fp16 and bf16)."""
    s = cap.conv
    pass_, r = CUDNN_WINOGRAD[order][:2]
    if pass_ == "bwd_weight":
        x = _values(cap, "input").reshape(s.N, s.C, s.H, s.W)
        dy = _values(cap, "grad_output").reshape(s.N, s.K, s.P, s.Q)
        wgrad = cudnn_wgrad_f5x5_9x9 if r == 5 else cudnn_wgrad_f3x3_4x4
        return _as_out(cap, wgrad(x, dy, tuple(s.padding)))
    if r == 5:
        fprop = cudnn_fprop_f9x9_5x5
    else:  # the kernels of fp32 tensors (<float, float>) round their output transform otherwise
        fp32_tensors = np.asarray(cap.out).dtype == np.float32
        fprop = functools.partial(cudnn_fprop_f4x4_3x3, fp32_tensors=fp32_tensors)
    w = _values(cap, "weight").reshape(s.K, s.C, r, r)
    if pass_ == "fwd":
        return _as_out(cap, fprop(_values(cap, "input").reshape(s.N, s.C, s.H, s.W), w, tuple(s.padding)))
    turned = np.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))
    dy = _values(cap, "grad_output").reshape(s.N, s.K, s.P, s.Q)
    return _as_out(cap, fprop(dy, turned, tuple(r - 1 - p for p in s.padding)))
