"""validation.metrics: every metric against hand-computed values, the edge cases (v = 0, both
zero, inf, NaN, subnormals, exact powers of two), the study verifier's C loop, chunking and memory.

Hand-computed numbers are written as exact binary fractions (``2**-9``) where they are exact.
"""

import json
import math
import tracemalloc
import warnings

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from emu.formats import BF16, FP16, FP32, ulp
from emu.rounding import round_float64, round_rne
from validation.metrics import (
    EPSILON_BUCKETS,
    REL_OLD_BUCKETS,
    STABLE_KEYS,
    TORCH_TOLERANCES,
    compare,
    resolve_dtype,
    spacing,
)
from validation.verify import STUDY_RUN_SETS, resolve_study_quirks
from validation.verify.presets import format_study_line

F16 = np.float16


def f16(*xs):
    return np.array(xs, dtype=F16)


# ------------------------------------------------------------------------------------------------
# The basic example, every metric by hand


@pytest.fixture
def basic():
    # v = [1, 2, 0.5, -3]; k differs by one fp16 ulp at index 1 and two at index 3
    v = f16(1.0, 2.0, 0.5, -3.0)
    k = f16(1.0, 2.0 + 2**-9, 0.5, -(3.0 + 2**-8))
    return compare(v, k)


def test_counts_and_epsilon(basic):
    r = basic
    assert (r.n, r.n_exact, r.n_eps1, r.n_eps_ge2, r.n_eps_other) == (4, 2, 1, 1, 0)
    # index 3: |d| = 2**-8, min(|v|, |k|) = 3 in binade [2, 4): ulp 2**-9, so 2 ulps
    assert r.max_epsilon_diff == 2.0
    assert r.at_max["epsilon_diff"].coords == (3,)


def test_abs_rel_and_averages(basic):
    r = basic
    assert r.max_abs_diff == 2**-8
    assert r.ave_abs_diff == (2**-9 + 2**-8) / 4
    assert r.max_rel_diff == 2**-8 / 3
    assert r.max_rel_diff_old == 2**-8 / 3
    assert r.ave_rel_diff == pytest.approx((2**-9 / 2 + 2**-8 / 3) / 4, rel=1e-15)
    # RMS: sqrt(2**-18 + 2**-16) / (sqrt(4) * max magnitude 3 + 2**-8)
    assert r.rms == pytest.approx(math.sqrt(5 * 2**-18) / (2 * (3 + 2**-8)), rel=1e-15)
    assert r.miopen_rms == r.rms


def test_mlu_ops_set(basic):
    r = basic
    assert r.diff1 == pytest.approx((2**-9 + 2**-8) / (1 + 2 + 0.5 + 3 + 1e-9), rel=1e-15)
    assert r.diff2 == pytest.approx(math.sqrt((2**-18 + 2**-16) / (1 + 4 + 0.25 + 9 + 1e-9)),
                                    rel=1e-15)  # fmt: skip
    # every |b| >= th = 1e-4: all relative (denominator |b| + 1e-9), no absolute part
    assert r.diff3 == (pytest.approx(2**-8 / (3 + 1e-9), rel=1e-15), 0.0)
    assert r.diff3_1 == 2**-8 / 3
    assert r.diff3_2 == 2**-8
    # two distinct mismatches: k > v at index 1, k < v at index 3
    assert r.diff4 == (0.5, 0.5, 2)
    assert r.diff4_all == (0.5, 0.5, 2)
    assert r.diff4_value == -1.0  # fewer than 100 distinct mismatches: unused


def test_allclose_and_native(basic):
    r = basic
    # torch fp16: index 1 2**-9 <= 1e-5 + 1e-3*2; index 3 2**-8 > 1e-5 + 1e-3*3
    assert (r.allclose.rtol, r.allclose.atol) == TORCH_TOLERANCES["fp16"]
    assert (r.allclose.n_fail, r.allclose.first_fail) == (1, 3)
    # fp16 arithmetic: 2**-8 / 3 = 2**-10 * 1.0101010101|0101... rounds down to 1365 * 2**-20
    assert r.max_rel_diff_old_native == 1365 * 2**-20


def test_histograms(basic):
    r = basic
    assert r.epsilon_histogram.labels == EPSILON_BUCKETS
    assert r.epsilon_histogram.as_dict() == {
        "0": 2,
        "(0,1]": 1,
        "(1,2]": 1,
        "(2,10]": 0,
        "(10,100]": 0,
        ">100": 0,
        "nonfinite": 0,
    }
    assert r.epsilon_histogram.percent[:3] == (50.0, 25.0, 25.0)
    rel = r.rel_old_histogram.as_dict()
    assert r.rel_old_histogram.labels == REL_OLD_BUCKETS
    assert rel["0"] == 2 and rel["[1e-4,1e-3)"] == 1 and rel["[1e-3,1e-2)"] == 1
    assert sum(r.rel_old_histogram.counts) == r.n


def test_worst_elements(basic):
    w = basic.worst
    assert [e.index for e in w] == [3, 1]
    e = w[0]
    assert (e.validation, e.kernel) == (-3.0, -(3.0 + 2**-8))
    assert (e.validation_bits, e.kernel_bits) == ("0xc200", "0xc202")  # two ulps of 2**-9
    assert (e.abs_diff, e.epsilon_diff) == (2**-8, 2.0)
    assert e.rel_diff == 2**-8 / 3


# ------------------------------------------------------------------------------------------------
# Edge cases


def test_v_zero_uses_min_magnitude_and_skips_relative():
    r = compare(f16(0.0, 1.0), f16(2**-24, 1.0))
    # min(|v|, |k|) = 0: subnormal spacing 2**-24, so one ulp
    assert (r.n_eps1, r.max_epsilon_diff, r.max_abs_diff) == (1, 1.0, 2**-24)
    assert r.max_rel_diff == 0.0 and r.ave_rel_diff == 0.0  # v = 0 has no relative error
    assert r.at_max["rel_diff"] is None
    assert r.rel_old_histogram.as_dict()["v == 0"] == 1
    assert r.diff3 == (0.0, 2**-24)  # |b| < 1e-4: absolute part


def test_both_zero_signs_are_exact():
    r = compare(f16(0.0, -0.0, 0.0), f16(-0.0, 0.0, 0.0))
    assert (r.n_exact, r.max_abs_diff, r.rms, r.diff1, r.diff2) == (3, 0.0, 0.0, 0.0, 0.0)
    assert r.epsilon_histogram.as_dict()["0"] == 3
    assert r.rel_old_histogram.as_dict()["v == 0"] == 3


def test_inf_vs_inf_is_exact_and_counted_apart():
    r = compare(f16(np.inf, -np.inf, 1.0), f16(np.inf, -np.inf, 1.0))
    nf = r.nonfinite
    assert (r.n_exact, nf.n_inf, nf.n_inf_equal, nf.n_inf_mismatch) == (3, 2, 2, 0)
    assert (r.max_abs_diff, r.rms, r.allclose.n_fail) == (0.0, 0.0, 0)


def test_inf_mismatch_and_nan_stay_out_of_the_maxima():
    v = f16(65504.0, np.inf, np.nan, 1.0, np.nan)
    k = f16(np.inf, 65504.0, 1.0, 1.0 + 2**-10, np.nan)
    r = compare(v, k)
    nf = r.nonfinite
    assert (nf.n_nan, nf.n_nan_validation, nf.n_nan_kernel, nf.n_nan_both) == (2, 2, 1, 1)
    assert (nf.n_inf, nf.n_inf_equal, nf.n_inf_mismatch, nf.n_mismatch) == (2, 0, 2, 4)
    assert (r.n_exact, r.n_eps1, r.n_eps_ge2, r.n_eps_other) == (0, 1, 0, 0)
    assert r.n == r.n_exact + r.n_eps1 + r.n_eps_ge2 + r.n_eps_other + nf.n_mismatch
    assert (r.max_epsilon_diff, r.max_abs_diff) == (1.0, 2**-10)  # only the finite element
    assert math.isfinite(r.rms) and math.isfinite(r.ave_abs_diff)
    assert r.epsilon_histogram.as_dict()["nonfinite"] == 4
    assert [e.index for e in r.nonfinite_elements] == [0, 1, 2, 4]
    assert r.allclose.n_fail == 4  # NaN against NaN fails unless equal_nan
    assert compare(v, k, equal_nan=True).allclose.n_fail == 3


def test_subnormals():
    r = compare(f16(3 * 2**-24, 2**-14), f16(5 * 2**-24, 2**-14 + 2**-24))
    # below 2**-13 the spacing is 2**-24: two and one ulps
    assert (r.n_eps1, r.n_eps_ge2, r.max_epsilon_diff) == (1, 1, 2.0)
    assert r.worst[0].kernel_bits == "0x0005"


@pytest.mark.parametrize(
    ("v", "k", "ulp_eps", "below_eps"),
    [
        (0.25, 0.25 + 2**-12, 1.0, 2.0),  # study_results_2022.md §0 finding 3 / FILTER1
        (512.5, 512.0, 1.0, 2.0),  # finding 3's example
        (2**-13, 2**-13 + 2**-23, 1.0, 2.0),
        (2**-14, 2**-14 + 2**-24, 1.0, 1.0),  # 2**-24 on both sides of 2**-14
        (0.75, 0.75 + 2**-11, 1.0, 1.0),  # not a power of two
    ],
)
def test_powers_of_two(v, k, ulp_eps, below_eps):
    assert compare(f16(v), f16(k)).max_epsilon_diff == ulp_eps
    assert compare(f16(v), f16(k), study_quirks=STUDY_RUN_SETS["fair_1"]).max_epsilon_diff == below_eps
    assert compare(f16(v), f16(k), study_quirks=STUDY_RUN_SETS["fair_3"]).max_epsilon_diff == ulp_eps


def test_spacing_rules():
    x = [0.0, 2**-24, 2**-14, 2**-13, 0.25, 1.0, 1.5, 65504.0, 70000.0]
    assert list(spacing(x, "fp16") * 2**24) == [1, 1, 1, 2, 2**12, 2**14, 2**14, 2**29, 2**30]
    assert list(spacing(x, "fp16", rule="binade_below") * 2**24) == [1, 1, 1, 1, 2**11, 2**13, 2**14,
                                                              2**29, 2**30]  # fmt: skip
    assert np.isnan(spacing([np.inf, np.nan], "fp16")).all()
    assert spacing(1.0, "bf16") == 2**-7 and spacing(1.0, "fp32") == 2**-23
    assert spacing(1.0, "fp64") == 2**-52 and spacing(0.0, "fp64") == 2**-1074
    with pytest.raises(ValueError, match="binade_below"):
        spacing(1.0, "fp16", rule="nearest")


def test_spacing_equals_emu_ulp():
    rng = np.random.default_rng(5)
    x = np.concatenate([np.ldexp(1.0, np.arange(-40, 20)), rng.standard_normal(2000)
                        * np.logspace(-10, 5, 2000), [0.0, 65504.0]])  # fmt: skip
    for name, fmt in (("fp16", FP16), ("bf16", BF16), ("fp32", FP32)):
        np.testing.assert_array_equal(spacing(x, name), ulp(x, fmt))


def test_other_data_types_measure_in_their_own_ulps():
    one = 1.0
    for dt, step in ((ml_dtypes.bfloat16, 2**-7), (np.float32, 2**-23), (np.float64, 2**-52)):
        v = np.array([one, 3.0], dtype=dt)
        k = np.array([one + step, 3.0], dtype=dt)
        r = compare(v, k)
        assert (r.dtype, r.epsilon_format) == (resolve_dtype(dt),) * 2
        assert (r.n_eps1, r.max_epsilon_diff, r.max_abs_diff) == (1, 1.0, step)
    r = compare(np.array([1.0]), np.array([1.0 + 2**-52]), dtype_hint="fp16")
    assert r.epsilon_format == "fp16" and r.max_epsilon_diff == 2**-42
    assert r.n_eps_other == 1


def test_unrounded_validation_gives_fractional_epsilon_unless_rounded():
    v = np.array([1.0 + 2**-12], dtype=np.float32)  # a quarter ulp above 1.0 in fp16
    k = f16(1.0)
    r = compare(v, k)
    assert (r.max_epsilon_diff, r.n_eps_other) == (0.25, 1)
    r = compare(v, k, round_validation="fp16")
    assert (r.n_exact, r.round_validation) == (1, "fp16")
    assert r.worst == ()


def test_empty_inputs():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = compare(np.zeros(0, F16), np.zeros((0, 3), F16).reshape(0))
        d = r.to_dict()
    assert r.n == 0 and r.n_exact == 0
    for key in (
        "max_epsilon_diff",
        "max_abs_diff",
        "ave_abs_diff",
        "max_rel_diff",
        "max_rel_diff_old",
        "ave_rel_diff",
        "rms",
        "diff1",
        "diff2",
        "miopen_rms",
    ):
        assert d[key] == 0.0, key
    assert r.epsilon_histogram.percent == (0.0,) * len(EPSILON_BUCKETS)
    assert r.worst == () and r.at_max["epsilon_diff"] is None


def test_all_zero_inputs():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = compare(np.zeros((4, 5), F16), np.zeros((4, 5), F16))
    assert (r.n, r.n_exact, r.rms, r.miopen_rms, r.diff1, r.diff2) == (20, 20, 0.0, 0.0, 0.0, 0.0)
    assert r.diff4 == (None, None, 0)


def test_shapes_and_types_checked():
    with pytest.raises(ValueError, match="shapes differ"):
        compare(np.zeros(3, F16), np.zeros(4, F16))
    with pytest.raises(ValueError, match="valid names"):
        compare(np.zeros(3, F16), np.zeros(3, F16), dtype_hint="fp8")
    with pytest.raises(ValueError, match="fair_1, fair_2, fair_3, fair_rand0"):
        resolve_study_quirks("fair_9")
    with pytest.raises(ValueError, match="policy"):  # the metrics receive the rules, never a name
        compare(np.zeros(3, F16), np.zeros(3, F16), study_quirks="fair_3")
    with pytest.raises(TypeError, match="study policy"):
        compare(np.zeros(3, F16), np.zeros(3, F16), study_quirks=3)
    with pytest.raises(TypeError):
        compare(np.zeros(3, np.complex64), np.zeros(3, np.complex64))
    assert resolve_study_quirks(None) is None
    r = compare([1, 2], [1, 3])  # integers are read as float64
    assert r.dtype == "fp64" and r.max_abs_diff == 1.0


# ------------------------------------------------------------------------------------------------
# MLU-OPS details, allclose, the old verifier's fp16 arithmetic


def test_diff3_splits_at_the_fp16_threshold():
    v = f16(5e-5, 1.0)
    k = f16(6e-5, 1.0 + 2**-10)
    r = compare(v, k)
    d_small = float(F16(6e-5)) - float(F16(5e-5))
    assert r.diff3 == (pytest.approx(2**-10 / (1 + 1e-9), rel=1e-15), d_small)
    r32 = compare(v.astype(np.float32), k.astype(np.float32))  # th = 1e-6: both relative
    assert r32.diff3[1] == 0.0


def test_diff4_counts_distinct_pairs_and_one_sided_errors():
    base = np.arange(1, 151, dtype=np.float32).astype(F16)
    r = compare(base, (base.astype(np.float32) + 0.5).astype(F16))
    assert r.diff4 == (1.0, 0.0, 150)  # all 150 distinct pairs have k > v
    assert r.diff4_value == 0.0  # MLU-OPS: one-sided, >= 100 distinct: a failure value
    rep = np.tile(base[:50], 6)
    r = compare(rep, (rep.astype(np.float32) - 0.5).astype(F16))
    assert r.diff4 == (0.0, 1.0, 50) and r.diff4_all == (0.0, 1.0, 300)
    assert r.diff4_value == -1.0  # 50 distinct pairs: ignored
    # −0 and +0 are the same value for the evaluator's pair set
    r = compare(f16(0.0, -0.0), f16(1.0, 1.0))
    assert r.diff4[2] == 1


def test_allclose_matches_numpy_isclose():
    rng = np.random.default_rng(3)
    v = rng.standard_normal(5000).astype(np.float32)
    k = (v * (1 + rng.standard_normal(5000) * 1e-3)).astype(np.float32)
    v[::97] = 0.0
    for rtol, atol in ((1e-3, 1e-5), (1e-5, 1e-8), (0.0, 1e-4)):
        r = compare(v, k, allclose=(rtol, atol))
        expected = ~np.isclose(k.astype(np.float64), v.astype(np.float64), rtol=rtol, atol=atol)
        assert r.allclose.n_fail == int(expected.sum())
        assert r.allclose.first_fail == int(np.argmax(expected))


def test_native_magnitude_rule_excludes_fp16_of_0_001():
    # in fp16, 0.001 rounds to 0.0010004043579…, and |v| > that is strict (kernels doc §2(f))
    v = f16(0.001, 2.0)
    k = f16(0.0, 2.0)
    r = compare(v, k)
    assert float(v[0]) == 0.0010004043579101562
    assert r.max_rel_diff_old == 1.0  # float64 mode: |v| > 1e-3 (REL_OLD_THRESHOLD)
    assert r.max_rel_diff_old_native == 0.0  # the old verifier: |v| > fp16(0.001), strict
    r32 = compare(v.astype(np.float32), k.astype(np.float32))
    assert r32.max_rel_diff_old_native == 1.0  # no magnitude rule from 32 bits up


def test_native_quotient_fails_v_zero_from_32_bits():
    r = compare(np.array([0.0, 1.0], np.float32), np.array([1e-3, 1.0], np.float32))
    assert r.max_rel_diff_old_native == math.inf


def test_numpy_casts_round_like_emu():
    """round_rne relies on numpy's float64 → float16 / float32 casts being single RNE roundings."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal(200_000) * np.exp2(rng.integers(-30, 20, 200_000))
    h = np.arange(0, 0x7C00, dtype=np.uint16).view(F16).astype(np.float64)
    mid = (h[:-1] + h[1:]) / 2  # every fp16 tie, subnormal ones included
    edges = [65519.99, 65520.0, np.inf, -np.inf]  # around the overflow threshold
    x = np.concatenate([x, mid, -mid, np.nextafter(mid, 0), np.nextafter(mid, 1), edges])
    for name, fmt in (("fp16", FP16), ("fp32", FP32), ("bf16", BF16)):
        got = round_rne(x, name).astype(fmt.float_dtype).view(fmt.uint_dtype)
        np.testing.assert_array_equal(got, round_float64(x, fmt, "rne"), err_msg=name)


# ------------------------------------------------------------------------------------------------
# Coordinates, chunking, layouts


def test_worst_coordinates_and_ties():
    v = np.ones((2, 3, 4), F16)
    k = v.copy()
    k[1, 2, 3] = 1.5  # 512 ulps
    k[0, 1, 2] = 1.0 + 2**-9  # 2 ulps
    k[1, 0, 0] = 1.0 + 2**-9  # 2 ulps, later: ranks after the first
    r = compare(v, k, top=2)
    assert [e.coords for e in r.worst] == [(1, 2, 3), (0, 1, 2)]
    assert r.at_max["epsilon_diff"].coords == (1, 2, 3)
    assert r.worst[0].index == int(np.ravel_multi_index((1, 2, 3), v.shape))


def test_first_maximum_is_kept_across_chunks():
    v = np.ones(50, F16)
    k = v.copy()
    k[[7, 31, 44]] = 1.0 + 2**-8  # the same error three times
    for chunk in (1, 5, 8, 1000):
        r = compare(v, k, chunk=chunk)
        assert r.at_max["epsilon_diff"].index == 7
        assert r.at_max["abs_diff"].index == 7
        assert [e.index for e in r.worst] == [7, 31, 44]


def test_non_contiguous_inputs_are_read_in_row_major_order():
    rng = np.random.default_rng(2)
    v = rng.standard_normal((30, 40)).astype(F16)
    k = (v.astype(np.float32) * (1 + rng.standard_normal((30, 40)) * 1e-3)).astype(F16)
    a = compare(v.T, k.T, chunk=77).to_dict()
    b = compare(np.ascontiguousarray(v.T), np.ascontiguousarray(k.T), chunk=77).to_dict()
    assert a == b


_f16_values = st.sampled_from([0.0, -0.0, 2**-24, 3 * 2**-24, 2**-14, 2**-13, 0.25, 0.2502441,
                               1.0, -1.0, 1.5, 512.0, 512.5, 65504.0, -65504.0, math.inf,
                               -math.inf, math.nan, 1e-3, 2e-3, -0.5])  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(
    v=hnp.arrays(F16, st.integers(0, 40), elements=_f16_values),
    noise=st.lists(st.sampled_from([0, 1, -1, 2, 7, 300]), min_size=40, max_size=40),
    chunk=st.integers(1, 9),
    run_set=st.sampled_from([None, *STUDY_RUN_SETS]),
)
def test_chunking_does_not_change_the_result(v, noise, chunk, run_set):
    bits = v.view(np.uint16).astype(np.int64) + np.array(noise[: v.size], dtype=np.int64)
    k = np.clip(bits, 0, 0xFFFF).astype(np.uint16).view(F16)
    one = compare(v, k, study_quirks=resolve_study_quirks(run_set)).to_dict()
    many = compare(v, k, study_quirks=resolve_study_quirks(run_set), chunk=chunk).to_dict()
    # float64 sums are pairwise per chunk: equal up to rounding; the study's sums are taken in
    # element order, so its headline metrics are identical
    pairwise = ("diff1", "diff2", "miopen_rms")
    if run_set is None:
        pairwise += ("ave_abs_diff", "ave_rel_diff", "rms")
    for key in pairwise:
        a, b = one.pop(key), many.pop(key)
        assert a == b or a == pytest.approx(b, rel=1e-12), key
    assert one == many
    n = one["n"]
    for h in one["histograms"].values():
        assert sum(h["counts"]) == n


# ------------------------------------------------------------------------------------------------
# The study's C verifier, line for line


def _interval_binade_below(val):
    """halfFloatInterval of the indexed code (id 15058583413), transcribed."""
    p = [np.float32(2.0) ** np.float32(i - 24) for i in range(41)]
    a = np.float32(abs(val))
    if a <= p[11]:
        return p[0]
    for e in range(-13, 16):
        if p[e + 24] < a <= p[e + 25]:
            return p[e + 14]
    return np.float32(0.0)


def _interval_ulp(val):
    """The fixed interval of fair_3 / fair_rand0: the fp16 ulp, binades [2^e, 2^(e+1))."""
    a = np.float32(abs(val))
    if a < np.float32(2.0**-14):
        return np.float32(2.0**-24)
    for e in range(-14, 16):
        if np.float32(2.0**e) <= a < np.float32(2.0 ** (e + 1)):
            return np.float32(2.0 ** (e - 10))
    return np.float32(0.0)


def _c_printf(spec, x):
    if math.isnan(x):
        return "-nan" if math.copysign(1.0, x) < 0 else "nan"
    return spec % x


def _c_verifier_line(cpu, gpu, quirks):
    """mcpuVerify5DFloatFloat transcribed statement by statement on numpy float32 scalars (slow
    oracle): ``cpu`` already rounded to fp16 and back, both float32 lists."""
    f32 = np.float32
    interval = _interval_binade_below if quirks.epsilon_rule == "binade_below" else _interval_ulp
    n = len(cpu)
    max_abs = max_eps = max_mag = f32(0)
    thr = f32(1.0004e-03)
    sum_abs = max_rel = max_old = sum_rel = sum_sq = 0.0
    cnt_exact = cnt_eps = cnt_large = cnt_unknown = 0
    max_c = max_g = old_c = old_g = f32(0)

    def std_max(a, b):
        return b if a < b else a

    with np.errstate(all="ignore"):
        for c, g in zip(cpu, gpu):
            c, g = f32(c), f32(g)
            max_mag = std_max(max_mag, std_max(f32(abs(c)), f32(abs(g))))
            if c == g:
                cnt_exact += 1
                continue
            absd = f32(abs(f32(c - g)))
            ag, ac = f32(abs(g)), f32(abs(c))
            eps = f32(absd / interval(ag if ag < ac else ac))
            if eps == f32(1.0):
                cnt_eps += 1
            elif eps >= f32(2.0):
                cnt_large += 1
            else:
                cnt_unknown += 1
            if eps > max_eps:
                max_c, max_g = c, g
            max_eps = std_max(max_eps, eps)
            max_abs = std_max(max_abs, absd)
            sum_abs += float(absd)
            sum_sq += float(absd) * float(absd)
            if c != f32(0):
                rel = float(absd) / float(ac)
                max_rel = std_max(max_rel, rel)
                if (c > thr) if quirks.rel_old_signed else (ac > thr):
                    if rel > max_old:
                        max_old = std_max(max_old, rel)
                        old_c, old_g = c, g
                sum_rel += rel
        nn = np.float64(n)
        ave_abs = float(np.float64(sum_abs) / nn)
        ave_rel = float(np.float64(sum_rel) / nn)
        rms = float(np.sqrt(np.float64(sum_sq)) / (np.float64(max_mag) * np.sqrt(nn)))
    p = _c_printf
    head = (
        f"{n:<10d} ({cnt_exact} {cnt_eps} {cnt_large} {cnt_unknown}) "
        f"{p('%.1f', float(max_eps))} ({p('%.10f', float(max_c))} {p('%.10f', float(max_g))})"
    )
    if quirks.line_format == "A":
        return head + "".join("  " + p(s, float(x)) for s, x in (
            ("%f", max_abs), ("%f", ave_abs), ("%.1e", max_rel), ("%.1e", max_old),
            ("%.1e", ave_rel), ("%.1e", rms)))  # fmt: skip
    return head + (f" {p('%f', float(max_abs))} {p('%f', ave_abs)} {p('%.1e', max_rel)} "
                   f"{p('%.1e', max_old)} ({p('%.10f', float(old_c))} {p('%.10f', float(old_g))}) "
                   f"{p('%.1e', ave_rel)} {p('%.1e', rms)}")  # fmt: skip


_SPECIALS = np.array([0.0, -0.0, 2**-24, -(2**-24), 2**-14, 2**-13, 2**-13 + 2**-23, 0.25,
                      0.2502441406, 512.0, 512.5, 65504.0, -65504.0, np.inf, -np.inf, np.nan,
                      1e-3, -2e-3, 0.0010004043579, 0.00099992752])  # fmt: skip


@pytest.mark.parametrize("run_set", list(STUDY_RUN_SETS))
def test_study_mode_matches_the_c_verifier_loop(run_set):
    quirks = STUDY_RUN_SETS[run_set]
    rng = np.random.default_rng(list(STUDY_RUN_SETS).index(run_set))
    for trial in range(12):
        n = int(rng.integers(0, 250))
        noise = rng.standard_normal(n) * rng.choice([0.0, 1e-4, 1e-3, 1e-1], n)
        with np.errstate(over="ignore"):
            k = (rng.standard_normal(n) * rng.choice([1e-4, 1e-2, 1.0, 100.0, 3e4], n)).astype(F16)
            v = (k.astype(np.float64) * (1 + noise)).astype(np.float32)
        if n and trial % 2:
            m = rng.integers(0, n, size=max(1, n // 8))
            v[m] = rng.choice(_SPECIALS, len(m))
            k[m[::2]] = rng.choice(_SPECIALS, len(m[::2])).astype(F16)
        with np.errstate(over="ignore"):
            v_rounded = v.astype(F16).astype(np.float32)  # what the instrumented build compared
        expected = _c_verifier_line(list(v_rounded), list(k.astype(np.float32)), quirks)
        got = format_study_line(
            compare(v, k, study_quirks=resolve_study_quirks(run_set), chunk=int(rng.integers(1, 64)))
        )
        assert got == expected, (trial, n)


def test_study_mode_overflow_artifacts():
    # r5 rows: inf against 65504 gives inf maxima and -nan averages; equal infinities make
    # maxMag inf and RMS 0 (study_results_2022.md §1, "Overflow and NaN artifacts")
    r = compare(np.array([65504.0, np.inf, 1.0], np.float32), f16(np.inf, 65504.0, 1.0),
                study_quirks=STUDY_RUN_SETS["fair_2"])  # fmt: skip
    assert format_study_line(r) == ("3          (1 0 2 0) inf (65504.0000000000 inf) inf inf inf "
                                    "inf (65504.0000000000 inf) -nan -nan")  # fmt: skip
    assert r.nonfinite.n_inf_mismatch == 2  # still counted apart
    r = compare(f16(np.inf, 1.5), f16(np.inf, 1.5 + 2**-10), study_quirks=STUDY_RUN_SETS["fair_2"])
    assert r.rms == 0.0 and r.max_epsilon_diff == 1.0
    assert format_study_line(r).endswith(" 0.0e+00")


def test_study_mode_rounds_validation_through_float32_then_fp16():
    # a float64 validation is first a float ((float)acc), then truncf to f16: double rounding
    tie32 = 1.0 + 2**-11 + 2**-40  # float32 rounds it to the fp16 tie 1 + 2**-11, then RNE → 1.0
    r = compare(np.array([tie32]), f16(1.0), study_quirks=STUDY_RUN_SETS["fair_3"])
    assert r.n_exact == 1
    assert compare(np.array([tie32]), f16(1.0), round_validation="fp16").n_exact == 0


# ------------------------------------------------------------------------------------------------
# Output


def test_to_dict_has_the_stable_keys_and_is_json(basic):
    d = basic.to_dict()
    assert tuple(d)[: len(STABLE_KEYS)] == STABLE_KEYS
    assert d["flags"] == [] and d["verdict"] is None
    assert d["diff3"] == [basic.diff3[0], 0.0] and d["diff4"] == [0.5, 0.5, 2]
    assert d["worst"][0]["coords"] == [3]
    json.dumps(d, allow_nan=False)
    r = compare(f16(np.inf, np.nan), f16(1.0, 1.0), study_quirks=STUDY_RUN_SETS["fair_3"])
    d = r.to_dict()
    assert d["max_abs_diff"] == "inf" and d["ave_rel_diff"] == "nan"
    json.dumps(d, allow_nan=False)


def test_plot_and_summary(basic):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ax = basic.plot()
    assert len(ax.patches) == len(EPSILON_BUCKETS)
    assert [t.get_text() for t in ax.get_xticklabels()] == list(EPSILON_BUCKETS)
    plt.close(ax.figure)
    short = basic.format_text()
    assert "maxEpsilonDiff 2" in short and "0xc202" not in short
    text = basic.summary()  # the full report: histograms, maxima, worst elements
    assert "relDiff_old: 0 2 (50%)" in text and "(3,): v -3.0 (0xc200)" in text


# ------------------------------------------------------------------------------------------------
# Memory


def test_streaming_keeps_memory_flat():
    """50 M elements: the working memory stays at a few chunk-sized buffers (a float64 copy of
    one input alone would be 400 MB)."""
    n = 50_000_000
    k = (np.arange(n, dtype=np.uint32) % 30000).astype(np.uint16).view(F16)  # finite fp16 values
    v = k.copy()
    bumped = v.view(np.uint16)[::1000]
    bumped += 1  # one ulp (or a step into the next binade) every 1000 elements
    tracemalloc.start()
    try:
        r = compare(v, k)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.n == n and r.n_exact + r.n_eps1 + r.n_eps_ge2 + r.n_eps_other == n
    assert r.n - r.n_exact == n // 1000
    assert peak < 160 * 2**20, f"peak {peak / 2**20:.0f} MiB"


def test_compare_without_distinct_pairs_changes_only_diff4():
    """distinct_pairs=False (the design sweep's comparisons) skips diff4's pair sort: every other
    field is the same, diff4 says it was not measured, and reading it raises."""
    rng = np.random.default_rng(11)
    v = rng.uniform(-4, 4, 6000).astype(F16)
    k = (v.astype(np.float32) * (1 + rng.standard_normal(6000).astype(np.float32) * 2e-3)).astype(F16)
    k[::7] = v[::7]  # equal elements
    v[5], k[6], v[8], k[8] = np.nan, np.inf, -0.0, 0.0  # non-finite and signed zeros
    k[9:400] = (v[9:400].astype(np.float32) + 0.25).astype(F16)  # > 100 distinct one-sided pairs
    for quirks in (None, STUDY_RUN_SETS["fair_1"]):
        full = compare(v, k, study_quirks=quirks, chunk=1000)
        fast = compare(v, k, study_quirks=quirks, chunk=1000, distinct_pairs=False)
        assert full.diff4_measured and not fast.diff4_measured
        assert full.diff4_distinct and full.diff4 != full.diff4_all  # the pairs did matter here
        assert fast.diff4 == fast.diff4_all == full.diff4_all and not fast.diff4_distinct
        a, b = full.to_dict(), fast.to_dict()
        assert b.pop("diff4_measured") is False and "diff4_measured" not in a
        for key in ("diff4", "diff4_distinct"):
            a.pop(key), b.pop(key)
        assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
        with pytest.raises(ValueError, match="diff4 was not measured"):
            fast.metric("diff4")
        assert full.metric("diff4") == full.diff4_value  # measured: readable
