"""Every operand layout of ``dot_add`` gives the bits of the one-vector-per-output layout.

The one-vector-per-output call (a, b, c all of the batch shape) is what the exact-oracle tests
check; here the same outputs are asked for with a broadcast a, a broadcast b, a scalar, row or
column c, as a GEMM, and as a batched GEMM, over adversarial operands (NaN/inf, subnormals,
ties, cancellation, …) and batches long enough to be cut into several chunks (``emu.rows``).
"""

import numpy as np
import pytest

import emu
import emu.dot
import models
from tests.adversarial import all_families, concat

UNITS = ("fma32", "mi200", "h100", "mi100")


def _bits(x):
    x = np.asarray(x)
    return x.view(np.uint16 if x.dtype == np.float16 else np.uint32)


def _same(got, want):
    """Bitwise equal, any NaN equal to any NaN."""
    g, w = np.asarray(got, np.float32), np.asarray(want, np.float32)
    return np.all((_bits(got) == _bits(want)) | (np.isnan(g) & np.isnan(w)))


@pytest.fixture(params=UNITS)
def unit(request):
    return models.unit(request.param)


@pytest.fixture
def operands(unit):
    rng = np.random.default_rng(3)
    K = 2 * unit.group_size + 3
    a, b, c, _ = concat(all_families(rng, 60, K))
    return rng, a, b, c.view(np.float32)


def test_broadcast_a_b_and_c_match_the_full_batch(unit, operands, monkeypatch):
    monkeypatch.setattr(emu.dot, "CHUNK_VALUES", 256)  # many chunks, a partial last one
    monkeypatch.setattr(emu.dot, "DIRECT_ROWS", 0)  # the rows driver even for a small batch
    rng, a, b, c = operands
    P, K = a.shape
    for a_given, b_given, c_given in (
        (a, b, c),
        (a[3], b, c),  # one a for every output
        (a, b[5], c),  # one b for every output
        (a, b, c[7]),  # one c
        (a[3], b[5], c[7]),
    ):
        a_full = np.broadcast_to(a_given, (P, K)).copy()
        b_full = np.broadcast_to(b_given, (P, K)).copy()
        c_full = np.broadcast_to(c_given, (P,)).copy()
        want = emu.dot_add(a_full, b_full, c_full, unit)
        assert _same(emu.dot_add(a_given, b_given, c_given, unit), want)
        # strided rows and a transposed source give the same bits
        assert _same(emu.dot_add(np.asfortranarray(a_full), b_full[::1], c_full, unit), want)


@pytest.mark.parametrize("min_g", [1, 1000])  # one launch for the batch, or a GEMM per element
def test_gemm_and_batched_gemm_match_the_full_batch(unit, operands, monkeypatch, min_g):
    monkeypatch.setattr(emu.dot, "BATCH_MIN_G", min_g)
    rng, a, b, c = operands
    G, M, N = 3, 5, 40
    K = a.shape[1]
    ag = a[rng.integers(0, len(a), (G, M))]
    bg = b[rng.integers(0, len(b), (G, N))]
    cg = c[rng.integers(0, len(c), (G, M, N))]
    want = emu.dot_add(
        np.broadcast_to(ag[:, :, None, :], (G, M, N, K)).reshape(-1, K).copy(),
        np.broadcast_to(bg[:, None, :, :], (G, M, N, K)).reshape(-1, K).copy(),
        cg.reshape(-1),
        unit,
    ).reshape(G, M, N)
    assert _same(emu.dot_add(ag[:, :, None, :], bg[:, None, :, :], cg, unit), want)
    # one c for all; one b-matrix for every element (b broadcast over the batch)
    assert _same(
        emu.dot_add(ag[:, :, None, :], bg[:, None, :, :], cg[1, 2, 3], unit),
        emu.dot_add(
            np.broadcast_to(ag[:, :, None, :], (G, M, N, K)).reshape(-1, K).copy(),
            np.broadcast_to(bg[:, None, :, :], (G, M, N, K)).reshape(-1, K).copy(),
            np.full(G * M * N, cg[1, 2, 3], np.float32),
            unit,
        ).reshape(G, M, N),
    )
    want0 = emu.dot_add(
        np.broadcast_to(ag[:, :, None, :], (G, M, N, K)).reshape(-1, K).copy(),
        np.broadcast_to(bg[:1, None, :, :], (G, M, N, K)).reshape(-1, K).copy(),
        cg.reshape(-1),
        unit,
    ).reshape(G, M, N)
    assert _same(emu.dot_add(ag[:, :, None, :], bg[:1, None, :, :], cg, unit), want0)
    for g in range(G):
        assert _same(emu.dot_add(ag[g][:, None, :], bg[g][None], cg[g], unit), want[g])
        assert _same(emu.gemm(ag[g], np.ascontiguousarray(bg[g].T), cg[g], unit), want[g])
