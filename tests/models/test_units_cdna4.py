"""The CDNA4 (MI355) block-scaled unit (issue 39.3): from documentation, not checked on silicon.

``models.unit("mi355", input=(A, B), scale="ue8m0", block=32)`` against the exact reference
(tests/exact_reference_scaled.py, Fractions, no emu code) on every operand pair and every input
family of tests/scaled_inputs.py, then hand-made rows where the choices taken from MI300 decide
(16 products per step, 24 fraction bits, round to nearest even), then the interface.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import emu
import models
from emu.units import Family, Rounding
from models.units_cdna4 import CDNA4_INPUT_NAMES, NOT_ON_SILICON
from tests.exact_reference_scaled import fp32_bits, reference_scaled_dot
from tests.scaled_inputs import FAMILIES, family_rows

ROWS, K = 8, 128
PAIRS = [(fa, fb) for fa in CDNA4_INPUT_NAMES for fb in CDNA4_INPUT_NAMES]


def _bits(x) -> np.ndarray:
    x = np.asarray(x, np.float32)
    return np.where(np.isnan(x), np.uint32(0x7FC00000), x.view(np.uint32))


@pytest.mark.parametrize("fa, fb", PAIRS, ids=lambda v: str(v))
def test_reference(fa, fb):
    u = models.unit("mi355", input=(fa, fb), scale="ue8m0", block=32)
    seed = sum(map(ord, fa + fb))
    for n, family in enumerate(FAMILIES):
        a, b, sa, sb, c = family_rows(family, fa, fb, "ue8m0", 32, ROWS, K, seed + n)
        got = _bits(emu.dot_add(a, b, c, u, scale_a=sa, scale_b=sb))
        want = [reference_scaled_dot(a[p], b[p], sa[p], sb[p], fp32_bits(c[p]), u.params) for p in range(ROWS)]
        want = _bits(np.array(want, np.uint32).view(np.float32))
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, f"{family}: rows {bad[:4]} got {got[bad[:4]]} want {want[bad[:4]]}"


# e4m3 2^-6 (exponent field 1, fraction 0) under scales 2^-6 · 2^-6: every product is 2^-24, one
# half-ulp of fp32 at 1.0; 2^-25 with one scale 2^-7
E4M3_2M6 = 0x08
TINY = {24: (121, 121), 25: (121, 120)}


def _row(ks, power=24, c=1.0, K=32):
    a = np.zeros(K, np.uint8)
    b = np.zeros(K, np.uint8)
    a[list(ks)] = E4M3_2M6
    b[list(ks)] = E4M3_2M6
    sa = np.full(K // 32, TINY[power][0], np.uint8)
    sb = np.full(K // 32, TINY[power][1], np.uint8)
    return a, b, sa, sb, np.float32(c)


@pytest.mark.parametrize(
    "ks, power, K, want",
    [
        ((), 24, 32, 1.0),  # c alone
        ((0,), 24, 32, 1.0),  # 1 + 2^-24: a tie, to the even 1.0
        ((0, 1), 24, 32, 1.0 + 2.0**-23),  # exact
        ((0, 1, 2), 24, 32, 1.0 + 2.0**-22),  # 1 + 3·2^-24: a tie, to the even 1 + 2^-22
        ((0, 1, 2, 3), 25, 32, 1.0),  # four 2^-25 below the 24 bits kept: cut to zero
        ((0, 16), 24, 32, 1.0),  # two steps of 16, each a tie back to 1.0 (one step of 32: 1 + 2^-23)
        ((15, 16, 17), 24, 32, 1.0 + 2.0**-23),  # 1 + 2^-24 → 1.0; then 1 + 2·2^-24
        ((0, 1, 2, 32, 33, 34), 24, 64, 1.0 + 2.0**-21),  # 1 + 2^-22, then 1 + 2^-22 + 3·2^-24: a tie to even
    ],
)
def test_mi300_choices(ks, power, K, want):
    """16 products per step, 24 fraction bits below the largest term, RNE: each row's answer by
    hand from those three choices (module docstring of models.units_cdna4)."""
    u = models.unit("mi355", input="e4m3", scale="ue8m0", block=32)
    a, b, sa, sb, c = _row(ks, power, K=K)
    got = emu.dot_add(a, b, c, u, scale_a=sa, scale_b=sb)
    assert _bits(got) == _bits(np.float32(want)), f"{float(got)!r} != {want!r}"
    assert _bits(-emu.dot_add(a ^ 0x80, b, -c, u, scale_a=sa, scale_b=sb)) == _bits(np.float32(want))


def test_gemm_is_rows():
    u = models.unit("mi355", input=("e5m2", "e2m1"), scale="ue8m0", block=32)
    rng = np.random.default_rng(3)
    A = rng.integers(0, 124, (5, 64)).astype(np.uint8).view(ml_dtypes.float8_e5m2)
    B = rng.integers(0, 16, (64, 7)).astype(np.uint8)
    SA = rng.integers(120, 135, (5, 2)).astype(np.uint8)
    SB = rng.integers(120, 135, (2, 7)).astype(np.uint8)
    got = emu.gemm(A, B, None, u, scale_a=SA.view(ml_dtypes.float8_e8m0fnu), scale_b=SB)
    for m in range(5):
        row = emu.dot_add(A[m][None, :], B.T, np.float32(0), u, scale_a=SA[m][None, :], scale_b=SB.T)
        assert np.array_equal(_bits(got[m]), _bits(row))


def test_fields_and_sources():
    u = models.unit("mi355", input=("e4m3", "e2m1"), scale="ue8m0", block=32)
    assert (u.family, u.group_size, u.fraction_bits) == (Family.SCALED_FUSED, 16, 24)
    assert (u.alignment_rounding, u.output_rounding) == (Rounding.RZ, Rounding.RNE)
    assert NOT_ON_SILICON in u.description
    for f in ("family", "group_size", "fraction_bits", "alignment_rounding", "output_rounding", "zero_exponent"):
        assert "MI300" in u.source(f) and NOT_ON_SILICON in u.source(f), f
    assert "cbsz" in u.source("input_format") and "blgp" in u.source("b_input_format")
    assert "composable_kernel" in u.source("block_size")
    for alias in ("MI350", "mi355x", "cdna4", "gfx950"):
        assert (
            models.unit(alias, input="e2m1", scale="ue8m0", block=32).params
            == models.unit("mi355", input="e2m1", scale="ue8m0", block=32).params
        )
    assert "mi355" in models.SCALED_UNIT_NAMES


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(input="e2m1", scale="ue4m3", block=16), "scale, block"),
        (dict(input="e2m1", scale="ue8m0", block=16), "scale, block"),
        (dict(input="fp16", scale="ue8m0", block=32), "input"),
        (dict(input="e4m3fnuz", scale="ue8m0", block=32), "input"),
        (dict(input="e4m3", scale="ue8m0", block=32, kind="bogus"), "kind"),
        (dict(input="e4m3", scale="ue8m0", block=32, output="fp16"), "output"),
        (dict(input="e4m3"), "unit"),
    ],
)
def test_errors(kwargs, field):
    with pytest.raises(ValueError, match=f"^{field}: "):
        models.unit("mi355", **kwargs)
