"""emu.gemm: the accumulation order is what it says it is, checked through dot_add."""

import numpy as np
import pytest

import emu
import models


def _bits(x):
    return np.asarray(x).view(np.uint32)


@pytest.fixture(scope="module")
def operands():
    rng = np.random.default_rng(3)
    A = rng.uniform(-2, 2, (6, 45)).astype(np.float16)
    B = rng.uniform(-2, 2, (45, 150)).astype(np.float16)
    A[0, :5] = np.float16(2.0**-20)  # subnormals: flushed by MI200
    return A, B


@pytest.mark.parametrize("name", ["mi100", "mi200", "mi300", "h100", "fma32", "fp64"])
def test_k_order_is_a_permutation_fed_to_the_unit(operands, name):
    A, B = operands
    unit = models.unit(name)
    perm = tuple(np.random.default_rng(1).permutation(45))
    got = emu.gemm(A, B, None, unit, emu.GemmOrder(k_order=perm))
    want = emu.dot_add(A[:, None, list(perm)], B.T[None, :, list(perm)], np.float32(0), unit)
    np.testing.assert_array_equal(_bits(got), _bits(want))


def test_order_matters_for_a_rounding_unit(operands):
    A, B = operands
    unit = models.unit("fma32")
    perm = tuple(range(44, -1, -1))
    assert not np.array_equal(
        _bits(emu.gemm(A, B, None, unit)), _bits(emu.gemm(A, B, None, unit, emu.GemmOrder(k_order=perm)))
    )


def test_split_k_is_chunks_from_zero_then_atomic_adds(operands):
    A, B = operands
    unit = models.unit("mi100")
    order = emu.GemmOrder(split_k=3)
    chunks = order.chunks(45)
    partial = [emu.gemm(A[:, s], B[s], None, unit) for s in chunks]
    want = (np.float32(0) + partial[0]) + partial[1] + partial[2]
    np.testing.assert_array_equal(_bits(emu.gemm(A, B, None, unit, order)), _bits(want))


def test_split_k_adds_an_inf_and_a_minus_inf_chunk_to_nan_without_a_warning(operands):
    """Found by tests/emu/test_fuzz_threads.py: the split-K combine raised numpy's RuntimeWarning
    ("invalid value encountered in add") for +inf + -inf partials (an error under warnings-as-errors)."""
    A, B = (x.copy() for x in operands)
    A[0, 0], A[0, 44] = np.float16(np.inf), np.float16(-np.inf)
    unit = models.unit("mi100")
    order = emu.GemmOrder(split_k=3)
    partial = [emu.gemm(A[:, s], B[s], None, unit) for s in order.chunks(45)]
    with np.errstate(invalid="ignore"):
        want = (np.float32(0) + partial[0]) + partial[1] + partial[2]
    assert np.isnan(want[0]).any()
    np.testing.assert_array_equal(_bits(emu.gemm(A, B, None, unit, order)), _bits(want))


def test_ensemble_members_are_orders_of_the_same_partials(operands):
    A, B = operands
    unit = models.unit("mi200")
    order = emu.GemmOrder(split_k=5)
    ens = emu.split_partials(A, B, unit, order, seed=2)
    chunks = order.chunks(45)
    partial = [emu.gemm(A[:, s], B[s], None, unit) for s in chunks]
    np.testing.assert_array_equal(_bits(ens.parts.reshape(5, 6, 150)), _bits(np.stack(partial)))
    members = np.stack([ens.member_fp32(i) for i in range(8)]).reshape(8, 6, 150)
    # each element of each member is the partials added onto +0 in its own drawn order
    for i in range(8):
        for m, n in ((0, 0), (3, 77), (5, 149)):
            perm = emu.atomics.add_order(5, 2, i, key=m * 150 + n)
            assert sorted(perm) == list(range(5))
            ws = np.float32(0)
            for s in perm:
                ws = np.float32(ws + partial[s][m, n])
            assert _bits(members[i, m, n]) == _bits(ws)
    assert len({e.tobytes() for e in members}) > 1, "random combination orders never differed"
    np.testing.assert_array_equal(
        _bits(members[3]), _bits(emu.split_partials(A, B, unit, order, seed=2).member_fp32(3).reshape(6, 150))
    )
    # ascending order is what gemm computes; a random combination is member 0 keyed per GEMM
    np.testing.assert_array_equal(_bits(ens.ascending().reshape(6, 150)), _bits(emu.gemm(A, B, None, unit, order)))
    rnd = emu.GemmOrder(split_k=5, combine="random", combine_seed=2)
    np.testing.assert_array_equal(
        _bits(ens.member_fp32(0, "gemm").reshape(6, 150)), _bits(emu.gemm(A, B, None, unit, rnd))
    )


def test_k_padding_appends_zero_products(operands):
    A, B = operands
    unit = models.unit("h100")
    padded = emu.gemm(A, B, None, unit, emu.GemmOrder(pad_k=16))
    Az = np.concatenate([A, np.zeros((6, 3), np.float16)], axis=1)
    Bz = np.concatenate([B, np.zeros((3, 150), np.float16)], axis=0)
    np.testing.assert_array_equal(_bits(padded), _bits(emu.gemm(Az, Bz, None, unit)))


def test_strided_k_order_of_16x16x16():
    order = emu.strided_k_order(32, tile=16, group=4)
    assert order[:8] == (0, 4, 8, 12, 1, 5, 9, 13)
    assert order[16:20] == (16, 20, 24, 28)
    assert sorted(order) == list(range(32))
    assert emu.strided_k_order(20, 16, 4)[16:] == (16, 17, 18, 19)


def test_bad_orders_are_value_errors():
    with pytest.raises(ValueError, match="k_order"):
        emu.GemmOrder(k_order=(0, 0, 1)).sequence(3)
    with pytest.raises(ValueError, match="split_k"):
        emu.GemmOrder(split_k=0)
    with pytest.raises(ValueError, match="combine"):
        emu.GemmOrder(combine="sometimes")


def test_gemm_and_dot_add_share_one_convention(operands):
    """gemm(A, B, C, unit, order) is dot_add(a, b, c, unit) in GEMM form: the same accumulator
    argument, the same result type (float16 for an fp16-output unit), the same bits; a C that is
    not exactly representable is refused by both."""
    A, B = operands
    for unit in (models.unit("h100", output="fp16"), models.unit("mi300")):
        fp16_out = unit.output_format == emu.Format.FP16
        C = (np.arange(6 * 150).reshape(6, 150) % 7 - 3).astype(np.float16 if fp16_out else np.float32)
        got = emu.gemm(A, B, C, unit)
        want = emu.dot_add(A[:, None, :], B.T[None], C, unit)
        assert got.dtype == want.dtype == (np.float16 if fp16_out else np.float32)
        np.testing.assert_array_equal(
            np.asarray(got).view(np.uint16 if fp16_out else np.uint32),
            np.asarray(want).view(np.uint16 if fp16_out else np.uint32),
        )
    with pytest.raises(TypeError, match="c"):
        emu.gemm(A, B, np.full((6, 150), 0.1), models.unit("mi200"))
    with pytest.raises(TypeError, match="c"):
        emu.dot_add(A[:, None, :], B.T[None], np.full((6, 150), 0.1), models.unit("mi200"))


def test_nonsense_arguments_are_refused_with_the_field_named(operands):
    """Issue 13: the API refuses what it cannot mean instead of computing something."""
    A, B = operands
    unit = models.unit("mi200")
    a = A[0]
    with pytest.raises(TypeError, match="c: .* got None"):
        emu.dot_add(a, a, None, unit)
    with pytest.raises(TypeError, match="c: .* dtype <U3"):
        emu.dot_add(a, a, "1.5", unit)
    with pytest.raises(ValueError, match="k_order: gemmK indices must be whole numbers, got 7.5"):
        emu.GemmOrder(k_order=(0, 1, 7.5))
    with pytest.raises(ValueError, match="pad_k: must be in 1..65536"):
        emu.GemmOrder(pad_k=10**9)
    with pytest.raises(ValueError, match="split_k: must be a whole number"):
        emu.GemmOrder(split_k=2.0)
    with pytest.raises(ValueError, match="tile: must be a whole number ≥ 1, got 0"):
        emu.strided_k_order(16, 0, 4)
    with pytest.raises(ValueError, match="tile: must be a whole number ≥ 1, got -16"):
        emu.strided_k_order(16, -16, 4)
    assert emu.strided_k_order(16, 16, 4)[:5] == (0, 4, 8, 12, 1)


def test_a_unit_variant_keeps_every_field_meaningful():
    import dataclasses

    h100 = models.unit("h100")
    with pytest.raises(ValueError, match=r"output_rounding: 9 is not one of RNE"):
        dataclasses.replace(h100, output_rounding=9)
    with pytest.raises(ValueError, match="group_size: must be ≥ 1"):
        dataclasses.replace(h100, group_size=0)
    with pytest.raises(ValueError, match="fraction_bits: must be a whole number"):
        dataclasses.replace(h100, fraction_bits=24.5)
    assert dataclasses.replace(h100, group_size=8).group_size == 8


def test_split_partials_members_have_the_gemms_shape_and_bad_indices_are_named():
    rng = np.random.default_rng(8)
    A = rng.uniform(-1, 1, (4, 64)).astype(np.float16)
    B = rng.uniform(-1, 1, (64, 3)).astype(np.float16)
    parts = emu.split_partials(A, B, models.unit("mi200"), emu.GemmOrder(split_k=4), seed=1)
    assert parts.member(3).shape == (4, 3) and parts.member_fp32(0).shape == (4, 3)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="^index:"):
            parts.member(bad)
    with pytest.raises(ValueError, match="^seed:"):
        emu.split_partials(A, B, models.unit("mi200"), emu.GemmOrder(split_k=4), seed=-1)
