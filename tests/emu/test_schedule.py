"""emu.Schedule: splits as k-tile ranges, reductions, residue tiles, instruction K and the fp32
epilogue, each checked bit for bit against an independent composition (the pure-Python exact
reference for the chains, Python fractions for the epilogue's one rounding)."""

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import emu
import models
from emu.gemm import fma32, reduce_partials
from emu.schedule import Schedule
from tests.exact_reference import reference_dot_add


def _bits(x):
    x = np.asarray(x)
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


@pytest.fixture(scope="module")
def operands():
    rng = np.random.default_rng(11)
    A = rng.uniform(-1, 1, (3, 200)).astype(np.float16)
    B = rng.uniform(-1, 1, (200, 4)).astype(np.float16)
    # adversarial columns: a wide exponent span, exact cancellation, subnormals
    A[0, :16] = np.float16(2.0**-20)
    A[1, 40:48] = np.float16(60000.0)
    B[40:48, 1] = np.float16(1.0)
    A[1, 48:56] = np.float16(-60000.0)
    B[48:56, 1] = np.float16(1.0)
    return A, B


def _chain(a, b, c_bits, unit):
    """One chain through the exact reference: fp32 bits of c + a·b in the unit's groups."""
    return reference_dot_add(
        [int(x) for x in a.view(np.uint16)], [int(x) for x in b.view(np.uint16)], c_bits, unit.params
    )


def _f32(bits):
    return np.uint32(bits).view(np.float32)


def test_split_ranges_follow_the_rule():
    # cuBLAS nvjet split-K on K = 4096: 64 tiles of 64, 3 splits of ⌈64/3⌉ = 22 tiles
    ceil = Schedule(k_tile=64, splits=3, split_rule="ceil").split_ranges(4096)
    assert [(r.start, r.stop) for r in ceil] == [(0, 1408), (1408, 2816), (2816, 4096)]
    even = Schedule(k_tile=64, splits=3).split_ranges(4096)
    assert [(r.start, r.stop) for r in even] == [(0, 1344), (1344, 2752), (2752, 4096)]
    given = Schedule(k_tile=16, splits=2, split_bounds=(0, 1, 7)).split_ranges(100)
    assert [(r.start, r.stop) for r in given] == [(0, 16), (16, 100)]
    with pytest.raises(ValueError, match="splits: 5 splits"):
        Schedule(k_tile=64, splits=5, split_rule="ceil").split_ranges(384)  # ⌈6/5⌉ = 2 leaves 2 empty


@pytest.mark.parametrize("reduction", ["sequential", "tree"])
@pytest.mark.parametrize("name", ["h100", "mi300", "fma32"])
def test_splits_are_chains_from_zero_reduced_in_fp32(operands, name, reduction):
    A, B = operands
    unit = models.unit(name)
    sched = Schedule(k_tile=16, splits=5, split_rule="ceil", reduction=reduction)
    got = emu.gemm(A, B, None, unit, sched)
    for m in range(A.shape[0]):
        for n in range(B.shape[1]):
            parts = [_f32(_chain(A[m, r], B[r, n], 0, unit)) for r in sched.split_ranges(A.shape[1])]
            if reduction == "sequential":
                acc = parts[0]
                for p in parts[1:]:
                    acc = np.float32(acc + p)
            else:
                level = parts
                while len(level) > 1:
                    level = [
                        np.float32(level[i] + level[i + 1]) if i + 1 < len(level) else level[i]
                        for i in range(0, len(level), 2)
                    ]
                acc = level[0]
            assert _bits(got[m, n]) == _bits(np.float32(acc)), (m, n)


def test_seven_splits_reduced_by_a_tree_of_halves(operands):
    """``"bisection"``: the first ⌊n/2⌋ partials, the rest, then the two; for 7 splits
    (p0 + (p1+p2)) + ((p3+p4) + (p5+p6)), written out here, each partial a chain of the exact
    reference. The adversarial rows (a wide exponent span, cancellation) make the orders differ."""
    A, B = operands
    unit = models.unit("h100")
    sched = Schedule(k_tile=8, splits=7, split_rule="ceil", reduction="bisection")
    got = emu.gemm(A, B, None, unit, sched)
    for m in range(A.shape[0]):
        for n in range(B.shape[1]):
            p = [_f32(_chain(A[m, r], B[r, n], 0, unit)) for r in sched.split_ranges(A.shape[1])]
            left = np.float32(p[0] + np.float32(p[1] + p[2]))
            right = np.float32(np.float32(p[3] + p[4]) + np.float32(p[5] + p[6]))
            assert _bits(got[m, n]) == _bits(np.float32(left + right)), (m, n)


def test_a_tree_of_halves_differs_from_the_pairwise_tree_only_off_powers_of_two():
    """Seven partials where the pairwise tree ((p0+p1)+(p2+p3)) + ((p4+p5)+p6) loses what the tree
    of halves keeps; for four, both are (p0+p1) + (p2+p3)."""
    big, one = np.float32(2.0**25), np.float32(1.0)
    seven = [np.array([v], np.float32) for v in (one, one, one, big, -big, one, one)]
    halves = reduce_partials(seven, Schedule(splits=7, reduction="bisection"))
    pairs = reduce_partials(seven, Schedule(splits=7, reduction="tree"))
    # halves: (1 + (1+1)) + ((2^25 − 2^25) + (1+1)) = 5; pairs: ((1+1) + (1 + 2^25)) + ((−2^25 + 1) + 1),
    # where the 1s beside ±2^25 are rounded away
    assert _bits(halves) == _bits(np.array([5.0], np.float32))
    assert _bits(pairs) != _bits(halves)
    four = [np.array([v], np.float32) for v in (big, one, -big, one)]
    assert _bits(reduce_partials(four, Schedule(splits=4, reduction="bisection"))) == _bits(
        reduce_partials(four, Schedule(splits=4, reduction="tree"))
    )


def test_strided_lanes_reduced_by_a_halving_tree(operands):
    A, B = operands
    unit = models.unit("fma32")
    sched = Schedule(splits=8, split_rule="strided", reduction="halving")
    got = emu.gemm(A, B, None, unit, sched)
    for m in range(A.shape[0]):
        for n in range(B.shape[1]):
            lanes = [_f32(_chain(A[m, t::8], B[t::8, n], 0, unit)) for t in range(8)]
            level = lanes
            while len(level) > 1:  # an xor butterfly's lane 0: i + i⊕4, then i + i⊕2, then i + i⊕1
                half = len(level) // 2
                level = [np.float32(level[i] + level[i + half]) for i in range(half)]
            assert _bits(got[m, n]) == _bits(level[0]), (m, n)


def test_a_gemm_order_is_the_same_schedule(operands):
    A, B = operands
    unit = models.unit("mi200")
    C = np.random.default_rng(2).uniform(-1, 1, (3, 4)).astype(np.float32)
    for order in (
        emu.GemmOrder(),
        emu.GemmOrder(split_k=3),
        emu.GemmOrder(split_k=4, combine="random", combine_seed=5),
    ):
        sched = order.schedule()
        np.testing.assert_array_equal(_bits(emu.gemm(A, B, C, unit, order)), _bits(emu.gemm(A, B, C, unit, sched)))
    # and the workspace is C, the partials added onto it one by one
    sched = emu.GemmOrder(split_k=3).schedule()
    parts = [emu.gemm(A[:, r], B[r], None, unit) for r in sched.split_ranges(200)]
    want = C.copy()
    for p in parts:
        want = (want + p).astype(np.float32)
    np.testing.assert_array_equal(_bits(emu.gemm(A, B, C, unit, sched)), _bits(want))


def test_the_residue_tile_comes_first_zero_filled(operands):
    A, B = operands
    unit = models.unit("h100")
    sched = Schedule(k_tile=8, splits=2, split_rule="ceil", residue_tile=64)  # splits of 104 and 96
    got = emu.gemm(A, B, None, unit, sched)
    want = None
    for r in sched.split_ranges(200):
        rem = (r.stop - r.start) % 64
        idx = list(range(r.start, r.start + rem)) + [-1] * ((64 - rem) % 64) + list(range(r.start + rem, r.stop))
        a = np.where(np.array(idx)[None] < 0, np.float16(0), A[:, np.maximum(idx, 0)])
        b = np.where(np.array(idx)[:, None] < 0, np.float16(0), B[np.maximum(idx, 0)])
        part = emu.gemm(a, b, None, unit)
        want = part if want is None else (want + part).astype(np.float32)
    np.testing.assert_array_equal(_bits(got), _bits(want))
    # the group boundaries moved: not the plain split
    plain = emu.gemm(A, B, None, unit, Schedule(k_tile=8, splits=2, split_rule="ceil"))
    assert not np.array_equal(_bits(got), _bits(plain))


def test_instruction_k_fuses_fewer_products(operands):
    A, B = operands
    unit = models.unit("h100")
    got = emu.gemm(A, B, None, unit, Schedule(instruction_k=8))
    narrow = unit.params._replace(group_size=8)
    for m in range(A.shape[0]):
        for n in range(B.shape[1]):
            want = reference_dot_add(
                [int(x) for x in A[m].view(np.uint16)], [int(x) for x in B[:, n].view(np.uint16)], 0, narrow
            )
            assert int(_bits(got[m, n])) == want
    with pytest.raises(ValueError, match="instruction_k: 32 is wider"):
        emu.gemm(A, B, None, unit, Schedule(instruction_k=32))


def _fraction_fma32(a, b, c):
    """RNE32 of a·b + c, exactly, from fractions."""
    x = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    lo = np.float32(float(x))
    # float(x) rounds to binary64 first; step to the fp32 neighbours and take the nearest (even on a tie)
    cands = sorted({lo, np.nextafter(lo, np.float32(np.inf)), np.nextafter(lo, np.float32(-np.inf))}, key=float)
    best = min(cands, key=lambda v: (abs(Fraction(float(v)) - x), int(_bits(np.float32(v))) & 1))
    return np.float32(best)


def test_the_epilogue_is_one_fp32_rounding():
    rng = np.random.default_rng(5)
    a = rng.uniform(-4, 4, 2000).astype(np.float32)
    b = rng.uniform(-4, 4, 2000).astype(np.float32)
    c = (rng.uniform(-1, 1, 2000) * 2.0 ** rng.integers(-30, 30, 2000)).astype(np.float32)
    # ties and near-ties that a product rounded first would get wrong
    a[:4] = np.float32(1 + 2.0**-23)
    b[:4] = np.float32(1 + 2.0**-23)
    c[:4] = np.float32(-1.0), np.float32(2.0**-24), np.float32(-(2.0**-47)), np.float32(0.0)
    got = fma32(a, b, c)
    want = np.array([_fraction_fma32(x, y, z) for x, y, z in zip(a, b, c)], np.float32)
    np.testing.assert_array_equal(_bits(got), _bits(want))


def test_alpha_beta_epilogue_and_bias(operands):
    A, B = operands
    unit = models.unit("h100")
    C = np.random.default_rng(4).uniform(-1, 1, (3, 4)).astype(np.float32)
    acc = emu.gemm(A, B, None, unit)
    got = emu.gemm(A, B, C, unit, Schedule(c_entry="epilogue", alpha=0.5, beta=2.0))
    want = fma32(np.float32(0.5), acc, (np.float32(2.0) * C).astype(np.float32))
    np.testing.assert_array_equal(_bits(got), _bits(want))
    bias = C[0]  # one value per column, broadcast
    got16 = emu.gemm(A, B, bias, unit, Schedule(c_entry="epilogue", output="fp16"))
    with np.errstate(over="ignore"):  # the ±60000 rows overflow fp16: inf, as the GPU gives
        want16 = (acc + bias).astype(np.float32).astype(np.float16)
    np.testing.assert_array_equal(_bits(got16), _bits(want16))
    assert got16.dtype == np.float16


def test_c_added_to_the_stored_output_is_rounded_twice():
    """``c_entry="output"``: the sum rounded to the output format, then C added and rounded again.
    1 + 2^-11 (a tie in fp16) plus C = 2^-11: stored as 1 (ties to even), then 1 + 2^-11 → 1;
    in one epilogue 1 + 2^-10, an fp16 value. Worked by hand, not by the code under test."""
    unit = models.unit("h100")
    A = np.array([[1.0, 2.0**-11]], np.float16)
    B = np.array([[1.0], [1.0]], np.float16)
    C = np.array([[2.0**-11]], np.float32)
    once = emu.gemm(A, B, C, unit, Schedule(c_entry="epilogue", output="fp16"))
    twice = emu.gemm(A, B, C, unit, Schedule(c_entry="output", output="fp16"))
    assert float(once[0, 0]) == 1 + 2.0**-10 and float(twice[0, 0]) == 1.0
    # alpha 2, beta 1/2: 2 + 2^-10 is a tie at 2 (stored 2), 2 + 2^-12 → 2; one epilogue: 2 + 2^-9
    ab = dict(alpha=2.0, beta=0.5, output="fp16")
    assert float(emu.gemm(A, B, C, unit, Schedule(c_entry="output", **ab))[0, 0]) == 2.0
    assert float(emu.gemm(A, B, C, unit, Schedule(c_entry="epilogue", **ab))[0, 0]) == 2 + 2.0**-9
    assert "then C added to it and rounded again" in Schedule(c_entry="output").describe()


def test_bad_fields_name_themselves(operands):
    A, B = operands
    for kwargs, field in (
        ({"splits": 0}, "splits"),
        ({"reduction": "atomic"}, "reduction"),
        ({"c_entry": "somewhere"}, "c_entry"),
        ({"beta": 2.0}, "beta"),
        ({"alpha": 0.1}, "alpha"),
        ({"output": "fp8"}, "output"),
        ({"k_order": (0, 0)}, "k_order"),
    ):
        with pytest.raises(ValueError, match=f"^{field}:"):
            Schedule(**kwargs)
    with pytest.raises(ValueError, match=r"C: shape \(5,\) does not broadcast"):
        emu.gemm(A, B, np.zeros(5, np.float32), models.unit("h100"))


def test_promotion_interval_is_consecutive_intervals_added_in_fp32():
    """Two-level accumulation (CUTLASS GmmaFP8Accumulation): the unit from +0 over each interval
    of promotion_interval k tiles, the interval results added into fp32 in order. Expected: the
    exact reference on each interval and float64 adds of float32 values rounded once each (the
    sum of two fp32 values is exact in float64)."""
    unit = models.unit("h100", input=("e4m3", "e5m2"))
    rng = np.random.default_rng(7)
    K = 320  # 2 intervals of 128 and a short one of 64
    a = rng.uniform(-8, 8, (3, K)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.uniform(-8, 8, (K, 5)).astype(ml_dtypes.float8_e5m2)
    a[:, :32] = ml_dtypes.float8_e4m3fn(448.0)  # a big first interval: E8M13 drops the others' low bits
    sch = emu.Schedule(k_tile=32, promotion_interval=4)
    got = emu.gemm(a, b, None, unit, sch)
    expected = np.zeros((3, 5), np.float32)
    a8, b8 = a.view(np.uint8), b.view(np.uint8)
    for lo in range(0, K, 128):
        part = np.array(
            [
                [
                    reference_dot_add(a8[m, lo : lo + 128].tolist(), b8[lo : lo + 128, n].tolist(), 0, unit.params)
                    for n in range(5)
                ]
                for m in range(3)
            ],
            np.uint32,
        ).view(np.float32)
        expected = (expected.astype(np.float64) + part.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))
    one_chain = emu.gemm(a, b, None, unit, emu.Schedule())
    assert (one_chain.view(np.uint32) != got.view(np.uint32)).any()  # the interval is visible
    assert [(r.start, r.stop) for r in sch.promotion_ranges(slice(0, K))] == [(0, 128), (128, 256), (256, 320)]
    assert "two-level accumulation" in sch.describe() and sch.fields()["promotion_interval"] == 4


def test_scales_apply_in_the_schedules_order():
    """scale_a·scale_b first, or one at a time; the bias in one FMA or after: hand-derived values
    where the orders part (float64 products of float32 values are exact; one cast rounds)."""
    unit = models.unit("h100", input="e4m3")
    a = np.array([[1.0]], np.float32).astype(ml_dtypes.float8_e4m3fn)
    b = a.copy()  # acc = 1
    sa = np.float32(1 + 2**-12)
    sb = np.float32(1 + 2**-12)  # sa·sb = 1 + 2^-11 + 2^-24: RNE32 drops 2^-24 (a tie to even)
    f64 = np.float64

    def gemm(order, fma=True, bias=None):
        sch = emu.Schedule(scale_order=order, epilogue_fma=fma, c_entry="epilogue" if bias is not None else "chain")
        return emu.gemm(a, b, bias, unit, sch, scale_a=sa, scale_b=sb)[0, 0]

    assert gemm("product") == np.float32(f64(sa) * f64(sb)) == np.float32(1 + 2**-11)
    assert gemm("a_then_b") == np.float32(f64(np.float32(f64(sa))) * f64(sb))
    # a bias that cancels: FMA keeps the 2^-24 the product's rounding loses
    bias = np.array([[-1.0 - 2**-11]], np.float32)
    prod = np.float32(f64(sa) * f64(sb))
    assert gemm("a_then_b", True, bias) == np.float32(f64(sa) * f64(sb) + f64(bias[0, 0])) == np.float32(2**-24)
    assert gemm("a_then_b", False, bias) == np.float32(0)
    assert gemm("product", True, bias) == np.float32(f64(prod) + f64(bias[0, 0])) == np.float32(0)
    with pytest.raises(ValueError, match="scale_order"):
        emu.Schedule(scale_order="ab")
    with pytest.raises(ValueError, match="scale_a: shape"):
        emu.gemm(a, b, None, unit, emu.Schedule(), scale_a=np.ones((2, 1), np.float32))


def test_chains_are_the_splits_and_intervals_a_gemm_runs():
    """Hand-derived: K = 10 in k tiles of 2 is 5 tiles; 2 ceil splits take 3 tiles then 2 (k 0-6,
    6-10), split 0 from C; a promotion interval of 2 tiles cuts one split into k 0-4, 4-8, 8-10,
    the first from C; even halves of 5 with a residue tile of 4 put each half's one residue k
    first, zero-filled to 4 (a length that is a multiple of the tile keeps no fill); strided
    splits take every third k."""
    from emu.schedule import Chain

    assert Schedule(k_tile=2, splits=2, split_rule="ceil").chains(10) == [
        Chain(0, 0, 6, 1, 0, True),
        Chain(1, 6, 10, 1, 0, False),
    ]
    assert Schedule(k_tile=2, splits=2, split_rule="ceil", c_entry="epilogue").chains(10)[0].from_c is False
    assert Schedule(k_tile=2, promotion_interval=2).chains(10) == [
        Chain(0, 0, 4, 1, 0, True),
        Chain(0, 4, 8, 1, 0, False),
        Chain(0, 8, 10, 1, 0, False),
    ]
    halves = Schedule(splits=2, residue_tile=4).chains(10)
    assert [(c.start, c.stop, c.residue_tile) for c in halves] == [(0, 5, 4), (5, 10, 4)]
    assert halves[1].positions().tolist() == [5, -1, -1, -1, 6, 7, 8, 9] and halves[1].length == 8
    assert Schedule(splits=2, residue_tile=5).chains(10)[0].residue_tile == 0
    strided = Schedule(splits=3, split_rule="strided").chains(7)
    assert [c.positions().tolist() for c in strided] == [[0, 3, 6], [1, 4], [2, 5]]


def test_split_results_add_a_splits_intervals_in_order():
    """A split of three chains is ((r0 + r1) + r2) in fp32: 1 + 2^-24 rounds back to 1 (a tie
    to even), then + 2^-24 again: 1; added the other way round, 2^-24 + 2^-24 = 2^-23 survives."""
    from emu.gemm import split_results

    chains = Schedule(k_tile=1, promotion_interval=1, splits=1).chains(3)
    tiny = np.float32(2.0**-24)
    parts = [np.array([1.0], np.float32), np.array([tiny]), np.array([tiny])]
    (got,) = split_results(chains, parts)
    assert got.tolist() == [1.0]
    (got,) = split_results(chains, parts[::-1])
    assert got.tolist() == [float(np.float32(1.0 + 2.0**-23))]
    two = Schedule(splits=2).chains(4)
    assert [p.tolist() for p in split_results(two, parts[:2])] == [[1.0], [float(tiny)]]
