"""The named library orders of validation.captures.orders: the cuBLAS orders a public peer
documented (facebookexperimental/triton bitequiv) and the AMD libraries' orders from their source.
Synthetic captures emulated with each schedule are identified as that schedule, bit for bit; an
AMD capture's space holds the AMD families, an NVIDIA one's does not."""

import tarfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import models
from emu.schedule import Schedule
from models.libraries import cutlass_splitk_grain, from_source, splitk_merges
from validation.captures import Capture, load_capture, search_capture
from validation.captures.gemms import Candidate, Variant, bits, run_candidate, serial_merge
from validation.captures.orders import gsu_bounds
from validation.captures.search import search
from validation.captures.space import candidates

MI300 = "AMD Instinct MI300X"
H200 = "NVIDIA H200"


def _capture(M, K, N, gpu, kernels=(), seed=0, name="synthetic", out=np.float16):
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    zero = np.zeros((M, N), out)
    return Capture(name, "mm", {"A": A.view(np.uint16), "B": B.view(np.uint16)}, zero, gpu=gpu, kernels=tuple(kernels))


def _with_output(cap, cand):
    """The capture with the output the candidate computes (the synthetic GPU's answer)."""
    out = run_candidate(cap, cand)
    return Capture(cap.path, cap.op, cap.operands, out, gpu=cap.gpu, kernels=cap.kernels)


def test_the_serial_merge_keeps_the_running_sum_in_the_output_format():
    """1 + 2^-11 + 2^-11: in an fp32 workspace 1 + 2^-10 (an fp16 value); kept in fp16 after each
    add, each 1 + 2^-11 is a tie that rounds to even, 1."""
    one, half_ulp = np.float32(1), np.float32(2.0**-11)
    parts = [np.full((1, 1), v, np.float32) for v in (one, half_ulp, half_ulp)]
    got = serial_merge(models.unit("h100"), parts, None, Schedule(splits=3, output="fp16"))
    assert got.dtype == np.float16 and float(got[0, 0]) == 1.0
    assert float(np.float16(np.float32(1) + half_ulp + half_ulp)) == 1 + 2.0**-10


def test_the_merge_is_read_from_the_kernel_names():
    fp32 = "void cublasLt::splitKreduce_kernel<32, 16, int, float, __half, float, __half, false>(x)"
    half = "void cublasLt::splitKreduce_kernel<32, 16, int, __nv_bfloat16, __nv_bfloat16, float>(x)"
    cutlass = "void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_64x64_nn_align1>(x)"
    assert splitk_merges([cutlass, fp32]) == ("fp32",)
    assert splitk_merges([cutlass, half]) == ("partials",)
    assert splitk_merges([cutlass]) == ("serial",)
    assert set(splitk_merges([])) == {"fp32", "partials", "serial"}
    assert (cutlass_splitk_grain(2013), cutlass_splitk_grain(4096)) == (8, 64)
    assert (cutlass_splitk_grain(56, 32), cutlass_splitk_grain(4096, 32)) == (4, 64)  # TF32: fp32 reads


SWEEP = Path(__file__).resolve().parents[2] / "data" / "captures" / "sweep_h200_s16.tar.gz"


def _sweep_capture(name: str, tmp_path) -> Capture:
    """A capture of the session-16 H200 sweep, extracted from the tarball (skipped where it is absent)."""
    if not SWEEP.exists():
        pytest.skip(f"{SWEEP.name} is absent")
    with tarfile.open(SWEEP) as tar:
        tar.extract(f"sweep_small/{name}.npz", tmp_path, filter="data")
    return load_capture(tmp_path / "sweep_small" / f"{name}.npz")


@pytest.mark.parametrize("name", ["s0031_mm_1620x56x4_tf32", "s0469_mm_150x541x28_tf32", "s0742_mm_457x3129x16_tf32"])
def test_tf32_cutlass_split_k_cuts_k_at_the_grain_of_fp32_reads(name, tmp_path):
    """cuBLAS's TF32 ``cutlass_80_tensorop_s1688gemm_*_align{1,4}`` with ``splitKreduce`` (NVIDIA
    H200, a random-shape sweep): identical only with K cut at 4, the fp32 elements of a 128-bit
    read (they were answered as bug suspects, "tile scaled", with the 16-bit operands' 8)."""
    result = search_capture(_sweep_capture(name, tmp_path))
    assert result.answer == "identical", result.answer
    assert any(c.family == "cublas-cutlass-splitk" and c.schedule.k_tile == 4 for c in result.reproducing)


@pytest.mark.parametrize("name", ["s0096_linear_435x696x23_f16", "s0717_linear_9x920x1388_bf16"])
def test_a_bias_after_output_format_partials_is_added_to_the_stored_sum(name, tmp_path):
    """``F.linear`` with a bias on cuBLAS's CUTLASS split-K whose ``splitKreduce_kernel`` merges
    fp16 / bf16 partials (NVIDIA H200 sweep): identical only with the reduced sum stored in the
    output format and the bias added to it (rounded twice); with the bias in the fp32 epilogue a
    quarter of the outputs differ, and the search answered these correct kernels as bug suspects."""
    cap = _sweep_capture(name, tmp_path)
    result = search_capture(cap)
    assert result.answer == "identical", result.answer
    best = result.best
    assert best.schedule.c_entry == "output" and best.schedule.partial_format == cap.out_format
    fused = replace(best, schedule=replace(best.schedule, c_entry="epilogue"))
    assert np.count_nonzero(bits(run_candidate(cap, fused)) != bits(cap.out)) > 0


@pytest.mark.parametrize(
    "name,splits,rule",
    [
        ("s0495_linear_14x3838x220_f32", 33, "strided"),  # xmma ffma GEMM + split_k: 8-wide tiles round-robin
        ("s0701_linear_47x7361x4_f32", 132, "ceil"),  # cutlass_80_simt_sgemm + splitKreduce: 132 splits of 56 k
    ],
)
def test_fp32_simt_split_k_goes_past_the_old_bounds(name, splits, rule, tmp_path):
    """Two fp32 linears of the H200 sweep, answered as bug suspects while the space stopped at 32
    round-robin splits and 128 SIMT splits: identical with 33 and 132."""
    result = search_capture(_sweep_capture(name, tmp_path))
    assert result.answer == "identical", result.answer
    assert result.best.unit == "fma32"
    assert (result.best.schedule.splits, result.best.schedule.split_rule) == (splits, rule)


def test_a_serial_split_k_capture_is_found_with_its_merge():
    """An unaligned fp16 GEMM that ran a CUTLASS kernel and no reduce kernel: the splits' running
    sum kept in fp16 (GemmSplitKSerial), K = 200 in k tiles of 8 (64 does not divide it)."""
    kernels = ["void cutlass::Kernel2<cutlass_80_wmma_tensorop_f16_s161616gemm_f16_32x32_64x1_nn_align2>(x)"]
    cap = _capture(24, 200, 24, H200, kernels, seed=3)
    sch = Schedule(
        k_tile=8, splits=4, split_rule="ceil", split_bounds=(0, 7, 14, 21, 25), residue_tile=64, output="fp16"
    )
    cap = _with_output(cap, Candidate("h100", Variant(), sch, merge="serial"))
    fp32 = run_candidate(cap, Candidate("h100", Variant(), sch))
    assert np.count_nonzero(bits(fp32) != bits(cap.out)) > 0  # the merge decides bits here
    r = search(cap)
    assert r.answer == "identical" and r.n_identical == cap.out.size, r.stages
    assert r.best.merge == "serial" and r.best.family == "cublas-cutlass-splitk"
    assert r.best.fields()["merge"] == "serial" and "serially" in r.best.describe()


def test_a_gemmsn_capture_is_found_with_its_sub_blocks():
    """cuBLAS gemmSN (2 threads per output, sub-blocks of 256 k) on fp16 operands, K = 1100."""
    kernels = [
        "void gemmSN_TN_kernel<float, 128, 16, 2, 4, 2, 2, true, cublasGemvTensorStridedBatched<__half const>>(x)"
    ]
    cap = _capture(2, 1100, 40, H200, kernels, seed=4)
    sch = Schedule(k_tile=1, splits=2, split_rule="ceil", split_bounds=(0, 550, 1100), promotion_interval=256,
                   reduction="workspace", output="fp16")  # fmt: skip
    cap = _with_output(cap, Candidate("fma32", Variant(), sch))
    r = search(cap)
    assert r.answer == "identical" and r.best.family == "cublas-gemmsn", r.stages
    assert r.best.schedule.promotion_interval == 256


K_AMD = 1000
#: family → a candidate of it, emulated to make a synthetic MI300 capture
AMD_CASES = {
    "hipblaslt-gsu": Candidate(
        "mi300", Variant(), Schedule(k_tile=64, splits=3, split_bounds=gsu_bounds(K_AMD, 64, 3), output="fp32")
    ),
    "hipblaslt-staggeru": Candidate(
        "mi300", Variant(k_blocks=(64, tuple(range(3, 15)) + (0, 1, 2, 15))), Schedule(output="fp32")
    ),
    "hipblaslt-streamk": Candidate(
        "mi300", Variant(), Schedule(k_tile=128, splits=3, split_bounds=(0, 1, 6, 8), output="fp32")
    ),
    "ck-splitk": Candidate(
        "mi300",
        Variant(),
        Schedule(k_tile=32, splits=5, split_rule="ceil", reduction="workspace", c_entry="chain", output="fp32"),
    ),
}


@pytest.mark.parametrize("family", sorted(AMD_CASES))
def test_an_amd_capture_is_found_as_its_library_schedule(family):
    assert gsu_bounds(K_AMD, 64, 3) == (0, 5, 10, 16)  # 15 iterations, 5 each, the tail in the last
    cap = _with_output(_capture(16, K_AMD, 16, MI300, seed=7, out=np.float32), AMD_CASES[family])
    assert cap.out_format == "fp32"  # fp32 outputs tell the orders apart
    r = search(cap)
    assert r.answer == "identical" and r.n_identical == cap.out.size, r.stages
    assert r.best.family == family, (r.best.family, r.best.describe())
    assert from_source(family) and any("from source, not checked on silicon" in h for h in r.hints)


def test_only_an_amd_capture_searches_the_amd_families():
    amd = {c.family for c in candidates(_capture(8, 512, 8, MI300), "mi300")[0]}
    nvidia = {c.family for c in candidates(_capture(8, 512, 8, H200), "h100")[0]}
    wanted = {"hipblaslt-gsu", "hipblaslt-staggeru", "hipblaslt-streamk", "ck-splitk"}
    assert wanted <= amd and not wanted & nvidia
    assert "cublas-cutlass-splitk" in nvidia and "cublas-cutlass-splitk" not in amd


def test_differences_within_another_orders_bound_are_not_modelled_not_a_bug(tmp_path, monkeypatch):
    """cuBLAS ``gemvNSP`` on fp32 (an H200 sweep capture) searched without its lane order (24 of a
    warp's lanes, ``space.GEMVNSP_LANES``, taken out here as it was absent before session 23): the
    nearest order differs in hundreds of the 1,148 outputs by up to thousands of fp32 ulps —
    near-cancelling sums — yet every difference is within 2·γ_K·Σ|a·b| of another summation
    order, so the reading is "not modelled", not a bug. The same capture with one product added
    to a few outputs (a misread operand) is outside the bound and stays a bug suspect."""
    from validation.captures import space
    from validation.captures.report import reading_of, within_order_bound

    monkeypatch.setattr(space, "GEMVNSP_LANES", 1 << 20)  # the order the space lacked
    cap = _sweep_capture("s1149_mm_1x163x1148_f32", tmp_path)
    result = search(cap)
    assert result.answer == "differs"
    assert within_order_bound(cap, result.emulated)
    reading = reading_of(cap, result)
    assert reading.reading == "not-modelled" and reading.order_bound and reading.exit_code == 1
    assert "another fp32 summation order" in reading.report()
    A = cap.operands["A"].view(np.float32).astype(np.float64)
    B = cap.operands["B"].view(np.float32).astype(np.float64)
    wrong = result.emulated.astype(np.float64).copy()
    cols = np.array([5, 300, 700, 1100])
    wrong[0, cols] += A[0, 17] * B[17, cols]  # k = 17 counted twice in four scattered outputs
    assert not within_order_bound(cap, wrong.astype(np.float32))


def test_the_sm90_tf32_weight_gradient_is_found_with_raw_operands(tmp_path):
    """``sm90_xmma_wgrad…segment_k_off`` rounds neither operand: the search tries the raw bits first
    for the sm90 weight gradients (``models.libraries.TF32_RAW_BITS``) and finds one chain over
    (n, p, q) of the raw fp32 bits among the kernel names' families."""
    cap = _sweep_capture("s0570_conv2d_bwd_weight_n1c12k2h27r3s1p1_chann_tf32", tmp_path)
    result = search(cap)
    assert result.answer == "identical"
    assert result.best.variant.tf32_rounding == "" and result.best.schedule.splits == 1
    assert not any(stage.startswith("other tf32 roundings") for stage, _, _ in result.stages)


def test_the_sm90_segment_k_weight_gradient_is_found_by_its_family():
    """``sm90_xmma_wgrad…segment_k_on`` (an H200 weight gradient cropped to 4 × 4 channels, the
    GPU's outputs: ``benchmarks/captures/crop_wgrad.py``): the search finds 7 segments of 32-wide k
    tiles added as a tree of halves, with the raw fp32 bits, in the kernel names' family; it was
    answered "not modelled" before the family existed."""
    path = Path(__file__).resolve().parents[2] / "data" / "captures" / "h200_crops"
    path = path / "t_bench_conv2d_bwd_weight_n8c128h28_tf32_crop4x4.npz"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    result = search(load_capture(path))
    assert result.answer == "identical", result.hints
    s = result.best.schedule
    assert (s.splits, s.k_tile, s.reduction, result.best.variant.tf32_rounding) == (7, 32, "bisection", "")
    assert result.best.family == "cudnn-sm90-wgrad-segment-k"
    # a segment per k tile (196 of 32: past the generic space's 128 splits) is in the space, as a tree of halves
    cands, _ = candidates(load_capture(path), "h100")
    halves = {c.schedule.splits for c in cands if c.unit == "h100" and c.schedule.reduction == "bisection"}
    assert 7 in halves and 196 in halves and max(halves) == 196


@pytest.mark.parametrize("name, v, blocks", [("s0774_linear_1x709x60_f32", 2, 3), ("s1060_mm_1x1069x4_tf32", 1, 9)])
def test_cublas_dot_kernel_captures_are_found_by_their_family(name, v, blocks, tmp_path):
    """cuBLAS ``dot_kernel`` + ``reduce_1Block_kernel`` (fp32 and TF32-allowed, M = 1): answered
    "not modelled" before the ``cublas-dot`` family; now identical, the fp32 operands whole (CUDA
    cores), with the block count and registers per thread found from the output."""
    cap = _sweep_capture(name, tmp_path)
    result = search(cap)
    assert result.answer == "identical", result.hints
    best = result.best
    assert best.family == "cublas-dot" and best.unit == "fma32"
    assert best.variant.lanes == ("tiled", blocks * 128 * v, 128 * v)
    assert best.schedule.reduction == "program"
    # the block count of the rule (tiles dealt evenly to at most 32 blocks) is tried first, the
    # others only in a later tier, which this search does not reach
    assert not any(stage.startswith("kernel-name families, other block counts") for stage, _, _ in result.stages)


@pytest.mark.parametrize("name", ["s0244_linear_7x444x854_tf32", "s0704_linear_2x1889x4478_f16"])
def test_gemmsn_tn_restarts_each_lane_every_16_of_its_k(name, tmp_path):
    """cuBLAS ``gemmSN_TN_kernel<float, 128, 16, …>`` with a long K (444, TF32-allowed; 1,889, fp16):
    16 lanes over k strided, each lane's chain restarted every 16 of its k, the totals and then the
    lanes added in order. Both differed before (5,978 of 5,978 at best in the strided lanes without
    restarts for the fp32 one; 10 of 8,956 for the fp16 one); the plain strided lanes still differ."""
    cap = _sweep_capture(name, tmp_path)
    result = search(cap)
    assert result.answer == "identical", result.hints
    best = result.best
    assert best.family == "cublas-gemmsn" and best.variant.lanes == ("strided", 16, 1)
    assert best.schedule.promotion_interval == 16 and best.schedule.reduction == "sequential"
    plain = replace(best, schedule=replace(best.schedule, promotion_interval=0))
    assert np.count_nonzero(bits(run_candidate(cap, plain)) != bits(cap.out)) > 0


def test_a_capture_that_names_no_dot_kernel_gets_the_block_rule_only(tmp_path):
    """Without kernel names an M = 1 GEMM may still have run dot_kernel: the search tries the
    rule's block count for V = 1 and 2 (2 candidates), not every count (dozens of candidates of
    thousands of lanes each)."""
    from validation.captures.orders import dot_blocks, dot_candidates

    cap = _sweep_capture("s0774_linear_1x709x60_f32", tmp_path)
    named = dot_candidates(cap)
    unnamed = dot_candidates(replace(cap, kernels=()))
    assert len(named) > len(unnamed) == 2
    assert {c.variant.lanes for c in unnamed} == {("tiled", dot_blocks(709, v) * 128 * v, 128 * v) for v in (1, 2)}


def test_a_wrong_dot_kernel_output_reads_as_a_bug_suspect(tmp_path):
    """A product counted twice in three outputs of a dot_kernel capture: the nearest schedule is a
    lane layout (768 lanes over K = 709, +0 entries included), whose accumulation sequence is
    longer than K. The cause search crashed on it (split_bounds ending past K); now the reading is
    bug-suspect, exit code 1, no cause named (a block of the lanes' sequence is no k range)."""
    from validation.captures.report import reading_of

    cap = _sweep_capture("s0774_linear_1x709x60_f32", tmp_path)
    x, w = cap.operands["input"].view(np.float32), cap.operands["weight"].view(np.float32)
    out = cap.out.copy()
    for n in (3, 17, 41):
        out[0, n] = np.float32(out[0, n] + x[0, 100] * w[n, 100])
    wrong = replace(cap, out=out)
    result = search(wrong)
    assert result.answer == "differs" and result.n_identical == 57
    reading = reading_of(wrong, result)
    assert reading.reading == "bug-suspect" and reading.exit_code == 1 and reading.cause is None
