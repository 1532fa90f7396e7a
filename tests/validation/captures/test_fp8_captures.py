"""fp8 library captures (``torch._scaled_mm``): the loader and the schedule search, on synthetic
captures made by ``emu`` with known schedules (no GPU capture of fp8 exists yet): the search
must find the promotion interval and the epilogue order that made them, and reject a schedule
outside its space."""

import ml_dtypes
import numpy as np
import pytest

import emu
import models
from validation.captures.capture import CaptureError, load_capture
from validation.captures.search import search
from validation.captures.space import scaled_split_schedules

M, K, N = 12, 384, 8


def _operands(seed=0):
    rng = np.random.default_rng(seed)
    A = (rng.standard_normal((M, K)) * np.exp2(rng.integers(-6, 6, (M, K)))).astype(ml_dtypes.float8_e4m3fn)
    B = (rng.standard_normal((K, N)) * 4).astype(ml_dtypes.float8_e5m2)
    sa = rng.uniform(0.5, 2, (M, 1)).astype(np.float32)
    sb = rng.uniform(0.5, 2, (1, N)).astype(np.float32)
    bias = rng.standard_normal(N).astype(ml_dtypes.bfloat16)
    return A, B, sa, sb, bias


def _capture(tmp_path, schedule, name="cap.npz", fast=False, out="bf16"):
    A, B, sa, sb, bias = _operands()
    unit = models.unit("h100", input=("e4m3", "e5m2"))
    sch = emu.Schedule(**(schedule | {"c_entry": "epilogue", "output": out}))
    D = emu.gemm(A, B, bias.astype(np.float32)[None], unit, sch, scale_a=sa, scale_b=sb)
    path = tmp_path / name
    np.savez(
        path,
        op="scaled_mm",
        A=A.view(np.uint8),  # np.savez writes float8 as '<f1', which numpy cannot read back
        B=B.view(np.uint8),
        A_dtype="float8_e4m3fn",
        B_dtype="float8_e5m2",
        scale_a=sa,
        scale_b=sb,
        bias=bias,
        bias_dtype="bfloat16",
        out=D,
        out_dtype=np.dtype(D.dtype).name,
        use_fast_accum=fast,
        gpu="NVIDIA H100 80GB HBM3",
    )
    return path


def test_search_finds_the_promotion_interval_and_the_epilogue_order(tmp_path):
    made = {"k_tile": 32, "promotion_interval": 4, "scale_order": "a_then_b", "epilogue_fma": False}
    cap = load_capture(_capture(tmp_path, made, out="fp32"))  # bf16 outputs hide the bias's FMA
    assert cap.input == "e4m3xe5m2" and cap.extra["scale_a"].shape == (M, 1)
    res = search(cap)
    assert res.answer == "identical", res.stages
    found = [(c.schedule.promotion_interval, c.schedule.scale_order, c.schedule.epilogue_fma) for c in res.reproducing]
    assert (4, "a_then_b", False) in found
    # the data tell the intervals apart (the bias's FMA or separate add rarely parts on random data)
    assert {f[0] for f in found} == {4}
    # with bf16 outputs the interval is still told apart
    res16 = search(load_capture(_capture(tmp_path, made, name="bf16.npz")))
    assert res16.answer == "identical" and {c.schedule.promotion_interval for c in res16.reproducing} == {4}


def test_fast_accumulation_is_one_chain(tmp_path):
    cap = load_capture(_capture(tmp_path, {"scale_order": "product"}, fast=True, out="fp32"))
    res = search(cap)
    assert res.answer == "identical"
    assert {c.schedule.promotion_interval for c in res.reproducing} == {0}


def test_a_schedule_outside_the_space_differs(tmp_path):
    # an interval of 3 wgmma k-blocks (96 k) is not a power of two: the search must not claim it
    cap = load_capture(_capture(tmp_path, {"k_tile": 32, "promotion_interval": 3}))
    res = search(cap)
    assert res.answer == "differs" and res.n_identical < res.n


def test_fp8_loader_errors_name_the_field(tmp_path):
    A, B, sa, sb, _ = _operands()
    A, B = A.view(np.uint8), B.view(np.uint8)
    np.savez(tmp_path / "mm.npz", op="mm", A=A, B=B, dtype="float8_e4m3fn", out=np.zeros((M, N), np.float32))
    with pytest.raises(CaptureError, match="A: float8_e4m3fn operands in mm: fp8 GEMMs are captured as scaled_mm"):
        load_capture(tmp_path / "mm.npz")
    bad = dict(op="scaled_mm", A=A, B=B, A_dtype="float8_e4m3fn", B_dtype="float8_e5m2", out=np.zeros((M, N)))
    np.savez(tmp_path / "s.npz", **bad, scale_a=np.ones((M, 2), np.float32), scale_b=sb)
    with pytest.raises(CaptureError, match=r"out: .*float64"):
        load_capture(tmp_path / "s.npz")
    bad["out"] = np.zeros((M, N), np.float32)
    np.savez(tmp_path / "s.npz", **bad, scale_a=np.ones((M, 2), np.float32), scale_b=sb)
    with pytest.raises(CaptureError, match=r"scale_a: expected float32 of shape"):
        load_capture(tmp_path / "s.npz")
    fnuz = dict(bad, B_dtype="float8_e5m2fnuz")
    np.savez(tmp_path / "s.npz", **fnuz, scale_a=sa, scale_b=sb)
    with pytest.raises(CaptureError, match="B: float8_e5m2fnuz with A float8_e4m3fn"):
        load_capture(tmp_path / "s.npz")


def test_split_k_bounds_are_whole_k_tiles_per_split():
    """Hand-derived: K = 384 is 3 tiles of 128 (12 wgmma k-blocks): 2 splits take ⌈3/2⌉ = 2
    tiles then 1 (blocks 0-8, 8-12), 3 splits one tile each; tiles of 64 give the same 3-way
    bounds (once) and 4 … 6 splits; the promotion intervals stop below the longest split."""
    sch = scaled_split_schedules(384)
    bounds = {s.split_bounds for s in sch}
    assert (0, 8, 12) in bounds and (0, 4, 8, 12) in bounds and (0, 2, 4, 6, 8, 10, 12) in bounds
    assert len([s for s in sch if s.split_bounds == (0, 4, 8, 12)]) == 3  # fast accumulation, n = 1, 2
    assert all(s.k_tile == 32 and s.output == "fp32" for s in sch)
    assert {s.promotion_interval for s in sch if s.split_bounds == (0, 8, 12)} == {0, 1, 2, 4}


@pytest.mark.parametrize(
    ("made", "fast"),
    [
        ({"splits": 2, "split_bounds": (0, 6, 12), "promotion_interval": 4}, False),
        ({"splits": 2, "split_bounds": (0, 6, 12), "promotion_interval": 0}, True),
    ],
    ids=["promotion-4-in-2-splits-of-192", "fast-accum-2-splits-of-192"],
)
def test_search_finds_split_k_on_top_of_promotion(tmp_path, made, fast):
    """A synthetic split-K fp8 capture (partials in fp32 in split order, then the epilogue):
    no single chain reproduces it, the split-K tier finds its splits and promotion interval.
    Splits of 6 k-blocks with an interval of 4 restart the unit at block 6, where one chain's
    intervals (0-4, 4-8, 8-12) do not: the unit's truncations part. (Intervals that divide the
    splits differ from one chain only in the fp32 adds' association, which these data rarely
    expose; two fast-accumulation splits of 256 are the single chain with an interval of 8.)"""
    cap = load_capture(_capture(tmp_path, {"k_tile": 32, **made}, fast=fast, out="fp32"))
    res = search(cap)
    assert res.answer == "identical", res.stages
    assert res.stages[1][2] == 0  # the single-chain tier reproduces nothing
    found = {(c.schedule.split_bounds, c.schedule.promotion_interval) for c in res.reproducing}
    assert found == {(made["split_bounds"], made["promotion_interval"])}
    assert all(c.family == "fp8-split-k" for c in res.reproducing)


def test_split_k_outside_the_space_differs(tmp_path):
    """Splits at 96-wide bounds (not whole tiles of 64, 128 or 256): not claimed."""
    cap = load_capture(_capture(tmp_path, {"k_tile": 32, "splits": 2, "split_bounds": (0, 3, 12)}, out="fp32"))
    res = search(cap)
    assert res.answer == "differs" and res.n_identical < res.n
