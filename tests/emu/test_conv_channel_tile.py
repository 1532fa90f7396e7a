"""emu.implicit_gemm's ``channel_tile``: every filter tap's channels padded with zero products up to
a whole multiple of the tile (an NHWC kernel whose k tile holds channels of one tap), checked
against a gemmK sequence written out here as loops, and through a unit whose groups the padding
moves."""

from __future__ import annotations

import numpy as np
import pytest

from emu.gemm import gemm
from emu.implicit_gemm import ConvShape, conv_gemm, conv_pieces
from models.units import unit


def _fwd_sequence(shape: ConvShape, x, w, tile: int, blocked: bool = False):
    """(A, B) of the forward GEMM with gemmK (r, s, c padded to the tile), or with ``blocked``
    (c // tile, r, s, c % tile) over the padded channels, written as loops."""
    s = shape
    Cp = -(-s.C // tile) * tile
    cols = [(n, p, q) for n in range(s.N) for p in range(s.P) for q in range(s.Q)]
    if blocked:
        seq = [
            (r, t, cb * tile + ci)
            for cb in range(Cp // tile)
            for r in range(s.R)
            for t in range(s.S)
            for ci in range(tile)
        ]
    else:
        seq = [(r, t, c) for r in range(s.R) for t in range(s.S) for c in range(Cp)]
    A = np.zeros((s.K, len(seq)), x.dtype)
    B = np.zeros((len(seq), len(cols)), x.dtype)
    for kk, (r, t, c) in enumerate(seq):
        if c >= s.C:
            continue
        A[:, kk] = w[:, c, r, t]
        for j, (n, p, q) in enumerate(cols):
            h, wi = p * s.stride[0] - s.padding[0] + r, q * s.stride[1] - s.padding[1] + t
            if 0 <= h < s.H and 0 <= wi < s.W:
                B[kk, j] = x[n, c, h, wi]
    return A, B


def _bwd_data_sequence(shape: ConvShape, dy, w, tile: int):
    """(A, B) of the unit-stride backward-data GEMM with gemmK (r, s, k padded to the tile)."""
    s = shape
    Kp = -(-s.K // tile) * tile
    cols = [(n, h, wi) for n in range(s.N) for h in range(s.H) for wi in range(s.W)]
    seq = [(r, t, k) for r in range(s.R) for t in range(s.S) for k in range(Kp)]
    A = np.zeros((s.C, len(seq)), dy.dtype)
    B = np.zeros((len(seq), len(cols)), dy.dtype)
    for kk, (r, t, k) in enumerate(seq):
        if k >= s.K:
            continue
        A[:, kk] = w[k, :, r, t]
        for j, (n, h, wi) in enumerate(cols):
            p, q = h + s.padding[0] - r, wi + s.padding[1] - t
            if 0 <= p < s.P and 0 <= q < s.Q:
                B[kk, j] = dy[n, k, p, q]
    return A, B


def _f16(rng, shape):
    return (rng.standard_normal(shape) * 2.0 ** rng.integers(-3, 3, shape)).astype(np.float16)


@pytest.mark.parametrize("C,tile", [(5, 4), (6, 16), (8, 4)])
def test_fwd_channel_tile_is_the_padded_sequence(C, tile):
    rng = np.random.default_rng(C * 100 + tile)
    shape = ConvShape(2, C, 5, 4, 3, 3, 2, stride=(1, 2), padding=(1, 1))
    x, w = _f16(rng, (2, C, 5, 4)), _f16(rng, (3, C, 3, 2))
    (piece,) = conv_pieces("fwd", shape, x, w, "rsc", channel_tile=tile)
    A, B = _fwd_sequence(shape, x, w, tile)
    assert np.array_equal(piece.A, A.view(np.uint16))
    assert np.array_equal(piece.B, B.view(np.uint16))


@pytest.mark.parametrize("C,tile", [(5, 2), (9, 4), (8, 4)])
def test_fwd_k_tile_blocks_are_the_padded_blocked_sequence(C, tile):
    rng = np.random.default_rng(C * 1000 + tile)
    shape = ConvShape(1, C, 4, 5, 2, 2, 3, padding=(1, 0))
    x, w = _f16(rng, (1, C, 4, 5)), _f16(rng, (2, C, 2, 3))
    (piece,) = conv_pieces("fwd", shape, x, w, "rsc", channel_block=tile, channel_tile=tile)
    A, B = _fwd_sequence(shape, x, w, tile, blocked=True)
    assert np.array_equal(piece.A, A.view(np.uint16))
    assert np.array_equal(piece.B, B.view(np.uint16))


@pytest.mark.parametrize("K,tile", [(3, 4), (5, 8)])
def test_bwd_data_channel_tile_is_the_padded_sequence(K, tile):
    rng = np.random.default_rng(K * 10 + tile)
    shape = ConvShape(1, 2, 4, 5, K, 3, 3, padding=(1, 1))
    dy, w = _f16(rng, (1, K, shape.P, shape.Q)), _f16(rng, (K, 2, 3, 3))
    (piece,) = conv_pieces("bwd_data", shape, dy, w, "rsk", channel_tile=tile)
    A, B = _bwd_data_sequence(shape, dy, w, tile)
    assert np.array_equal(piece.A, A.view(np.uint16))
    assert np.array_equal(piece.B, B.view(np.uint16))


def test_channel_tile_moves_the_units_groups():
    """Through the H100 unit (groups of products summed before the fp32 accumulator) the padded
    sequence is the GEMM of the loops' sequence, and on these operands it differs from the
    unpadded one somewhere (the padding moves the group boundaries)."""
    rng = np.random.default_rng(7)
    shape = ConvShape(2, 21, 6, 6, 4, 3, 3, padding=(1, 1))
    x = (rng.standard_normal((2, 21, 6, 6)) * 2.0 ** rng.integers(-8, 8, (2, 21, 6, 6))).astype(np.float16)
    w = (rng.standard_normal((4, 21, 3, 3)) * 2.0 ** rng.integers(-8, 8, (4, 21, 3, 3))).astype(np.float16)
    u = unit("h100")
    got = conv_gemm("fwd", shape, x, w, u, None, "rsc", channel_tile=16)
    A, B = _fwd_sequence(shape, x, w, 16)
    want = gemm(A.view(np.uint16), B.view(np.uint16), None, u).reshape(4, 2, 6, 6).transpose(1, 0, 2, 3)
    assert np.array_equal(got.view(np.uint32), np.ascontiguousarray(want).view(np.uint32))
    plain = conv_gemm("fwd", shape, x, w, u, None, "rsc")
    assert not np.array_equal(got.view(np.uint32), plain.view(np.uint32))


def test_channel_tile_rejects_channel_major_orders():
    shape = ConvShape(1, 3, 4, 4, 2, 3, 3)
    x, w = np.zeros((1, 3, 4, 4), np.float16), np.zeros((2, 3, 3, 3), np.float16)
    with pytest.raises(ValueError, match="channel_tile"):
        conv_pieces("fwd", shape, x, w, "crs", channel_tile=4)
