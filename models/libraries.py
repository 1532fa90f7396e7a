"""Named library schedules: how cuBLAS, cuDNN, CUTLASS, Triton, hipBLASLt and MIOpen kernels walk
gemmK, as families of :class:`emu.schedule.Schedule` the capture search tries first.

A kernel name never proves a schedule: the same ``torch.mm`` call took other split counts on an
H100 than on an H200 under the same kernel name. So each entry here names a *family* (unit, k
tile, split rule, reduction, instruction K, gemmK orders) whose free parameters (the split count
above all) the search finds from the output; the kernel names only say which family to try first.

``checked`` says what the family rests on: an NVIDIA H200 capture that it reproduced bit for bit
(fp16emu's library captures: operands, outputs and kernel names, PyTorch 2.11, CUDA 13.0, cuDNN
9.19), or a library's public source alone ("from source, not checked on silicon").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "LibrarySchedule",
    "LIBRARY_SCHEDULES",
    "AMD_UNITS",
    "channel_tile_from_name",
    "tf32_roundings",
    "TF32_TIES_AWAY",
    "TF32_RAW_BITS",
    "cutlass_splitk_grain",
    "from_source",
    "is_amd",
    "splitk_merges",
    "CUDNN_WINOGRAD",
    "MODELLED_WINOGRAD",
    "NOT_MODELLED",
    "UNRESOLVED",
    "compute_kernels",
    "fp32_cuda_core",
    "k_tile_from_name",
    "kernel_family",
    "matching",
    "not_modelled",
    "not_modelled_family",
    "unit_from_gpu",
]

_FROM_SOURCE = "from source, not checked on silicon"
_H200 = "an NVIDIA H200 capture (PyTorch 2.11.0+cu130, cuDNN 9.19), every output bit reproduced"
#: a public peer's cuBLAS orders, measured on H100 and B200 silicon (a Triton GEMM made to match
#: cuBLAS bit for bit), read from its source
_BITEQUIV = "github.com/facebookexperimental/triton @ db4666f22c1f8b206584c3f06e3b4a0ff035989e, bitequiv/cublas_match/"
_PEER = (
    "a public peer's H100 and B200 measurements (facebookexperimental/triton bitequiv: a Triton GEMM matching "
    "cuBLAS bit for bit on 99.9 % of 100,692 random shapes), read from its source"
)
_GSU_PY = (
    "github.com/ROCm/rocm-libraries @ 27f5a815813defca09354c20be6fc34abaa78627, "
    "projects/hipblaslt/tensilelite/Tensile/Components/GSU.py"
)
_STREAMK_PY = (
    "github.com/ROCm/rocm-libraries @ dbcbc2878a57812387d7f8cb637f0aedd6e49488, "
    "projects/hipblaslt/tensilelite/Tensile/Components/StreamK.py"
)


@dataclass(frozen=True)
class LibrarySchedule:
    """A family of schedules one library's kernels use.

    ``pattern`` (a regex) matches the kernel names that select it; ``ops`` the capture ops it
    serves; ``unit`` is ``"matrix"`` (the GPU's matrix unit) or ``"fma32"`` (plain fp32 FMA, the
    non-tensor-core kernels); ``k_tiles`` the k-tile widths its splits are made of (empty: it
    does not split K); ``split_rule`` and ``reduction`` as :class:`emu.schedule.Schedule`;
    ``instruction_k`` products fused per instruction where narrower than the unit's group;
    ``k_orders`` the convolution gemmK orders (``"rsc"`` …, with ``channel_blocks`` > 0 for a
    blocked channel loop, ``flip`` for a rotated filter)."""

    name: str
    library: str
    pattern: str
    ops: tuple[str, ...]
    unit: str = "matrix"
    k_tiles: tuple[int, ...] = ()
    split_rule: str = "ceil"
    reduction: str = "sequential"
    instruction_k: int = 0
    k_orders: tuple[str, ...] = ()
    channel_blocks: tuple[int, ...] = (0,)
    flip: tuple[bool, ...] = (False,)
    checked: str = _FROM_SOURCE
    source: str = ""

    def matches(self, kernels) -> bool:
        return any(re.search(self.pattern, k) for k in kernels)


GEMM_OPS = ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear")

LIBRARY_SCHEDULES: tuple[LibrarySchedule, ...] = (
    LibrarySchedule(
        "cublas-nvjet-splitk",
        "cuBLAS",
        r"nvjet_sm\d+_\w*splitK",
        GEMM_OPS + ("conv2d", "conv2d_bwd_data", "conv2d_bwd_weight"),
        k_tiles=(64,),
        split_rule="ceil",
        reduction="sequential",
        checked=_H200,
        source="cuBLASLt split-K with splitKreduce_kernel (docs.nvidia.com/cuda/cublas, cublasLtMatmul); "
        "64-wide k tiles, ⌈tiles/splits⌉ per split, fp32 sum in split order measured on an H200",
    ),
    LibrarySchedule(
        "cublas-nvjet",
        "cuBLAS",
        r"nvjet_sm\d+_",
        GEMM_OPS + ("conv2d", "conv2d_bwd_data", "conv2d_bwd_weight"),
        checked=_H200,
        source="cuBLAS nvjet kernels without split-K: one k-ascending chain of the matrix unit (H200 capture)",
    ),
    LibrarySchedule(
        "cutlass-simt-sgemm",
        "cuBLAS (CUTLASS)",
        r"simt_sgemm|xmma_gemm_f32f32_f32f32\w*ffma",
        GEMM_OPS + ("conv2d", "conv2d_bwd_data", "conv2d_bwd_weight"),
        unit="fma32",
        k_tiles=(4, 8),
        split_rule="ceil",
        reduction="workspace",
        checked=_H200,
        source="CUTLASS SIMT sgemm (include/cutlass/gemm/thread/mma_sm50.h, one FFMA chain per output, k "
        "ascending) with GemmSplitKParallel + ReduceSplitK (include/cutlass/reduction/kernel/reduce_split_k.h): "
        "k tiles of 4 (H200: K = 37 in 4 splits is 12, 12, 12, 1) or 8 (the 8 of _8x5), ⌈tiles/splits⌉ per split, partials added onto +0 in split order "
        "(cuBLAS splitKreduce_kernel), then RN(alpha·acc + beta·C) (H200 captures: t_mm_33x1024x17_f32 is "
        "16 splits of 64)",
    ),
    LibrarySchedule(
        "cublas-gemv",
        "cuBLAS",
        r"gemv",
        GEMM_OPS,
        unit="fma32",
        k_tiles=(32,),
        split_rule="strided",
        reduction="halving",
        checked=_H200,
        source="cuBLAS gemvx kernels (M = 1): 32 lanes, lane t an fp32 FMA chain over k = t, t + 32, …, "
        "then a warp-shuffle (halving) tree (H200 captures)",
    ),
    LibrarySchedule(
        "cutlass-wmma-splitk",
        "cuBLAS (CUTLASS)",
        r"cutlass_\d+_wmma_tensorop_\w*s161616gemm",
        GEMM_OPS + ("conv2d", "conv2d_bwd_data", "conv2d_bwd_weight"),
        k_tiles=(128, 64, 32),
        split_rule="ceil",
        reduction="sequential",
        checked=_H200,
        source="CUTLASS 2.x GemmSplitKParallel + ReduceSplitK (github.com/NVIDIA/cutlass, "
        "include/cutlass/gemm/device/gemm_splitk_parallel.h); the k tile is the threadblock K of the name",
    ),
    LibrarySchedule(
        "cutlass-s1688",
        "cuBLAS (CUTLASS)",
        r"s1688gemm",
        GEMM_OPS + ("conv2d", "conv2d_bwd_data", "conv2d_bwd_weight"),
        k_tiles=(32, 64, 128),
        instruction_k=8,
        checked=_H200 + " (TF32: operands rounded to tf32 to nearest even, 32-wide k tiles, split in order)",
        source="CUTLASS tensorop s1688gemm: mma.sync m16n8k8 (github.com/NVIDIA/cutlass, "
        "include/cutlass/arch/mma_sm80.h); whether sm_90 fuses 8 or 16 products is tried both ways",
    ),
    LibrarySchedule(
        "cudnn-cutlass-fprop",
        "cuDNN (CUTLASS)",
        r"s16816fprop|xmma_fprop_implicit_gemm",
        ("conv2d",),
        k_orders=("rsc", "crs"),
        channel_blocks=(0, 64, 32, 128, 16, 8),
        checked=_H200,
        source="CUTLASS implicit-GEMM fprop (docs/implicit_gemm_convolution.md): gemmK (r, s, c), "
        "channels loaded in blocks of the threadblock K for the xmma kernels (H200 captures)",
    ),
    LibrarySchedule(
        "cudnn-cutlass-dgrad",
        "cuDNN (CUTLASS)",
        r"s16816dgrad|xmma_dgrad_implicit_gemm",
        ("conv2d_bwd_data",),
        k_orders=("rsk", "krs"),
        channel_blocks=(0, 64, 32, 128, 16, 8),
        flip=(False, True),
        checked=_H200,
        source="CUTLASS implicit-GEMM dgrad (unity and strided): gemmK (r, s, k), filter taps ascending or "
        "rotated (H200 captures)",
    ),
    LibrarySchedule(
        "cudnn-sm90-wgrad-segment-k",
        "cuDNN (xmma)",
        r"sm90_xmma_wgrad\w*segment_k_on",
        ("conv2d_bwd_weight",),
        k_tiles=(32, 64, 128),
        split_rule="ceil",
        reduction="bisection",
        k_orders=("npq",),
        checked=_H200 + " (TF32, 147,456 outputs: the raw fp32 bits reach the unit; 7 segments of 28 k tiles)",
        source="cuDNN's Hopper weight gradient with segment-K (sm90_xmma_wgrad_indexed_…_segment_k_on, after "
        "init_device_workspace_kernel): gemmK (n, p, q) cut into segments of ⌈tiles/segments⌉ k tiles of the "
        "name's width, each a chain of the unit from +0, the segments' fp32 partials added as a tree of halves "
        "(the first ⌊n/2⌋, the rest: emu reduction 'bisection'); measured on an H200, not in any public source",
    ),
    LibrarySchedule(
        "cudnn-cutlass-wgrad",
        "cuDNN (CUTLASS)",
        r"s16816wgrad|xmma_wgrad|wmma_tensorop_s161616gemm",
        ("conv2d_bwd_weight",),
        k_tiles=(32, 64, 128),
        k_orders=("npq",),
        checked=_H200,
        source="CUTLASS implicit-GEMM wgrad: gemmK (n, p, q) ascending; split-K over it where a reduce "
        "kernel follows (cudnn::cnn::reduce_wgrad_*)",
    ),
    LibrarySchedule(
        "cudnn-implicit-sgemm",
        "cuDNN",
        r"implicit_convolve_sgemm",
        ("conv2d",),
        unit="fma32",
        k_orders=("crs", "rsc"),
        checked=_H200,
        source="cuDNN IMPLICIT_GEMM (non-tensor-core): one fp32 FMA chain per output, gemmK (c, r, s) (H200 captures)",
    ),
    LibrarySchedule(
        "cudnn-convolve-common-nhwc",
        "cuDNN",
        r"convolve_common_engine_float_NHWC",
        ("conv2d",),
        unit="fma32",
        k_orders=("rsc",),
        checked=_H200,
        source="cuDNN convolve_common_engine_float_NHWC (non-tensor-core, NHWC): one fp32 FMA chain per output, "
        "gemmK (r, s, c) (H200 captures, fp32, TF32 allowed and bf16)",
    ),
    LibrarySchedule(
        "cudnn-wgrad-alg1",
        "cuDNN",
        r"wgrad_alg1_engine",
        ("conv2d_bwd_weight",),
        unit="fma32",
        k_orders=("npq",),
        source="cuDNN wgrad_alg1_engine (non-tensor-core): one fp32 FMA chain over (n, p, q) (an H200 capture "
        "too large for the test data)",
    ),
    LibrarySchedule(
        "cudnn-wgrad2d-shmem",
        "cuDNN",
        r"wgrad2d_shmem_tiling",
        ("conv2d_bwd_weight",),
        unit="fma32",
        k_tiles=(0,),  # a group of the pixel tiles per split (validation.captures.convs.shmem_tiling_layout)
        reduction="program",
        k_orders=("npq",),
        checked=_H200 + " (fp16 and bf16, 7×7 … 15×15 outputs: 1,593 captures including order probes)",
        source="cuDNN wgrad2d_shmem_tiling (non-tensor-core): the output image in 8×8 pixel tiles, thread "
        "(ρ, κ) of 8 taking rows ρ, ρ + 2, … and columns 2κ, 2κ + 1 of every tile; per image and tile row an "
        "fp32 FMA chain over (tile row, tile column, column) added to the thread's sum; the 8 sums by a "
        "count-down butterfly, ((t00 + t01) + (t12 + t13)) + ((t02 + t03) + (t10 + t11)) (order probes on "
        "an H200: two products ±2^40 among ones, every pair of positions)",
    ),
    LibrarySchedule(
        "cudnn-cutlass-wgrad-splitk",
        "cuDNN",
        r"ImplicitGemmConvolution\w*?Conv2dWgrad",
        ("conv2d_bwd_weight",),
        k_tiles=(32,),
        split_rule="strided",
        reduction="sequential",
        k_orders=("npq",),
        checked=_H200 + " (TF32 under cudnn.benchmark, 7 splits; order probes of every pair of k tiles)",
        source="cuDNN's CUTLASS weight gradient (ImplicitGemmConvolution with Conv2dWgrad iterators, "
        "GemmShape<64, 64, 32>) with a parallel split-K: gemmK (n, p, q) in k tiles of the threadblock's K dealt "
        "round-robin to the splits, each a chain of the tensor core from +0, the fp32 workspace slices added in "
        "order by CUTLASS's ReduceSplitK (github.com/NVIDIA/cutlass, include/cutlass/reduction/kernel/"
        "reduce_split_k.h; order probes on an H200)",
    ),
    LibrarySchedule(
        "cudnn-wgrad-splitk",
        "cuDNN",
        r"sm80_xmma_wgrad_implicit_gemm\w*_tilesize\d+x\d+x\d+_",
        ("conv2d_bwd_weight",),
        k_tiles=(64,),
        split_rule="strided",
        reduction="halving",
        k_orders=("npq",),
        checked=_H200 + " (fp16, 2, 3, 6, 8 and 9 splits; order probes)",
        source="cuDNN's sm80 xmma weight gradient with split-K in place (a Memset before it): gemmK (n, p, q) in "
        "k tiles of the name's width dealt round-robin to the splits, each a chain of the tensor core, the "
        "partials added one after the other in the order 0, S − 1, 1, 2, … (order probes on an H200: every pair "
        "of k tiles for 8 and 9 splits)",
    ),
    LibrarySchedule(
        "cudnn-wgrad2d",
        "cuDNN",
        r"wgrad2d_(?!shmem_tiling)",
        ("conv2d_bwd_weight",),
        unit="fma32",
        k_tiles=(32,),
        split_rule="strided",
        reduction="halving",
        k_orders=("npq",),
        checked=_H200,
        source="cuDNN wgrad2d_grouped_direct_kernel (non-tensor-core): 32 lanes, lane t an fp32 FMA chain over "
        "(n, p, q) positions t, t + 32, …, then a warp-shuffle (halving) tree (H200 captures)",
    ),
    LibrarySchedule(
        "cudnn-dgrad2d",
        "cuDNN",
        r"dgrad2d_",
        ("conv2d_bwd_data",),
        unit="fma32",
        k_tiles=(0,),  # the tile is the group's K, one tap per split (validation.captures.gemms.image_tile)
        reduction="workspace",
        k_orders=("rsk",),
        checked=_H200,
        source="cuDNN dgrad2d_alg1_1 (non-tensor-core): per filter tap in (r, s) order, an fp32 FMA chain over "
        "the output channels from +0, added onto the output's sum (H200 captures, fp32 and fp16; in some fp16 "
        "captures rows of outputs near one input row carry an extra rounding not pinned down)",
    ),
    LibrarySchedule(
        "triton-kloop",
        "Triton",
        r"^triton_|_kernel$",
        GEMM_OPS,
        checked="an NVIDIA H200 Triton GEMM (acc = tl.dot(a, b, acc), wgmma m64n64k16): one k-ascending chain",
        source="Triton's matmul tutorial loop (github.com/triton-lang/triton, python/tutorials/03-matrix-multiplication.py)",
    ),
    LibrarySchedule(
        "cublas-xmma-splitk",
        "cuBLAS",
        r"sm80_xmma_gemm_\w*_tilesize\d+x\d+x\d+_",
        GEMM_OPS,
        k_tiles=(64,),
        split_rule="strided",
        reduction="sequential",
        checked=_H200 + " (order probes, TF32 linear 262×K×10 for 4, 8 and 12 splits; 6 splits not modelled)",
        source="cuBLAS's sm80 xmma GEMM with split-K in place (a Memset before it, no reduce kernel): the name's k "
        "tiles dealt round-robin to the splits, each split a chain of the tensor core over its tiles, the partials "
        "added in split order (order probes on an H200: two products ±2^40 among ones, every pair of k tiles)",
    ),
    LibrarySchedule(
        "cublas-cutlass-splitk",
        "cuBLAS (CUTLASS)",
        r"cutlass_\d+_(wmma_)?tensorop_\w*(s1688|s16816|s161616)gemm",
        GEMM_OPS,
        k_tiles=(8, 64),
        split_rule="ceil",
        reduction="sequential",
        checked=_PEER,
        source="cuBLAS's CUTLASS split-K for unaligned shapes: K cut at a grain of 64 where 64 divides K, else 8 "
        "(CUTLASS params_universal_base.h kAlignK), ⌈tiles/splits⌉ per split, the K remainder in the last split, each "
        "split's k residue (mod the threadblock K) first; the partials merged in an fp32 workspace "
        "(splitKreduce_kernel<…, float, …>), as output-format partials (splitKreduce_kernel<…, __half, …>) or as a "
        "serial chain in the output format (no reduce kernel: GemmSplitKSerial, most unaligned split-K shapes) — "
        + _BITEQUIV
        + "plan.py (_plan_tensor_core), kernels.py (_splitk_partial_k_per_dot, _splitk_combine_modes)",
    ),
    LibrarySchedule(
        "cublas-gemmsn",
        "cuBLAS",
        r"gemmSN_|magma_sgemmEx",
        GEMM_OPS,
        unit="fma32",
        checked=_PEER,
        source="cuBLAS gemmSN_NN/TN_kernel (small M or N, CUDA cores): S threads per output, thread t over the "
        "contiguous k chunk [t·⌈K/S⌉, …), in sub-blocks of B k each summed from +0 and added in order, the S "
        "thread partials added in order; (S, B) = (2, 256) or (4, 128) on sm_90 — "
        + _BITEQUIV
        + "kernels.py (_simt_chain_gemm), arch/sm90_lt13_1.py (gemmsn_recipe); gemmSN_TN_kernel<float, 128, W, …> "
        "(H200 captures, K = 444 and 1,889): W = 16 lanes over k strided, each lane's chain restarted every 16 of "
        "its k, the totals and then the lanes added in order",
    ),
    LibrarySchedule(
        "cublas-gemv2",
        "cuBLAS",
        r"gemv2[NT]_kernel|gemvNSP_kernel|gemvx",
        GEMM_OPS,
        unit="fma32",
        checked=_PEER,
        source="cuBLAS gemv2N/gemv2T (ALGO_ID 13, M or N = 1, CUDA cores): W lanes per output, lane l over V "
        "consecutive k at t·V·W + l·V (V = min(64, ⌈K/W⌉) for the contiguous-slice options), the lane's k in "
        "chunks of CC tiles summed apart and added in order, the lanes by a count-down butterfly or in order; "
        "CUSTOM_OPTION 5 one contiguous slice per lane in chunks of 16 — "
        + _BITEQUIV
        + "kernels.py (_gemv_lane, _gemv_cslice), arch/sm90_lt13_1.py (gemv_recipe)",
    ),
    LibrarySchedule(
        "cublas-dot",
        "cuBLAS",
        r"\bdot_kernel<",
        GEMM_OPS,
        unit="fma32",
        k_tiles=(128, 256),
        reduction="program",
        checked=_H200 + " (9 of 9 fp32 and TF32-allowed sweep captures, M or N = 1)",
        source="cuBLAS dot_kernel<float, 128, …> + reduce_1Block_kernel<float, 128, 7> (ALGO_ID 14, M or N = 1): "
        "k in tiles of 128·V (V = 2 where N = 1, else 1), tile i to block i mod NB (NB = SPLITK_NUM), thread t "
        "of a block keeping V chains of fp32 FMAs (chain s over k = i·128V + t·V + s, the block's tiles ascending) "
        "added onto +0; the 128 threads by a count-down butterfly; the NB block partials by the one-block reduce "
        "(q[t] = p[t] + p[t+128] + …, q[t] += q[t+64], q[t] += q[t+32], u[j] = q[j] + q[j+4] + … + q[j+28], "
        "((u0 + u1) + u2) + u3) — " + _BITEQUIV + "kernels.py (_gemv_block_dot, _gemv_block_reduce); FMA "
        "(not multiply-then-add) and NB = min(tiles, about 32) measured on the H200 captures",
    ),
    LibrarySchedule(
        "hipblaslt-gsu",
        "hipBLASLt (Tensile)",
        r"Cijk_\w*_GSU\d|_GSU",
        GEMM_OPS,
        k_tiles=(16, 32, 64, 128, 256),
        split_rule="ceil",
        reduction="sequential",
        source="Tensile GlobalSplitU: the ⌊K/DepthU⌋ loop iterations dealt to GSU workgroups, the first "
        "(iterations mod GSU) one more (numIterPerWgRemainder), the K tail loop in the last; MultipleBuffer: each "
        "partial in its own workspace slot (GSUSumIdx), the slots added in slot order by the reduction; "
        "SingleBuffer: atomic adds, one of the orders of the atomic-add ensemble — " + _GSU_PY,
    ),
    LibrarySchedule(
        "hipblaslt-staggeru",
        "hipBLASLt (Tensile)",
        r"Cijk_\w*_SU\d",
        GEMM_OPS,
        source="Tensile StaggerU: a workgroup starts its unroll loop at a rotated iteration "
        "(StaggerUIter, halved until the loop is longer) and wraps round, the K tail loop last; fp16emu applies one "
        "rotation to every output (one workgroup's) — " + _GSU_PY + " (label_beginStaggerUIter)",
    ),
    LibrarySchedule(
        "hipblaslt-streamk",
        "hipBLASLt (Tensile)",
        r"Cijk_\w*_SK\d",
        GEMM_OPS,
        k_tiles=(32, 64, 128, 256),
        split_rule="ceil",
        reduction="sequential",
        source="Tensile Stream-K: the tiles' loop iterations dealt evenly to the workgroups, so a tile's k is cut "
        "at iteration bounds into the pieces of consecutive workgroups (StreamKLocalStart/End); the fixup adds the "
        "pieces' partials in workgroup order (the tile's first or last piece owning it) or by a pairwise tree — "
        + _STREAMK_PY,
    ),
    LibrarySchedule(
        "ck-splitk",
        "composable_kernel",
        r"DeviceGemm\w*SplitK|gemm_xdl_splitk",
        GEMM_OPS,
        k_tiles=(32, 64, 128),
        split_rule="ceil",
        reduction="workspace",
        source="composable_kernel DeviceGemmXdlSplitKCShuffle (github.com/ROCm/composable_kernel, "
        "include/ck/tensor_operation/gpu/device/impl/device_gemm_xdl_splitk_c_shuffle.hpp): K padded to KBatch · "
        "KPerBlock multiples, ⌈K/(KBatch·KPerBlock)⌉ k tiles per batch, each batch's partial atomically added to the "
        "zeroed output (in batch order here; other orders are the atomic-add ensemble)",
    ),
    LibrarySchedule(
        "miopen-igemm",
        "MIOpen (composable_kernel)",
        r"igemm|ck_|DeviceConv",
        ("conv2d", "conv2d_bwd_data", "conv2d_bwd_weight"),
        k_orders=("crs", "rsc", "rsk", "krs", "npq"),
        source="MIOpen implicit GEMM (github.com/ROCm/MIOpen, src/solver/conv_hip_implicit_gemm_*) and "
        "composable_kernel's DeviceGroupedConv*: gemmK (c, y, x) for NCHW, (y, x, c) for NHWC",
    ),
)


#: kernel families whose arithmetic is not a chain of dot products: (pattern, why)
NOT_MODELLED = (
    (
        r"winograd|Winograd",
        "a Winograd kernel computes in a transformed basis (input, filter and output transforms in fp32), "
        "not as a dot-product chain; fp16emu does not model it (Lavin & Gray, arXiv 1509.09308)",
    ),
    (r"fft|FFT", "an FFT convolution computes in the frequency domain; fp16emu does not model it"),
)


#: kernel families whose order the H200 captures have not pinned down yet (searched, but when
#: nothing reproduces the answer is "not modelled"): (pattern, family[, unless: a pattern of any
#: kernel name that exempts the capture])
UNRESOLVED = (
    (r"dgrad2d_alg1_1<", "dgrad2d_alg1_1"),
    # reproduced with ties away and the k-tile rule (142 of 147 H200 tf32 convolutions), but not
    # every shape yet (a 182-channel fprop with one output channel)
    (r"sm80_xmma_(fprop|dgrad)_implicit_gemm_tf32f32", "sm80 xmma TF32 implicit-GEMM convolution"),
    (r"s1688(fprop|dgrad)_optimized_tf32", "CUTLASS s1688 TF32 convolution"),
    # after a Memset (split-K in place) modelled by cudnn-wgrad-splitk (session 23); without, not checked
    (r"sm80_xmma_wgrad_implicit_gemm\w*tf32f32", "sm80 xmma TF32 implicit-GEMM weight gradient", r"^Memset"),
)


#: cuDNN's Winograd orders fp16emu models, by name: (pass, filter edge, the pattern of the kernels
#: that compute it), all ``winograd_nonfused`` kernels that compute in fp32 (``<float, …>``; the
#: ``<__half, __half>`` ones of cuDNN's TRUE_HALF configuration are not), measured on H200 captures:
#: the forward ``winogradForward{Data,Filter,Output}4x4`` (emu.winograd.cudnn_fprop_f4x4_3x3) and
#: ``…9x9_5x5`` (emu.winograd.cudnn_fprop_f9x9_5x5), which backward data runs too; the weight
#: gradient ``winogradWgrad{Data,Delta,Output}4x4`` (emu.winograd.cudnn_wgrad_f3x3_4x4) and
#: ``winogradForwardData9x9_5x5`` + ``winogradWgrad{Delta,Output}9x9_5x5``
#: (emu.winograd.cudnn_wgrad_f5x5_9x9). Their GEMM is an ``…ffma`` one (or cuBLAS ``gemmSN``: the
#: same chain). The pass and filter tell the orders that share a kernel apart
CUDNN_WINOGRAD = {
    "cudnn-fprop-4x4": ("fwd", 3, r"winogradForward(Data|Filter|Output)4x4<float,"),
    "cudnn-fprop-9x9": ("fwd", 5, r"winogradForward(Data|Filter|Output)9x9_5x5<float,"),
    "cudnn-dgrad-4x4": ("bwd_data", 3, r"winogradForward(Data|Filter|Output)4x4<float,"),
    "cudnn-dgrad-9x9": ("bwd_data", 5, r"winogradForward(Data|Filter|Output)9x9_5x5<float,"),
    "cudnn-wgrad-4x4": ("bwd_weight", 3, r"winogradWgrad(Data|Delta|Output)4x4<float,"),
    "cudnn-wgrad-9x9": ("bwd_weight", 5, r"winograd(ForwardData|Wgrad(Delta|Output))9x9_5x5<float,"),
}

#: every Winograd kernel of :data:`CUDNN_WINOGRAD` (a capture whose Winograd kernels all match is modelled)
MODELLED_WINOGRAD = "winograd_nonfused::(" + "|".join(dict.fromkeys(p for *_, p in CUDNN_WINOGRAD.values())) + ")"


def not_modelled(kernels) -> list[str]:
    """Why some of ``kernels`` lie outside what fp16emu models (empty when none does; a Winograd
    family whose Winograd kernels are all :data:`MODELLED_WINOGRAD` is modelled)."""
    names = [str(k) for k in kernels if not re.search(MODELLED_WINOGRAD, str(k))]  # modelled: no reason
    return [why for pattern, why in NOT_MODELLED if any(re.search(pattern, k) for k in names)]


#: names of the kernels around a GEMM or convolution that move or scale values without
#: accumulating (layout transposes, copies, fills, casts, the split-K reduction)
_HELPER_KERNELS = (
    r"nchwToNhwc|nhwcToNchw|AddPadding|tensorTransform|convertTensor|scalePackedTensor|splitKreduce|reduce_wgrad|"
    r"^Memset|^Memcpy|elementwise_kernel|vectorized_elementwise|direct_copy|fill_kernel|cast_kernel"
)


def compute_kernels(kernels) -> list[str]:
    """The kernels of a capture that accumulate (``kernels`` less the transposes, copies, fills,
    casts and split-K reductions around them), in their order."""
    return [str(k) for k in kernels if not re.search(_HELPER_KERNELS, str(k))]


def kernel_family(kernel: str) -> str:
    """A kernel's name without its namespace, template arguments and parameters
    (``void cudnn::cnn::wgrad_alg1_engine<float, …>(…)`` → ``wgrad_alg1_engine``;
    ``void cutlass::Kernel2<cutlass_80_simt_sgemm_…>(…)`` → ``cutlass_80_simt_sgemm_…``)."""
    k = str(kernel).strip()
    m = re.search(r"cutlass::Kernel2?<(\w+)>", k)
    if m:
        return m.group(1)
    if k.startswith("_Z"):  # a mangled name
        conv = re.search(
            r"ImplicitGemmConvolution\w*?GemmShapeILi(\d+)ELi(\d+)ELi(\d+)E\w*?(Conv2d(?:Fprop|Dgrad|Wgrad))", k
        )
        if conv:  # CUTLASS's implicit-GEMM convolution: the pass and the threadblock shape
            return f"cutlass ImplicitGemmConvolution {conv.group(4)} {conv.group(1)}x{conv.group(2)}x{conv.group(3)}"
        # else its longest source name: <length><identifier>, not a template literal (Li128E)
        names = [
            k[m.start(2) : m.start(2) + int(m.group(1))]
            for m in re.finditer(r"(?<![L\d][a-z])(?<!\d)(\d+)([A-Za-z_])", k)
        ]
        return max(names or [k[:60]], key=len)
    k = re.sub(r"^(void|std::enable_if<.*?>::type)\s+", "", k)
    parts = re.split(r"[<(]", k, maxsplit=1)[0].split("::")
    if parts[-1].lower() == "kernel" and len(parts) > 1:  # internal::gemvx::kernel → gemvx::kernel
        return "::".join(parts[-2:]).strip()
    return parts[-1].strip() or str(kernel)


def not_modelled_family(kernels, op: str) -> str | None:
    """The kernel family a capture ran that the search does not model, or None: ``Winograd``
    (or ``FFT``) when a kernel name says so; else, when the capture names its kernels and no
    named schedule (:data:`LIBRARY_SCHEDULES`) checked on silicon matches a kernel that
    accumulates (:func:`compute_kernels`; a family known only from source, such as cuDNN's
    ``dgrad2d_alg1``, does not count), that kernel's family (:func:`kernel_family`)."""
    names = [str(k) for k in kernels]
    if any(re.search(r"winograd|Winograd", k) for k in names):
        return "Winograd"
    if any(re.search(r"fft|FFT", k) for k in names):
        return "FFT"
    compute = compute_kernels(names)
    if not compute:
        return None
    for pattern, family, *unless in UNRESOLVED:
        if any(re.search(pattern, k) for k in compute) and not any(re.search(u, k) for u in unless for k in names):
            return family
    named = matching(compute, op)
    if any(s.checked != _FROM_SOURCE for s in named):
        return None
    # no named schedule, or only ones from source whose order is not pinned down on silicon
    return kernel_family(next((k for k in compute if not named or any(s.matches([k]) for s in named)), compute[0]))


#: CUDA-core kernels that multiply fp32 operands whole (FFMA), also where TF32 was allowed
_FP32_CUDA_CORE = (
    r"simt_sgemm|gemvx?::|gemv2?[NT]?_kernel|gemmSN|_ffma_|implicit_convolve_sgemm|convolve_common_engine_float|"
    r"wgrad2d_grouped_direct_kernel<[^>]*float, float, float>|wgrad_alg\d_engine<float|dgrad2d_alg1_1<float|"
    r"dgrad_alg\d_engine<float|winograd\w*<float|dot_kernel<float, \d+, \d+, cublasDotParams<\w+<float const>"
)
#: tensor-core kernels that multiply tf32 operands
_TF32_TENSOR_CORE = r"tf32|xf32|s1688|tensorop_s|tensorop_tf32"


def fp32_cuda_core(kernels) -> bool:
    """Whether a capture of fp32 operands ran on the CUDA cores in full fp32 (a kernel name of
    :data:`_FP32_CUDA_CORE`: SIMT sgemm, gemv, the ``ffma`` xmma kernels, cuDNN's fp32 direct
    and implicit-GEMM kernels) and no tensor-core TF32 kernel: cuBLAS and cuDNN take these even
    where TF32 is allowed, and they multiply fp32 operands whole."""
    names = [str(k) for k in kernels]
    fp32 = any(re.search(_FP32_CUDA_CORE, k) for k in names)
    return fp32 and not any(re.search(_TF32_TENSOR_CORE, k) for k in names)


def matching(kernels, op: str) -> list[LibrarySchedule]:
    """The named schedules whose pattern matches one of ``kernels`` and that serve ``op``, in the
    order of :data:`LIBRARY_SCHEDULES`."""
    kernels = [str(k) for k in kernels]
    return [s for s in LIBRARY_SCHEDULES if op in s.ops and s.matches(kernels)]


def k_tile_from_name(kernels) -> int | None:
    """The threadblock K a CUTLASS or nvjet kernel name spells (``…_32x32_128x1_…`` → 128,
    ``…_64x32_64x16_…`` → 64), or None."""
    for k in kernels:
        m = re.search(r"_(\d+)x(\d+)_(\d+)x(\d+)_", str(k))
        if m:
            return int(m.group(3))
    return None


#: cuDNN's sm80 tensor-core convolutions (xmma and CUTLASS ``s1688`` alike), which make tf32
#: operands with PTX ``cvt.rna.tf32.f32``: to nearest, ties away from zero, the only rounding
#: conversion to tf32 in code built for sm_80 (``cvt.rn.tf32.f32`` needs sm_90). A kernel may round
#: to even in software instead (CUTLASS's ``NumericConverter``): cuDNN's ``sm80_xmma_gemm…tf32``, a
#: 1×1 convolution, does. Measured on NVIDIA H200 captures (cuDNN 9.19): 21 of 22 sm80 tf32 fprop
#: and dgrad captures identical with ties away; in 14 of them ties to even differs (8 … 3,900
#: outputs; docs/silicon/h200-convolutions.md)
TF32_TIES_AWAY = r"sm80_xmma_(fprop|dgrad|wgrad)_implicit_gemm\w*tf32|cutlass_tensorop_s1688(fprop|dgrad|wgrad)\w*tf32"


#: cuDNN's Hopper weight gradients, which hand the fp32 operands' raw bits to the unit (the unit
#: ignores the low 13): measured on NVIDIA H200 captures (cuDNN 9.19), ``segment_k_off`` (s0570 of
#: the sweep) and ``segment_k_on`` (a 147,456-output weight gradient), both identical only so
TF32_RAW_BITS = r"sm90_xmma_wgrad\w*tf32"


def tf32_roundings(kernels) -> tuple[str, ...]:
    """The ways a capture's tf32 kernel may round its fp32 operands to tf32
    (:data:`emu.operands.TF32_ROUNDINGS`), the one its kernel names say first: ``"rna"`` for the
    sm80 convolutions of :data:`TF32_TIES_AWAY`, ``""`` (the raw bits, the unit dropping the low
    ones) for the sm90 weight gradients of :data:`TF32_RAW_BITS`, else ``"rne"`` (CUTLASS's
    ``NumericConverter``, cuBLAS's tf32 GEMMs, sm90 code); then the others."""
    names = [str(k) for k in kernels]
    if any(re.search(TF32_TIES_AWAY, k) for k in names):
        return ("rna", "rne", "")
    if any(re.search(TF32_RAW_BITS, k) for k in names):
        return ("", "rne", "rna")
    return ("rne", "rna", "")


def channel_tile_from_name(kernels) -> tuple[int, bool] | None:
    """(T, rotated filter) of an NHWC tensor-core convolution kernel of cuDNN: the k tile T its
    name spells (CUTLASS ``cutlass_tensorop_*_s16816fprop_optimized_64x64_32x10`` → 32, xmma
    ``…_nhwckrsc_nhwc_tilesize128x32x32`` → the third number), each filter tap's channels padded
    to a multiple of T and walked in blocks of T, (c // T, r, s, c % T); the filter rotated for
    the Hopper ``sm90_xmma_dgrad`` kernels. None for other kernels. The rule and its checks:
    NVIDIA H200 captures (146 fp16/bf16/TF32 fprop and dgrad captures reproduced with T from the
    name); CUTLASS's ``conv2d_fprop_activation_tile_access_iterator_optimized.h`` (the channel
    predicate that clears the rest of the last tile)."""
    for k in map(str, kernels):
        if "ffma" in k or not re.search(r"s16816(fprop|dgrad)|s1688(fprop|dgrad)|xmma_(fprop|dgrad)_implicit_gemm", k):
            continue
        m = re.search(r"tilesize\d+x\d+x(\d+)", k) or re.search(r"_\d+x\d+_(\d+)x\d+", k)
        if m:
            return int(m.group(1)), "sm90_xmma_dgrad" in k
    return None


_GPU_UNITS = (
    (r"\bb200\b|\bb100\b|blackwell", "b200"),
    (r"\bh100\b|\bh200\b|\bh800\b|\bgh200\b", "h100"),
    (r"\ba100\b|\ba800\b|\ba10\b|\ba30\b|\ba40\b", "a100"),
    (r"\bl40s?\b|\brtx 40|\bl4\b|\bada\b", "ada"),
    (r"\bt4\b|\brtx 20", "t4"),
    (r"\bv100\b", "v100"),
    (r"mi300|mi325", "mi300"),
    (r"mi200|mi210|mi250", "mi200"),
    (r"mi100", "mi100"),
)


#: the AMD units of :data:`_GPU_UNITS`
AMD_UNITS = ("mi100", "mi200", "mi300")


def is_amd(gpu: str) -> bool:
    """Whether a GPU name as torch reports it is an AMD Instinct one (MI100, MI200, MI300)."""
    return unit_from_gpu(gpu) in AMD_UNITS


def from_source(name: str) -> bool:
    """Whether the named schedule of :data:`LIBRARY_SCHEDULES` rests on a library's source alone
    ("from source, not checked on silicon"); False for an unknown name."""
    return any(s.name == name and s.checked == _FROM_SOURCE for s in LIBRARY_SCHEDULES)


#: CUTLASS tensor-core GEMM kernels cuBLAS takes for unaligned shapes
_CUTLASS_TENSOROP = r"cutlass_\d+_(wmma_)?tensorop_\w*(s1688|s16816|s161616)gemm"


def splitk_merges(kernels) -> tuple[str, ...]:
    """How cuBLAS's CUTLASS split-K merges its partials, from the kernel names (the peer's
    finding, facebookexperimental/triton bitequiv/cublas_match/kernels.py ``_splitk_combine_modes``):
    ``"fp32"`` where a ``splitKreduce_kernel<…, float, …>`` ran (its fourth template argument
    is the workspace type), ``"partials"`` (each partial rounded to the output format) where the
    workspace type is ``__half`` or ``__nv_bfloat16``, ``"serial"`` (the running sum kept in the
    output format, ``GemmSplitKSerial``) where a CUTLASS tensor-core kernel ran without a reduce
    kernel; all three when the names say nothing."""
    names = [str(k) for k in kernels]
    types = [m.group(1) for k in names if (m := re.search(r"splitKreduce_kernel<\s*\d+,\s*\d+,\s*\w+,\s*([\w:]+)", k))]
    if types:
        return tuple(dict.fromkeys("fp32" if t == "float" else "partials" for t in types))
    if any("splitKreduce" in k for k in names):
        return ("fp32", "partials")
    if any(re.search(_CUTLASS_TENSOROP, k) for k in names):
        return ("serial",)
    return ("fp32", "partials", "serial")


def cutlass_splitk_grain(K: int, operand_bits: int = 16) -> int:
    """The k grain at which cuBLAS's CUTLASS split-K cuts K: 64 where 64 divides K, else the
    elements of one 128-bit access, 8 of 16-bit operands and 4 of 32-bit ones (TF32 kernels read
    fp32 values): CUTLASS ``include/cutlass/gemm/kernel/params_universal_base.h`` (``kAlignK``),
    measured for 16-bit operands by facebookexperimental/triton bitequiv (``plan.py``,
    ``splitk_grains``); the 4 of TF32 on NVIDIA H200 captures (cuBLAS's
    ``cutlass_80_tensorop_s1688gemm_*`` with ``splitKreduce``: 18 of 18 mm and linear captures of a
    random-shape sweep, K = 2 … 250, none reproduced with 8)."""
    return 64 if K % 64 == 0 else 128 // operand_bits


def unit_from_gpu(gpu: str) -> str | None:
    """The fp16emu unit name for a GPU name as torch reports it (``"NVIDIA H200"`` → ``"h100"``),
    or None when the name is not one fp16emu models."""
    text = str(gpu).lower()
    for pattern, name in _GPU_UNITS:
        if re.search(pattern, text):
            return name
    return None
