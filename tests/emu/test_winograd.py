"""emu.winograd: F(2×2, 3×3) equals the direct convolution exactly on small integers; both tiles
match, bit for bit, a scalar reference of the same order of operations written here (numpy
float32 scalars, one rounding per operation; the channel sums and fused steps through an exact
Fraction FMA); on random fp32 data both stay close to the fp64 convolution (a sanity bound, not
a bit test)."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from exact_reference import rn32

from emu.gemm import GemmOrder
from emu.winograd import (
    CUDNN_FPROP_TILE,
    CUDNN_WGRAD_POINTS,
    TILES,
    TransformOrder,
    fractions_in_output,
    toom_cook_tile,
    winograd_conv2d,
)


def _direct(x: np.ndarray, w: np.ndarray, pad: tuple[int, int]) -> np.ndarray:
    """fp64 stride-1 cross-correlation by plain loops."""
    N, C, H, W = x.shape
    K, _, R, S = w.shape
    xp = np.zeros((N, C, H + 2 * pad[0], W + 2 * pad[1]))
    xp[:, :, pad[0] : pad[0] + H, pad[1] : pad[1] + W] = x
    P, Q = xp.shape[2] - R + 1, xp.shape[3] - S + 1
    out = np.zeros((N, K, P, Q))
    for p, q, r, s in itertools.product(range(P), range(Q), range(R), range(S)):
        out[:, :, p, q] += xp[:, :, p + r, q + s] @ w[:, :, r, s].T
    return out


def _fma(a, b, c) -> np.float32:
    """RN32(a·b + c) from the exact sum; an exact zero is −0 only for (−0) + (−0) (IEEE 754 §6.3)."""
    r = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    if r != 0:
        return rn32(r)
    both_negative_zeros = (np.signbit(a) != np.signbit(b)) and np.signbit(c) and float(a) * float(b) == 0 and c == 0
    return np.float32(-0.0 if both_negative_zeros else 0.0)


def _coeffs(tile, which):
    return [[np.float32(float(v)) for v in row] for row in getattr(tile, which)]


def _left(C, X, fused):
    """C·X for lists of float32 scalars, k ascending, zero coefficients skipped."""
    out = []
    for i in range(len(C)):
        row = []
        for j in range(len(X[0])):
            acc = None
            for k in range(len(X)):
                c = C[i][k]
                if c == 0:
                    continue
                if acc is None:
                    acc = np.float32(c * X[k][j])
                elif fused:
                    acc = _fma(c, X[k][j], acc)
                else:
                    acc = np.float32(acc + np.float32(c * X[k][j]))
            row.append(np.float32(0) if acc is None else acc)
        out.append(row)
    return out


def _t(X):
    return [list(r) for r in zip(*X)]


def _transform(C, X, fused):
    return _t(_left(C, _t(_left(C, X, fused)), fused))


def _reference(x, w, tile, pad, fused=False):
    """The same algorithm with scalar arithmetic: tiles, V, U, channel FMA chains from +0, Y."""
    N, C, H, W = x.shape
    K = w.shape[0]
    m, a = tile.m, tile.alpha
    P, Q = H + 2 * pad[0] - 2, W + 2 * pad[1] - 2
    BT, G, AT = _coeffs(tile, "BT"), _coeffs(tile, "G"), _coeffs(tile, "AT")

    def xin(n, c, h, v):
        h, v = h - pad[0], v - pad[1]
        return np.float32(x[n, c, h, v]) if 0 <= h < H and 0 <= v < W else np.float32(0)

    U = [
        [_transform(G, [[np.float32(w[k, c, i, j]) for j in range(3)] for i in range(3)], fused) for c in range(C)]
        for k in range(K)
    ]
    out = np.zeros((N, K, P, Q), np.float32)
    for n, i0, j0 in itertools.product(range(N), range(0, P, m), range(0, Q, m)):
        V = [_transform(BT, [[xin(n, c, i0 + i, j0 + j) for j in range(a)] for i in range(a)], fused) for c in range(C)]
        for k in range(K):
            M = [[np.float32(0)] * a for _ in range(a)]
            for xi, nu in itertools.product(range(a), range(a)):
                acc = np.float32(0)
                for c in range(C):
                    acc = _fma(U[k][c][xi][nu], V[c][xi][nu], acc)
                M[xi][nu] = acc
            Y = _transform(AT, M, fused)
            for i, j in itertools.product(range(m), range(m)):
                if i0 + i < P and j0 + j < Q:
                    out[n, k, i0 + i, j0 + j] = Y[i][j]
    return out


def _bits(a):
    return np.asarray(a, np.float32).view(np.uint32)


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("pad, hw", [((0, 0), (6, 6)), ((1, 1), (7, 5)), ((1, 0), (5, 8))])
def test_f2x2_equals_the_direct_convolution_on_small_integers(fused, pad, hw):
    rng = np.random.default_rng(hw[0] * 10 + hw[1])
    x = rng.integers(-8, 9, (2, 5) + hw).astype(np.float32)
    w = rng.integers(-8, 9, (3, 5, 3, 3)).astype(np.float32)
    how = TransformOrder(fused=fused)
    got = winograd_conv2d(x, w, "F(2x2,3x3)", pad, input_order=how, filter_order=how, output_order=how)
    assert np.array_equal(got.astype(np.float64), _direct(x, w, pad))


@pytest.mark.parametrize("name", list(TILES))
@pytest.mark.parametrize("fused", [False, True])
def test_matches_the_scalar_reference_of_the_same_order(name, fused):
    rng = np.random.default_rng(len(name) + fused)
    x = (rng.standard_normal((1, 3, 7, 6)) * 2.0 ** rng.integers(-4, 4, (1, 3, 7, 6))).astype(np.float32)
    w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    how = TransformOrder(fused=fused)
    got = winograd_conv2d(x, w, name, (1, 1), input_order=how, filter_order=how, output_order=how)
    assert np.array_equal(_bits(got), _bits(_reference(x, w, TILES[name], (1, 1), fused)))


def _bilinear_identity_holds(t) -> bool:
    """Aᵀ[(G g) ⊙ (Bᵀ d)] is the correlation of d with g, for every unit d and g (exact)."""
    a = t.alpha
    return all(
        sum(t.AT[i][j] * t.G[j][k] * t.BT[j][lo] for j in range(a)) == (lo == i + k)
        for i in range(t.m)
        for k in range(t.r)
        for lo in range(a)
    )


@pytest.mark.parametrize("tile", [TILES["F(2x2,3x3)"], TILES["F(4x4,3x3)"], toom_cook_tile(4, 3, CUDNN_WGRAD_POINTS)])
def test_fractions_in_output_keeps_the_identity_and_leaves_g_plain(tile):
    moved = fractions_in_output(tile)
    assert _bilinear_identity_holds(moved) and moved.BT == tile.BT
    assert all(next(v for v in row if v != 0) == 1 for row in moved.G)  # every row of G starts at 1
    assert moved.G != tile.G and moved.AT != tile.AT  # these tiles all had fractions in G


def test_the_cudnn_forward_tile_is_the_vandermonde_filter_and_fractions_in_a():
    t = CUDNN_FPROP_TILE
    points = [Fraction(0), Fraction(1), Fraction(-1), Fraction(1, 2), Fraction(-1, 2)]
    assert t.G == tuple(tuple(p**k for k in range(3)) for p in points) + ((0, 0, 1),)
    f = [1 / np.prod([float(p - q) for q in points if q != p]) for p in points] + [1.0]
    assert np.array_equal(t.fp32("AT")[1], np.float32([0, f[1], -f[2], f[3] / 2, -f[4] / 2, 0]))
    rng = np.random.default_rng(7)  # the scalar reference of the same order, bit for bit
    x = rng.standard_normal((1, 3, 9, 8)).astype(np.float16).astype(np.float32)
    w = rng.standard_normal((2, 3, 3, 3)).astype(np.float16).astype(np.float32)
    got = winograd_conv2d(x, w, t, (1, 1))
    assert np.array_equal(_bits(got), _bits(_reference(x, w, t, (1, 1), False)))


def test_the_order_parameters_change_bits_and_the_channel_order_is_the_gemms():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 8, 8, 8)).astype(np.float32)
    w = rng.standard_normal((4, 8, 3, 3)).astype(np.float32)
    plain = winograd_conv2d(x, w, "F(4x4,3x3)", (1, 1))
    fused = winograd_conv2d(x, w, "F(4x4,3x3)", (1, 1), input_order=TransformOrder(fused=True))
    assert not np.array_equal(_bits(plain), _bits(fused))
    perm = tuple(range(7, -1, -1))
    reversed_c = winograd_conv2d(x, w, "F(4x4,3x3)", (1, 1), order=GemmOrder(k_order=perm))
    flipped = winograd_conv2d(x[:, ::-1].copy(), w[:, ::-1].copy(), "F(4x4,3x3)", (1, 1))
    assert np.array_equal(_bits(reversed_c), _bits(flipped))
    assert not np.array_equal(_bits(reversed_c), _bits(plain))


@pytest.mark.parametrize("name", list(TILES))
def test_random_inputs_stay_near_the_fp64_convolution(name):
    """A sanity bound only: |error| ≤ 2^-18 of Σ|x·w| per output (a few fp32 ulps of the terms'
    magnitude; F(4×4, 3×3)'s transforms grow the terms by up to 100×)."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 16, 11, 9)).astype(np.float32)
    w = rng.standard_normal((5, 16, 3, 3)).astype(np.float32)
    got = winograd_conv2d(x, w, name, (1, 1)).astype(np.float64)
    want = _direct(x.astype(np.float64), w.astype(np.float64), (1, 1))
    scale = _direct(np.abs(x.astype(np.float64)), np.abs(w.astype(np.float64)), (1, 1))
    assert got.shape == want.shape
    assert np.all(np.abs(got - want) <= scale * 2.0**-18)


def test_rejects_bad_shapes():
    with pytest.raises(ValueError, match="need"):
        winograd_conv2d(np.ones((1, 2, 5, 5), np.float32), np.ones((1, 3, 3, 3), np.float32))
    with pytest.raises(TypeError, match="float32"):
        winograd_conv2d(np.ones((1, 2, 5, 5)), np.ones((1, 2, 3, 3), np.float32))
