"""cuDNN's forward F(4×4, 3×3) order (:func:`emu.winograd.cudnn_fprop_f4x4_3x3`): the vectorised
order matches, bit for bit, a scalar reference of the documented steps written here (numpy
float32 scalars, one rounding per operation, the fused steps through exact Fractions), on random
and adversarial fp32 data, with and without padding and partial tiles; in exact arithmetic
(small integers) it is the convolution; on random data it is a rounded one. Its bits against
an H200 are tested in tests/validation/captures/test_convs_winograd.py."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from winograd_scalar import data_rows, fma_scalar, random_values, two_pass

from emu.winograd import CUDNN_FPROP_TILE, cudnn_fprop_f4x4_3x3

F32 = np.float32
C23 = F32(2 / 3)


def _filter(g):  # one row of 3 -> 6: the plain rows (1, p, p²) at 0, 1, −1, 1/2, −1/2 and ∞, even terms first
    h, q = F32(0.5), F32(0.25)
    return [
        g[0],
        F32(F32(g[0] + g[2]) + g[1]),
        F32(F32(g[0] + g[2]) - g[1]),
        F32(F32(g[0] + q * g[2]) + h * g[1]),
        F32(F32(g[0] + q * g[2]) - h * g[1]),
        g[2],
    ]


def _output(fuse_m2):  # one row of 6 -> 4, the documented steps
    def rows(m):
        c = C23
        cm1 = F32(c * m[1])
        if fuse_m2:
            a = fma_scalar(c, m[2], F32(F32(4) * m[0] + cm1))
            p, s = fma_scalar(-c, m[2], cm1), fma_scalar(c, m[2], cm1)
        else:
            a = F32(F32(F32(4) * m[0] + cm1) + F32(c * m[2]))
            p, s = F32(cm1 + F32(-c * m[2])), F32(cm1 + F32(c * m[2]))
        r0 = F32(a + fma_scalar(F32(-4) * c, m[3], F32(F32(-4) * c * m[4])))
        r1 = F32(p + fma_scalar(F32(2) * c, m[4], F32(F32(-2) * c * m[3])))
        r2 = F32(s + fma_scalar(-c, m[3], F32(-c * m[4])))
        r3 = F32(F32(p + fma_scalar(F32(0.5) * c, m[4], F32(F32(-0.5) * c * m[3]))) + m[5])
        return [r0, r1, r2, r3]

    return rows


def _reference(x, w, pad, fp32_tensors=False):
    N, C, H, W = x.shape
    K = w.shape[0]
    P, Q = H + 2 * pad[0] - 2, W + 2 * pad[1] - 2
    th, tw = -(-P // 4), -(-Q // 4)
    xp = np.zeros((N, C, 4 * th + 2, 4 * tw + 2), np.float32)
    xp[:, :, pad[0] : pad[0] + H, pad[1] : pad[1] + W] = x[:, :, : 4 * th + 2 - pad[0], : 4 * tw + 2 - pad[1]]
    U = {(k, c): two_pass(_filter, w[k, c].tolist(), 6)[1] for k, c in itertools.product(range(K), range(C))}
    out = np.zeros((N, K, 4 * th, 4 * tw), np.float32)
    for n, i, j in itertools.product(range(N), range(th), range(tw)):
        V = [two_pass(data_rows, xp[n, c, 4 * i : 4 * i + 6, 4 * j : 4 * j + 6].tolist(), 6)[1] for c in range(C)]
        for k in range(K):
            M = [[F32(0.0)] * 6 for _ in range(6)]
            for xi, nu in itertools.product(range(6), range(6)):
                acc = F32(0.0)
                for c in range(C):  # the input channels ascending
                    acc = fma_scalar(U[k, c][xi][nu], V[c][xi][nu], acc)
                M[xi][nu] = acc
            first = [_output(fp32_tensors)([M[xi][nu] for xi in range(6)]) for nu in range(6)]  # down each column
            rows = [[first[nu][i] for nu in range(6)] for i in range(4)]
            out[n, k, 4 * i : 4 * i + 4, 4 * j : 4 * j + 4] = [_output(True)(r) for r in rows]
    return out[:, :, :P, :Q]


def _direct(x, w, pad):
    N, C, H, W = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad[0],) * 2, (pad[1],) * 2))
    P, Q = xp.shape[2] - 2, xp.shape[3] - 2
    out = np.zeros((N, w.shape[0], P, Q))
    for r, s in itertools.product(range(3), range(3)):
        out += np.einsum("ncpq,kc->nkpq", xp[:, :, r : r + P, s : s + Q], w[:, :, r, s].astype(np.float64))
    return out


@pytest.mark.parametrize(
    "N, C, K, H, W, pad, spread",
    [
        (1, 2, 3, 6, 6, (0, 0), 0),  # one 6×6 tile
        (2, 3, 2, 9, 7, (1, 1), 2),  # partial tiles, padding, rectangular
        (1, 3, 2, 6, 8, (1, 0), 12),  # wide exponent spread (cancellation, absorbed terms)
    ],
)
@pytest.mark.parametrize("fp32_tensors", [False, True])
def test_matches_the_scalar_reference_bit_for_bit(N, C, K, H, W, pad, spread, fp32_tensors):
    rng = np.random.default_rng(N * 100 + H * 10 + spread)
    x, w = random_values(rng, (N, C, H, W), spread), random_values(rng, (K, C, 3, 3), spread)
    got = cudnn_fprop_f4x4_3x3(x, w, pad, fp32_tensors)
    want = _reference(x, w, pad, fp32_tensors)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    if fp32_tensors:  # the two kernels' output transforms differ on such data
        assert np.count_nonzero(got != cudnn_fprop_f4x4_3x3(x, w, pad)) > 0


@pytest.mark.parametrize("pad", [(0, 0), (1, 1)])
def test_is_the_convolution_on_small_integers_and_a_rounded_one_on_random_data(pad):
    """Small integers keep every step exact but for the fractions 2/3 and 8/3 in the output
    transform: a bug in the tile (a wrong coefficient, tile origin or crop) moves outputs by
    whole units; random data is rounded, within a few fp32 ulps of the sum's terms."""
    rng = np.random.default_rng(5)
    x = rng.integers(-4, 5, (2, 3, 10, 9)).astype(np.float32)
    w = rng.integers(-4, 5, (4, 3, 3, 3)).astype(np.float32)
    assert np.abs(cudnn_fprop_f4x4_3x3(x, w, pad) - _direct(x, w, pad)).max() < 1e-3
    x, w = random_values(rng, (2, 8, 12, 12), 1), random_values(rng, (4, 8, 3, 3), 1)
    got, exact = cudnn_fprop_f4x4_3x3(x, w, pad), _direct(x, w, pad)
    assert np.count_nonzero(got != exact.astype(np.float32)) > 0
    assert np.abs(got - exact).max() < 1e-5 * np.abs(exact).max()


def test_the_tile_is_the_weight_gradients_points_with_the_fractions_in_the_output():
    assert [row[0] for row in CUDNN_FPROP_TILE.G] == [1, 1, 1, 1, 1, 0]
    assert [float(v) for v in CUDNN_FPROP_TILE.AT[0]] == [4, 2 / 3, 2 / 3, -8 / 3, -8 / 3, 0]


def test_rejects_bad_shapes():
    with pytest.raises(ValueError, match="x, w"):
        cudnn_fprop_f4x4_3x3(np.zeros((1, 2, 6, 6), np.float32), np.zeros((3, 2, 5, 5), np.float32))
    with pytest.raises(ValueError, match="empty"):
        cudnn_fprop_f4x4_3x3(np.zeros((1, 2, 2, 2), np.float32), np.zeros((3, 2, 3, 3), np.float32))
