"""Orders read from order probes on an H200 (issue 37), judged by the H200's bits: cuDNN's
CUDA-core weight gradient ``wgrad2d_shmem_tiling`` and cuBLAS's ``gemvNSP_kernel``.

The order was read from order probes (tests/data/captures/h200_probes, README there): every
product of a reduction 1 (or 2^-14) except +2^40 at position i and −2^40 at j, so that the
output counts the ones added after i's and j's partials met. The random captures are session
16's (h200_s16) and the held-out run's (h200_holdout).
"""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from capture_data import archived, capture_or_skip, differing_bits
from recipes import capture_recipe

from validation.captures.capture import load_capture
from validation.captures.convs import SHMEM_TILING_TREE, shmem_tiling_layout
from validation.captures.format import save
from validation.captures.gemms import lane_layout, run_candidate
from validation.captures.orders import XMMA_SIX_SPLITS, round_robin_splits, xmma_splitk_candidates
from validation.captures.search import search
from validation.captures.space import cutlass_wgrad_splitk_candidates, shmem_tiling_candidates, wgrad_splitk_candidates

DATA = Path(__file__).resolve().parents[2] / "data" / "captures"


def _cap(name):
    return capture_or_skip(DATA / f"{name}.npz")


_differ = differing_bits


def test_layout_of_a_3x3_image_by_hand():
    # one 8×8 tile; thread (ρ, κ) takes rows ρ, ρ+2, … and columns 2κ, 2κ+1; (n·P + p)·Q + q
    seq, groups, width = shmem_tiling_layout(1, 3, 3)
    assert (groups, width) == (4, 2)
    per_thread = seq.reshape(8, groups * width)
    assert per_thread[0].tolist() == [0, 1, 6, 7, -1, -1, -1, -1]  # (0,0): rows 0, 2
    assert per_thread[1].tolist() == [2, -1, 8, -1, -1, -1, -1, -1]  # (0,1): column 2 only
    assert per_thread[6].tolist() == [3, 4, -1, -1, -1, -1, -1, -1]  # (1,0): row 1
    assert per_thread[7].tolist() == [5, -1, -1, -1, -1, -1, -1, -1]  # (1,1): row 1, column 2
    assert (per_thread[[2, 3, 4, 5]] == -1).all()  # (0,2), (0,3), (1,2), (1,3): columns 4 … 7, outside
    assert sorted(int(k) for k in seq if k >= 0) == list(range(9))


def test_two_tiles_each_way_interleave_inside_a_group():
    seq, groups, width = shmem_tiling_layout(2, 15, 15)
    assert (groups, width) == (8, 8)
    first_group = seq[:width].tolist()  # n 0, row 0 of both tile rows, columns 0, 1, 8, 9
    assert first_group == [0, 1, 8, 9, 120, 121, 128, 129]
    assert sorted(int(k) for k in seq if k >= 0) == list(range(2 * 15 * 15))


@pytest.mark.parametrize(
    "name",
    [
        "h200_probes/q_wgrad_n4c4k41h11r7s1p1_conti_f16_b000",  # order probes, 7×7, padding 1
        "h200_probes/p_wgrad_n2c48k20h15r3s1p1_conti_bf16_b000",  # order probes, 2×2 tiles
        "h200_s16/t_conv2d_bwd_weight_n2c48k20h15r3s1p1_conti_f16",
        "h200_s16/t_conv2d_bwd_weight_n2c48k20h15r3s1p1_chann_bf16",
        "h200_s16/t_conv2d_bwd_weight_n2c24k40h10r3s1p0_conti_f16",
        "h200_holdout/h_conv2d_bwd_weight_n1c96k8h16r5s2_conti_8",  # the held-out case, stride 2
    ],
)
def test_every_output_bit(name):
    cap = _cap(name)
    (cand,) = shmem_tiling_candidates(cap, "h100")
    assert _differ(run_candidate(cap, cand), cap.out) == 0


def test_the_probes_tell_the_thread_tree_apart():
    cap = _cap("h200_probes/q_wgrad_n4c4k41h11r7s1p1_conti_f16_b000")
    (cand,) = shmem_tiling_candidates(cap, "h100")
    groups = cand.schedule.reduction_program[0]
    assert cand.schedule.reduction_program[1:] == SHMEM_TILING_TREE
    for tree in ((("fold", 8), ("fold", 4), ("fold", 2)), (("fold", 2), ("fold", 2), ("fold", 2))):
        other = replace(cand, schedule=replace(cand.schedule, reduction_program=(groups,) + tree))
        assert _differ(run_candidate(cap, other), cap.out) > 0


def test_search_names_the_family():
    cap = _cap("h200_s16/t_conv2d_bwd_weight_n2c24k40h10r3s1p0_chann_f16")
    result = search(cap)
    assert result.answer == "identical"
    assert result.best.family == "cudnn-wgrad2d-shmem"
    assert result.searched <= 10


def test_gemvnsp_loads_96_k_per_turn():
    """cuBLAS ``gemvNSP_kernel<…, 1, 16, 4, 1024, …>`` on mm 1×163×1148 (a random draw of the
    probe session; probes showed k 96 … 99 in lane 0's chain after k 0 … 3): 24 lanes of 4
    consecutive k, the warp's 32 lanes added by the halving tree; 32 lanes of 4 differ."""
    cap = _cap("h200_probes/r_mm_1x163x1148_f32_0")
    result = search(cap)
    assert result.answer == "identical"
    assert result.best.variant.lanes == ("warp-strided", 24, 4)
    full_warp = replace(result.best, variant=replace(result.best.variant, lanes=("strided", 32, 4)))
    seq, bounds = lane_layout(163, "strided", 32, 4)
    full_warp = replace(full_warp, schedule=replace(full_warp.schedule, split_bounds=bounds))
    assert _differ(run_candidate(cap, full_warp), cap.out) > 0


def _probe(name, path=None):
    """A probe capture kept without its operands (``path``, else h200_probes/NAME.npz), with them
    built again by the probe recipe (``benchmarks/captures/probe_orders.py``; checked against the
    sha256 the GPU recorded)."""
    path = path or DATA / "h200_probes" / f"{name}.npz"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    po = capture_recipe("probe_orders")
    with np.load(path, allow_pickle=False) as z:
        return po.restore_operands({k: z[k] for k in z.files})  # ValueError where a sha256 differs


@pytest.mark.parametrize("name, splits", [("q_linear_262x3000x10_tf32_b000", 4), ("s_linear_262x8000x10_tf32_b000", 8)])
def test_xmma_split_k_adds_round_robin_splits_in_order(name, splits, tmp_path):
    """cuBLAS's sm80 xmma TF32 GEMM with split-K in place: 64-wide k tiles dealt round-robin to
    the splits, the partials added in split order (probes of every pair of k tiles)."""
    cap = load_capture(save(tmp_path / f"{name}.npz", _probe(name)))
    family = xmma_splitk_candidates(cap, "h100")
    assert any(differing_bits(run_candidate(cap, c), cap.out) == 0 for c in family if c.schedule.splits == splits)
    assert all(differing_bits(run_candidate(cap, c), cap.out) > 0 for c in family[:4] if c.schedule.splits != splits)


def test_xmma_six_splits_add_their_partials_in_the_measured_tree(tmp_path):
    """Six splits (K = 4,931 … 6,500) add their partials as ((((p0 + p3) + p5) + (p1 + p4)) + p2)
    on the H200 (every pair of k tiles probed): the family's six-split candidate reproduces the
    probe; the same splits added in split order differ."""
    cap = load_capture(save(tmp_path / "six.npz", _probe("s_linear_262x4931x10_tf32_b000")))
    (six,) = [c for c in xmma_splitk_candidates(cap, "h100") if c.schedule.splits == 6][:1]
    assert six.schedule.reduction_program == XMMA_SIX_SPLITS[1]
    assert _differ(run_candidate(cap, six), cap.out) == 0
    order, bounds = round_robin_splits(4931, 64, 6)
    in_order = replace(
        six,
        variant=replace(six.variant, k_blocks=(64, order)),
        schedule=replace(six.schedule, split_bounds=bounds, reduction="sequential", reduction_program=()),
    )
    assert _differ(run_candidate(cap, in_order), cap.out) > 0


@pytest.mark.parametrize(
    "name, splits",
    [
        ("h200_s16/t_conv2d_bwd_weight_n2c16k16h12r5s1p2_chann_f16", 2),  # 3 of 6,400 differed before
        ("h200_s16/t_conv2d_bwd_weight_n2c48k20h15r3s1p1_chann_f16", 3),  # 13 of 8,640
    ],
)
def test_xmma_weight_gradient_split_k_is_round_robin(name, splits):
    """cuDNN's sm80 xmma weight gradient after a ``Memset`` (fp16, channels_last): 64-wide k tiles
    of (n, p, q) dealt round-robin to the splits (probes: tiles 0, 3, 6 in one split of three),
    the partials as (p0 + p2) + p1 for three."""
    cap = _cap(name)
    family = [c for c in wgrad_splitk_candidates(cap, "h100") if c.schedule.splits == splits]
    best = next(c for c in family if differing_bits(run_candidate(cap, c), cap.out) == 0)
    assert best.family == "cudnn-wgrad-splitk"
    assert best.variant.k_blocks[0] == 64 and best.variant.k_blocks[1][:2] == (0, splits)
    if splits == 3:  # (p0 + p2) + p1: the halving tree of three, the last split second; not in order
        K = cap.conv.N * cap.conv.P * cap.conv.Q
        order, bounds = round_robin_splits(K, 64, 3)
        in_order = replace(
            best,
            variant=replace(best.variant, k_blocks=(64, order)),
            schedule=replace(best.schedule, split_bounds=bounds, reduction="sequential"),
        )
        assert _differ(run_candidate(cap, in_order), cap.out) > 0


def _check_set(name, tmp_path):
    """A random capture of the check on unseen shapes (probes_set4.tar.gz; operands from its seed)."""
    return load_capture(archived("probes_set4.tar.gz", name, tmp_path))


@pytest.mark.parametrize(
    "name, splits, instruction_k, in_order_differs",
    [
        ("c_wgrad_n2c40k24h17r3s1p1_chann_float16", 8, 0, True),  # 10 k tiles
        ("c_wgrad_n4c16k8h28r3s1p1_conti_float16", 9, 8, False),  # fp16 data on the kernel named tf32
    ],
)
def test_xmma_weight_gradient_adds_the_last_split_second(name, splits, instruction_k, in_order_differs, tmp_path):
    """Every pair of k tiles probed (probes_set5.tar.gz): the partials of S splits are added one
    after the other in the order 0, S − 1, 1, 2, …; on the kernel named ``…tf32f32_tf32f32…``
    fp16 data meets the m16n8k8's groups of 8 (with groups of 16 it differs). The first capture
    also tells that order from split order; the second's fp16 outputs do not."""
    cap = _check_set(name, tmp_path)
    K = cap.conv.N * cap.conv.P * cap.conv.Q
    want, _ = round_robin_splits(K, 64, splits, (0, splits - 1) + tuple(range(1, splits - 1)))
    (best,) = [
        c
        for c in wgrad_splitk_candidates(cap, "h100")
        if c.schedule.reduction == "sequential" and c.variant.k_blocks == (64, want)
    ]
    assert best.schedule.splits == splits and best.schedule.instruction_k == instruction_k
    assert differing_bits(run_candidate(cap, best), cap.out) == 0
    order, bounds = round_robin_splits(K, 64, splits)
    in_order = replace(
        best,
        variant=replace(best.variant, k_blocks=(64, order)),
        schedule=replace(best.schedule, split_bounds=bounds, reduction="sequential"),
    )
    assert (differing_bits(run_candidate(cap, in_order), cap.out) > 0) == in_order_differs
    wide = replace(best, schedule=replace(best.schedule, instruction_k=0))
    assert instruction_k == 0 or differing_bits(run_candidate(cap, wide), cap.out) > 0


def test_the_tf32_weight_gradient_bench_adds_the_last_split_second():
    """The sm80 TF32 ``wgrad…indexed_wo_smem`` that ``cudnn.benchmark`` took (session 16; cropped to
    8 × 8 channels, the GPU's outputs: ``benchmarks/captures/crop_wgrad.py``), not modelled until
    session 23: six splits of 64-wide k tiles, operands rounded to tf32 with ties away, the
    partials in the order 0, 5, 1, 2, 3, 4 — fp32 outputs, so every order is told apart."""
    cap = _cap("h200_crops/t_bench_conv2d_bwd_weight_n4c64h16_tf32_crop8x8")
    result = search(cap)
    assert result.answer == "identical" and cap.out_format == "fp32"
    best = result.best
    assert best.family == "cudnn-wgrad-splitk" and best.schedule.splits == 6
    assert best.variant.tf32_rounding == "rna" and best.variant.k_blocks[1][:4] == (0, 6, 12, 5)
    order, bounds = round_robin_splits(1024, 64, 6)
    for red in ("sequential", "halving", "tree"):
        other = replace(
            best,
            variant=replace(best.variant, k_blocks=(64, order)),
            schedule=replace(best.schedule, split_bounds=bounds, reduction=red),
        )
        assert differing_bits(run_candidate(cap, other), cap.out) > 0


def test_the_modelled_tf32_weight_gradient_is_not_called_an_unmodelled_family():
    """Now that the sm80 TF32 weight gradient after a ``Memset`` is modelled, a capture of it that
    nothing reproduces (a flipped output bit: ``fp16emu identify`` then reads "bug-suspect" at that
    output) is no longer put down to "a family the search does not model"; without the Memset
    the family is still unresolved (``models.libraries.UNRESOLVED``)."""
    from models.libraries import not_modelled_family

    cap = _cap("h200_crops/t_bench_conv2d_bwd_weight_n4c64h16_tf32_crop8x8")
    kernels = [str(k) for k in cap.kernels]
    assert any(k.startswith("Memset") for k in kernels)
    assert not_modelled_family(kernels, cap.op) is None
    without = [k for k in kernels if not k.startswith("Memset")]
    assert not_modelled_family(without, cap.op) == "sm80 xmma TF32 implicit-GEMM weight gradient"


def test_the_cutlass_weight_gradient_adds_round_robin_splits_in_order(tmp_path):
    """cuDNN's CUTLASS TF32 weight gradient under ``cudnn.benchmark`` (``Memset``,
    ``ImplicitGemmConvolution<… GemmShape<64, 64, 32> … Conv2dWgrad…>``, ``ReduceSplitK``), a
    probe of every pair of k tiles (probes_set1.tar.gz; 128 channels, 8×28×28, gemmK 6,272):
    32-wide k tiles dealt round-robin to 7 splits, the fp32 slices added in order; 147,456
    outputs identical, other split counts far off. Before, the search answered "not modelled"
    with a piece of the mangled name as the family."""
    name = "p_wgrad_bench_n8c128h28_tf32_b000"
    kept = archived("probes_set1.tar.gz", name, tmp_path / "archive")
    cap = load_capture(save(tmp_path / f"{name}.npz", _probe(name, kept)))
    family = cutlass_wgrad_splitk_candidates(cap, "h100")
    assert [c.schedule.splits for c in family] == list(range(2, 33))
    assert {c.family for c in family} == {"cudnn-cutlass-wgrad-splitk"} and family[0].variant.k_blocks[0] == 32
    seven, eight = family[5], family[6]
    assert seven.schedule.splits == 7 and differing_bits(run_candidate(cap, seven), cap.out) == 0
    assert differing_bits(run_candidate(cap, eight), cap.out) > 1000
