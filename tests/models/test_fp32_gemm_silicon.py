"""fp32 and TF32 GEMMs captured on an NVIDIA H200 (PyTorch 2.11, CUDA 13.0; session 16),
reproduced bit for bit by emu with the accumulation schedule found for each cuBLAS kernel family.

Per family (kernel names from the profiler, in each capture's ``kernels``):

* ``cutlass_80_simt_sgemm_*`` + ``splitKreduce_kernel``: K cut into splits of ⌈tiles/splits⌉
  k tiles of **4** (the last split shorter), each split a k-ascending fp32 FMA chain from +0,
  the partials added onto +0 in split order, then RN32(alpha·acc + RN32(beta·C)) (C: addmm's
  C, linear's bias). The split count is the shape's (searched from the output).
* ``sm80_xmma_gemm_f32f32_f32f32_f32_*ffma*`` (no split-K kernel): one k-ascending fp32 FMA
  chain per output, also on captures made with ``allow_tf32`` (CUDA cores: no tf32 rounding).
* the CUDA-core kernels cuBLAS takes for small M, N or K, :func:`emu.lanes.lane_gemm` (each
  lane a k-ascending fp32 FMA chain from +0, the lanes then added): ``internal::gemvx::kernel``
  32 lanes (fewer for short K), k in contiguous chunks (short K) or strided (long K), a halving
  (shuffle-down) tree; ``gemmSN_TN_kernel`` 16 strided lanes added in lane order;
  ``gemmSN_NN_kernel`` two contiguous halves; ``gemvNSP_kernel`` 16 or 32 lanes of 4
  consecutive k, halving tree; ``gemv2T_kernel_val`` 16 strided lanes in lane order; the xmma
  ffma GEMM with its ``split_k`` kernel: 8-wide k tiles dealt round-robin to the splits, the
  partials added in split order.
* ``cutlass_80_tensorop_s1688gemm_*`` (TF32) + ``splitKreduce_kernel``: operands rounded to tf32
  to nearest even, the ``h100`` unit with tf32 operands, 32-wide k tiles split ⌈tiles/splits⌉,
  partials added in fp32 in split order.

The operands are drawn again from each capture's seed (``validation.capture_torch.complete``,
checked against the sha256 recorded on the GPU machine); the captures are the project's test
data (``tests/data/captures/h200_s16`` and the sweep tarball ``sweep_h200_s16.tar.gz``).
"""

import tarfile
from pathlib import Path

import numpy as np
import pytest

from emu.lanes import lane_gemm
from emu.schedule import Schedule
from emu.simt import fma_gemm

DATA = Path(__file__).resolve().parents[1] / "data" / "captures"
S16 = DATA / "h200_s16"
SWEEP = DATA / "sweep_h200_s16.tar.gz"


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    if not SWEEP.exists():
        pytest.skip(f"{SWEEP.name} is absent")
    out = tmp_path_factory.mktemp("sweep")
    with tarfile.open(SWEEP) as tar:
        members = [
            m
            for m in tar.getmembers()
            if m.isfile() and m.name.endswith(".npz") and ("_f32" in m.name or "_tf32" in m.name)
        ]
        members = [m for m in members if any(op in m.name for op in ("_mm_", "_bmm_", "_linear_", "_addmm_"))]
        tar.extractall(out, members=members, filter="data")
    return out / "sweep_small"


def _load(path: Path) -> dict:
    """The capture's GEMMs as (A (M, K), B (K, N), out (M, N)) float32 triples, with C (or the
    bias, as a (1, N) row), alpha and beta."""
    from validation.capture_torch import complete

    if not path.exists():
        pytest.skip(f"capture {path.name} is absent")
    d = complete(dict(np.load(path)))
    op, out = str(d["op"]), d["out"]
    C = None
    if op in ("mm", "addmm"):
        triples = [(d["A"], d["B"], out)]
        C = d.get("C")
    elif op == "bmm":
        triples = list(zip(d["A"], d["B"], out))
    elif op == "linear":
        x = d["input"]
        triples = [(x.reshape(-1, x.shape[-1]), np.ascontiguousarray(d["weight"].T), out.reshape(-1, out.shape[-1]))]
        if "bias" in d:
            C = d["bias"].reshape(1, -1)
    else:
        raise AssertionError(f"{path.name}: not a GEMM ({op})")
    alpha = float(d["alpha"]) if "alpha" in d else 1.0
    beta = float(d["beta"]) if "beta" in d else 1.0
    kernels = [str(k) for k in d["kernels"]]
    return dict(triples=triples, C=C, alpha=alpha, beta=beta, kernels=kernels, tf32=bool(d["allow_tf32"]))


def _same_bits(got, want) -> int:
    """How many outputs differ in their bit patterns."""
    return int((np.asarray(got, np.float32).view(np.uint32) != np.asarray(want, np.float32).view(np.uint32)).sum())


def _simt_splitk(splits: int, alpha: float, beta: float) -> Schedule:
    """cuBLAS's SIMT sgemm + splitKreduce: ⌈tiles/splits⌉ k tiles of 4 per split, partials onto
    +0 in split order, the LinearCombination epilogue."""
    if splits == 1:
        return Schedule(k_tile=4, c_entry="epilogue", alpha=alpha, beta=beta)
    return Schedule(
        k_tile=4, splits=splits, split_rule="ceil", reduction="workspace", c_entry="epilogue", alpha=alpha, beta=beta
    )


# (capture, splits): h200_s16 names, then sweep names (s…)
SIMT = [
    ("t_mm_33x1024x17_f32", 16),
    ("t_mm_100x3000x70_f32", 33),
    ("t_linear_2x50x768x64_f32", 6),  # bias (1, N) as C, beta = 1
    # alpha = 0.5, beta = 2: powers of two, so alpha·acc and beta·C are exact and this capture
    # cannot tell one FMA from separate roundings in the epilogue (all three give its bits)
    ("t_addmm_128x1024x96_ab_f32", 16),
    ("s0164_mm_21x37x94_f32", 4),  # K = 37: splits of 12, 12, 12, 1 (tiles of 8 would give 16, 16, 5)
    ("s0992_mm_74x6x69_f32", 2),  # K = 6: 4 + 2
    ("s0185_mm_10x139x10_f32", 35),  # 34 splits of 4, the last 3
    ("s0090_mm_24x18x66_f32", 3),  # 8 + 8 + 2
    ("s0995_linear_3x331x315_f32", 28),  # 27 splits of 12, the last 7
]


@pytest.mark.parametrize("name, splits", SIMT)
def test_simt_sgemm_splitk(name, splits, sweep_dir):
    path = (S16 if name.startswith("t_") else sweep_dir) / f"{name}.npz"
    cap = _load(path)
    assert any("simt_sgemm" in k for k in cap["kernels"]) and any("splitKreduce" in k for k in cap["kernels"])
    ((A, B, out),) = cap["triples"]
    got = fma_gemm(A, B, cap["C"], _simt_splitk(splits, cap["alpha"], cap["beta"]))
    assert _same_bits(got, out) == 0
    if splits > 1:  # the splits show in the bits: one chain is not the kernel's order
        assert _same_bits(fma_gemm(A, B, cap["C"], _simt_splitk(1, cap["alpha"], cap["beta"])), out) > 0


XMMA_FFMA = [
    "s0569_bmm_6x3x67x42_f32",
    "s1012_bmm_3x362x13x5_f32",
    "s0146_bmm_6x190x7x3_f32",
    "s0272_bmm_6x13x16x40_tf32",
]


@pytest.mark.parametrize("name", XMMA_FFMA)
def test_xmma_ffma_one_chain(name, sweep_dir):
    """sm80_xmma_gemm_f32f32_f32f32_f32_*ffma*: one fp32 FMA chain per output, also where
    allow_tf32 was set (the tf32 capture s0272: fp32 arithmetic, no tf32 rounding)."""
    cap = _load(sweep_dir / f"{name}.npz")
    assert any("ffma" in k and "split_k" not in k for k in cap["kernels"])
    for A, B, out in cap["triples"]:
        assert (
            _same_bits(
                fma_gemm(A, B, cap["C"], Schedule(c_entry="epilogue", alpha=cap["alpha"], beta=cap["beta"])), out
            )
            == 0
        )


# (capture, kernel, lanes, layout, grain, reduction): the CUDA-core kernels' lane schedules
LANES = [
    # internal::gemvx::kernel, halving (shuffle-down) tree
    ("t_mm_1x4096x512_f32", "gemvx", 32, "strided", 1, "halving"),  # torch M = 1: lane j takes k ≡ j (mod 32)
    ("t_mm_1x4096x512_tf32", "gemvx", 32, "strided", 1, "halving"),  # allow_tf32: the same fp32 arithmetic
    ("t_mm_256x256x1_f32", "gemvx", 32, "chunked", 1, "halving"),  # torch N = 1: lane j takes k in [8j, 8j + 8)
    ("t_mm_256x256x1_tf32", "gemvx", 32, "chunked", 1, "halving"),
    ("s0415_mm_4x200x1_f32", "gemvx", 32, "chunked", 1, "halving"),  # chunks of 7
    ("s0394_linear_1x909x173_f32", "gemvx", 32, "strided", 1, "halving"),
    ("s0068_bmm_8x5x2793x1_tf32", "gemvx", 32, "strided", 1, "halving"),
    ("s0507_bmm_6x13x70x1_tf32", "gemvx", 8, "chunked", 1, "halving"),  # chunks of 9
    ("s0410_mm_1x66x32_f32", "gemvx", 2, "chunked", 1, "halving"),  # two halves of 33
    ("s0453_mm_524x12x1_tf32", "gemvx", 2, "chunked", 1, "halving"),
    # gemmSN_TN_kernel<float, 128, 16, …>: 16 strided lanes added in lane order
    ("s0247_linear_5x88x4_f32", "gemmSN_TN", 16, "strided", 1, "sequential"),
    ("s0845_linear_11x118x5_f32", "gemmSN_TN", 16, "strided", 1, "sequential"),
    ("s0382_linear_4x37x94_f32", "gemmSN_TN", 16, "strided", 1, "sequential"),
    # gemmSN_NN_kernel<float, 128, 2, …>: two contiguous halves
    ("s0566_mm_10x34x12_f32", "gemmSN_NN", 2, "chunked", 1, "sequential"),
    ("s0818_mm_4x17x5_f32", "gemmSN_NN", 2, "chunked", 1, "sequential"),
    # gemvNSP_kernel<…, 1, 16 or 32, 4, …>: lanes of 4 consecutive k, halving tree
    ("s0266_bmm_5x1x53x268_f32", "gemvNSP", 16, "strided", 4, "halving"),
    ("s0546_bmm_7x1x111x115_tf32", "gemvNSP", 32, "strided", 4, "halving"),
    # gemv2T_kernel_val<…, 128, 16, …>: 16 strided lanes added in lane order
    ("s0286_linear_5578x509x1_f32", "gemv2T", 16, "strided", 1, "sequential"),
    ("s0341_mm_7779x112x1_tf32", "gemv2T", 16, "strided", 1, "sequential"),
    ("s0691_linear_2179x256x1_tf32", "gemv2T", 16, "strided", 1, "sequential"),  # bias added by an elementwise kernel
    # sm80_xmma_gemm_…ffma… + …execute_split_k_kernel: 8-wide k tiles dealt round-robin to the splits
    ("s0258_linear_27x570x238_f32", "split_k", 8, "strided", 8, "sequential"),
    ("s0051_linear_2975x92x2_f32", "split_k", 5, "strided", 8, "sequential"),
]


@pytest.mark.parametrize("name, kernel, lanes, layout, grain, reduction", LANES)
def test_cuda_core_lanes(name, kernel, lanes, layout, grain, reduction, sweep_dir):
    path = (S16 if name.startswith("t_") else sweep_dir) / f"{name}.npz"
    cap = _load(path)
    assert any(kernel in k for k in cap["kernels"])
    kw = dict(alpha=cap["alpha"], beta=cap["beta"])
    for A, B, out in cap["triples"]:
        got = lane_gemm(A, B, cap["C"], lanes=lanes, grain=grain, layout=layout, reduction=reduction, **kw)
        assert _same_bits(got, out) == 0
    # one k-ascending chain is not the kernel's order
    A, B, out = cap["triples"][0]
    assert _same_bits(lane_gemm(A, B, cap["C"], lanes=1, **kw), out) > 0


def _tf32_splitk(splits: int, alpha: float, beta: float) -> Schedule:
    if splits == 1:
        return Schedule(k_tile=32, c_entry="epilogue", alpha=alpha, beta=beta)
    return Schedule(
        k_tile=32, splits=splits, split_rule="ceil", reduction="sequential", c_entry="epilogue", alpha=alpha, beta=beta
    )


TF32_S1688 = [("t_mm_33x1024x17_tf32", 32)]  # found by `fp16emu identify` (cutlass-s1688 family)


@pytest.mark.parametrize("name, splits", TF32_S1688)
def test_tf32_s1688_splitk(name, splits):
    import models
    from emu.gemm import gemm
    from emu.operands import round_to_tf32

    cap = _load(S16 / f"{name}.npz")
    assert cap["tf32"] and any("s1688gemm" in k for k in cap["kernels"])
    unit = models.unit("h100", input="tf32")
    ((A, B, out),) = cap["triples"]
    got = gemm(round_to_tf32(A), round_to_tf32(B), cap["C"], unit, _tf32_splitk(splits, cap["alpha"], cap["beta"]))
    assert _same_bits(got, out) == 0


def test_tf32_sm90_xmma_one_chain():
    """sm90_xmma_gemm_f32f32_tf32f32_f32 (bmm): operands rounded to tf32 (RNE), one k-ascending
    chain of the h100 unit with tf32 operands per output (found by ``fp16emu identify``)."""
    import models
    from emu.gemm import gemm
    from emu.operands import round_to_tf32

    cap = _load(S16 / "t_bmm_3x64x2048x48_tf32.npz")
    assert cap["tf32"] and any("sm90_xmma_gemm_f32f32_tf32f32" in k for k in cap["kernels"])
    unit = models.unit("h100", input="tf32")
    for A, B, out in cap["triples"]:
        assert _same_bits(gemm(round_to_tf32(A), round_to_tf32(B), None, unit, Schedule()), out) == 0
    # the raw fp32 bits cut by the unit (no RNE first) are not the kernel's
    A, B, out = cap["triples"][0]
    assert _same_bits(gemm(A, B, None, unit, Schedule()), out) > 0


# cuBLAS dot_kernel<float, 128, …> + reduce_1Block_kernel<float, 128, 7> (M or N = 1): (capture,
# registers per thread V, blocks NB); the pair was answered "not modelled" in session 21
DOT = [
    ("s0029_mm_1x2274x8_tf32", 1, 18),
    ("s0034_mm_1x1226x6_f32", 1, 10),
    ("s0268_mm_1x2484x4_f32", 1, 20),
    ("s0738_mm_1x1466x35_tf32", 1, 12),
    ("s0774_linear_1x709x60_f32", 2, 3),  # bias in the epilogue
    ("s0866_mm_25x2751x1_f32", 2, 11),
    ("s0932_mm_1x7748x6_tf32", 1, 31),  # 61 tiles: 31 blocks of 2 (FMA: multiply-then-add differs)
    ("s1035_mm_7x860x1_f32", 2, 4),
    ("s1060_mm_1x1069x4_tf32", 1, 9),
]


def _dot(A, B, C, v: int, blocks: int, program=None):
    """emu's dot_kernel order: k in tiles of 128·v dealt to the blocks in turn, a lane (an FMA
    chain from +0) per position in the tile, reduced by the kernels' program."""
    from validation.captures.gemms import lane_layout
    from validation.captures.orders import dot_program

    lanes, tile = blocks * 128 * v, 128 * v
    seq, bounds = lane_layout(A.shape[1], "tiled", lanes, tile)  # k lane by lane, −1 a lane's +0
    A_seq = np.where(seq < 0, 0, A[:, np.maximum(seq, 0)]).astype(np.float32)
    B_seq = np.where((seq < 0)[:, None], 0, B[np.maximum(seq, 0)]).astype(np.float32)
    sch = Schedule(
        splits=lanes, split_bounds=tuple(bounds), split_rule="ceil", reduction="program",
        reduction_program=program or dot_program(v), c_entry="epilogue" if C is not None else "chain",
    )  # fmt: skip
    return fma_gemm(A_seq, B_seq, C, sch)


@pytest.mark.parametrize("name, v, blocks", DOT)
def test_cublas_dot_kernel(name, v, blocks, sweep_dir):
    """Each thread's v FMA chains added onto +0, the block's 128 threads by a count-down butterfly,
    the blocks' partials by reduce_1Block_kernel's strided sums, two folds and two in-order sums
    (facebookexperimental/triton bitequiv, kernels.py ``_gemv_block_dot``/``_gemv_block_reduce``)."""
    cap = _load(sweep_dir / f"{name}.npz")
    assert any("dot_kernel<float, 128" in k for k in cap["kernels"])
    assert any("reduce_1Block_kernel<float, 128, 7" in k for k in cap["kernels"])
    (A, B, out), C = cap["triples"][0], cap["C"]
    A, B = (x.view(np.float32) if x.dtype == np.uint32 else x for x in (A, B))
    assert _same_bits(_dot(A, B, C, v, blocks), out) == 0
    from validation.captures.orders import dot_blocks

    assert dot_blocks(A.shape[1], v) == blocks  # the tiles dealt evenly to at most 32 blocks
    # the one-block reduce matters: a plain halving of the blocks' partials (padded to a power of
    # two) differs somewhere in these captures for the larger block counts
    if blocks > 8:
        halving = (("chunks", v),) + tuple(("fold", 1 << e) for e in range(7, 0, -1))
        halving += (("strided", 1 << (blocks - 1).bit_length()),) + tuple(
            ("fold", 1 << e) for e in range((blocks - 1).bit_length(), 0, -1)
        )
        assert _same_bits(_dot(A, B, C, v, blocks, halving), out) > 0
