"""Small batches of rows run the family kernel directly (``emu.dot.DIRECT_ROWS``), larger ones the
rows driver (``emu.rows``): the same kernel code on the same values, so the same bits, NaN
payloads included. Compared here on both sides of the threshold for two families whose kernels
compile quickly."""

import numpy as np
import pytest

import emu
import emu.dot
import models

SPECIAL = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 2.0**-24, -(2.0**-24), 2.0**-14, 1.0, -1.0, 3.0, 0.5, -2.0],
    np.float16,
)


def _rows(rng, P, K):
    a = rng.uniform(-8, 8, (P, K)).astype(np.float16)
    b = rng.uniform(-8, 8, (P, K)).astype(np.float16)
    mask = rng.random((P, K)) < 0.2
    a[mask] = rng.choice(SPECIAL, mask.sum())
    nan_bits = a.view(np.uint16)
    nan_bits[:, 0] = np.where(rng.random(P) < 0.05, 0x7E01 + rng.integers(0, 255, P), nan_bits[:, 0])  # payloads
    c = rng.uniform(-64, 64, P).astype(np.float32)
    return a, b, c


@pytest.mark.parametrize("unit", ["mi200", "fp64"])
def test_direct_rows_equal_the_rows_driver(unit, monkeypatch):
    rng = np.random.default_rng(36)
    u = models.unit(unit)
    a, b, c = _rows(rng, 700, 6)  # K = 6: not the fused decode of emu.rows.rows_fused
    direct = emu.dot_add(a, b, c, u)
    direct_one_a = emu.dot_add(a[:1], b, c, u)
    monkeypatch.setattr(emu.dot, "DIRECT_ROWS", 0)
    driver = emu.dot_add(a, b, c, u)
    driver_one_a = emu.dot_add(a[:1], b, c, u)
    assert np.array_equal(direct.view(np.uint32), driver.view(np.uint32))
    assert np.array_equal(direct_one_a.view(np.uint32), driver_one_a.view(np.uint32))
    assert np.isnan(direct).any()  # the payload case was exercised
