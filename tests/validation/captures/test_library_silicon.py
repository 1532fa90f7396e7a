"""Every case of ``../shared/silicon`` (an NVIDIA H200's cuBLAS, cuDNN and Triton outputs)
reproduced bit for bit by ``emu.gemm`` with the schedule the capture search found, and the search
itself on a few of them (it finds the schedule from the output alone and points at a changed bit).

The schedules below are what ``fp16emu identify`` reported (docs/library.md has the table); the
test checks them against the silicon's bits, not against the code that found them."""

import numpy as np
import pytest

import emu
import models
from emu.schedule import Schedule
from tests import silicon
from validation.captures.gemms import Candidate, Variant, run_candidate
from validation.captures.search import search

pytestmark = pytest.mark.skipif(not silicon.available(), reason="../shared/silicon is absent")

NVJET_SPLIT = dict(k_tile=64, split_rule="ceil")
#: case → (unit, variant, schedule fields without the output format)
GEMMS = {
    "g128x1024x128_r0": ("h100", {}),
    "g512x512x512_r0": ("h100", {}),
    "g64x32768x64_r0": ("h100", {"splits": 25, **NVJET_SPLIT}),  # nvjet …splitK: 25 splits of 21 tiles
    "g33x8192x17_r0": ("h100", {"splits": 64, "k_tile": 128, "split_rule": "ceil"}),  # cutlass_75 wmma split-K
    "blas_sq": ("h100", {"splits": 3, **NVJET_SPLIT}),
    "blas_tallk": ("h100", {"splits": 12, **NVJET_SPLIT}),
}
CONVS = {
    "c3x3_c64_k64_h14_nchw_fwd": ("h100", Variant("rsc"), {}),
    "c3x3_c64_k64_h14_nhwc_fwd": ("h100", Variant("rsc"), {}),
    "c3x3_c64_k64_h14_nchw_bwd_data": ("h100", Variant("rsk", 32), {}),
    "c3x3_c64_k64_h14_nchw_bwd_weight": ("h100", Variant("npq"), {}),
    "c1x1_c256_k64_h28_nchw_fwd": ("h100", Variant("rsc"), {}),
    "c1x1_c256_k64_h28_nhwc_fwd": ("h100", Variant("rsc"), {}),
    "c1x1_c256_k64_h28_nchw_bwd_data": ("h100", Variant("rsk"), {}),
    # nvjet over (p, q) per image, then cudnn's reduce_wgrad over the 2 images
    "c1x1_c256_k64_h28_nchw_bwd_weight": ("h100", Variant("npq"), {"splits": 2, "k_tile": 16, "split_rule": "ceil"}),
    "c7x7s2_c3_k64_h56_nchw_fwd": ("fma32", Variant("crs"), {}),  # implicit_convolve_sgemm
    "c7x7s2_c3_k64_h56_nhwc_fwd": ("h100", Variant("rsc"), {}),
    "c7x7s2_c3_k64_h56_nchw_bwd_data": ("h100", Variant("rsk"), {}),
    # wgrad2d_grouped_direct_kernel: 32 lanes each an FMA chain over every 32nd (n, p, q), a shuffle tree
    "c7x7s2_c3_k64_h56_nchw_bwd_weight": (
        "fma32",
        Variant("npq"),
        {"splits": 32, "split_rule": "strided", "reduction": "halving"},
    ),
    "conv_nchw": ("h100", Variant("rsc"), {}),
    "conv_nhwc": ("h100", Variant("rsc"), {}),
    "conv_nchw_again": ("h100", Variant("rsc"), {}),
    "conv_nhwc_again": ("h100", Variant("rsc"), {}),
}


def _same_bits(a, b) -> int:
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    kind = np.dtype(f"u{a.dtype.itemsize}")
    return int(np.count_nonzero(a.view(kind) == b.view(kind)))


@pytest.fixture(scope="module")
def gemms():
    return silicon.gemm_cases()


@pytest.fixture(scope="module")
def convs():
    return silicon.conv_cases()


@pytest.mark.parametrize("base", sorted(GEMMS))
def test_every_cublas_case_is_its_schedule(gemms, base):
    unit, fields = GEMMS[base]
    outs = [k for k in gemms if k.startswith(base + "_")]
    assert outs
    for name in outs:
        cap = gemms[name]
        got = emu.gemm(
            cap.operands["A"], cap.operands["B"], None, models.unit(unit), Schedule(output=cap.out_format, **fields)
        )
        assert _same_bits(got, cap.out) == cap.out.size, name


def test_every_triton_case_is_one_chain(gemms):
    names = [k for k in gemms if k.startswith("tri_")]
    assert len(names) == 12
    for name in names:
        cap = gemms[name]
        got = emu.gemm(cap.operands["A"], cap.operands["B"], None, models.unit("h100"))
        assert _same_bits(got, cap.out) == cap.out.size, name


@pytest.mark.parametrize("name", sorted(CONVS))
def test_every_cudnn_case_is_its_implicit_gemm(convs, name):
    unit, variant, fields = CONVS[name]
    cap = convs[name]
    got = run_candidate(cap, Candidate(unit, variant, Schedule(output="fp16", **fields)))
    assert _same_bits(got, cap.out) == cap.out.size


def test_the_search_finds_a_split_count_from_the_output_alone(gemms):
    cap = gemms["g33x8192x17_r0_f32"]
    r = search(cap)
    assert r.answer == "identical" and r.n_identical == r.n == 33 * 17
    s = r.best.schedule
    assert (s.splits, s.k_tile, s.split_rule, r.best.unit) == (64, 128, "ceil", "h100")


def test_the_search_finds_a_gemm_k_order(convs):
    r = search(convs["c3x3_c64_k64_h14_nchw_bwd_data"])
    assert r.answer == "identical"
    assert (r.best.variant.k_order, r.best.variant.channel_block, r.best.variant.flip) == ("rsk", 32, False)


def test_one_changed_bit_is_found_and_located(gemms):
    cap = gemms["g128x1024x128_r0_f32"]
    changed = cap.out.copy()
    changed.view(np.uint32)[20, 5] ^= 1  # the last mantissa bit of one output
    cap = type(cap)(cap.path, cap.op, cap.operands, changed, gpu=cap.gpu, kernels=cap.kernels)
    r = search(cap)
    assert r.answer == "differs" and r.n_identical == r.n - 1
    from validation.captures.report import suspects

    s = suspects(cap, r.emulated)
    assert s["n_differ"] == 1 and (s["elements"][0]["m"], s["elements"][0]["n"]) == (20, 5)
    assert s["elements"][0]["ulps"] == 1
