"""fp16 bit patterns to float32 values inside numba code, for operands in any memory order.

:func:`fp16_value` is the arithmetic form of :data:`emu.formats.FP16_TO_FP32` (and, with
``flush``, of ``FP16_TO_FP32_FTZ``): the same bits for all 65,536 patterns, NaN payloads kept
(the signalling ones too, which a hardware half-to-single conversion would quiet), and no 256 KiB
table to keep in cache, so LLVM can vectorise it. :func:`decode_rows_t` decodes a block of rows
into the kernels' lane-major layout (the transpose), tile by tile in cache; rows whose K is a
multiple of 4 are transposed four values at a time (:func:`decode_tile4`).
"""

from __future__ import annotations

import sys

import numpy as np

from .jit import jit, run_tasks

__all__ = ["fp16_value", "decode_tile", "decode_tile4", "decode_rows_t", "quads", "TILE"]

_MAG = np.uint32(0x7FFF)
_SIGN = np.uint32(0x8000)
_EXP = np.uint32(0x7C00)
_M16 = np.uint32(0xFFFF)
_INF32 = np.uint32(0x7F800000)
_TWO112 = np.float32(2.0**112)  # 2^(fp32 bias 127 − fp16 bias 15)
_Q16 = np.uint64(16)
_Q32 = np.uint64(32)
_Q48 = np.uint64(48)
_SIXTEEN = np.uint32(16)
_THIRTEEN = np.uint32(13)

#: rows per tile of :func:`decode_rows_t`
TILE = 32


@jit
def fp16_value(h, flush):
    """The float32 value of the fp16 pattern ``h`` (uint16 or wider, low 16 bits used); with
    ``flush``, subnormals and ±0 read as +0. Finite: the magnitude's bits shifted by 13 read as a
    float32 equal to |value|·2^-112 (normal, or subnormal for fp16 subnormals), so one exact
    multiplication by 2^112 gives |value| (IEEE subnormal operands, no DAZ, as every kernel here
    assumes); inf/NaN:
    exponent all ones, payload shifted (signalling NaNs kept); the sign is or-ed in last."""
    x = np.uint32(h) & _M16
    mag = x & _MAG
    e = x & _EXP
    sign = (x & _SIGN) << _SIXTEEN
    bits = np.float32(np.uint32(mag << _THIRTEEN).view(np.float32) * _TWO112).view(np.uint32)
    if e == _EXP:
        bits = (mag << _THIRTEEN) | _INF32
    if flush and e == 0:
        bits = np.uint32(0)
        sign = np.uint32(0)
    return np.uint32(bits | sign).view(np.float32)


@jit
def decode_tile(bits, p0, n, flush, tmp, out, q0):
    """out[k, q0 + i] = value of bits[p0 + i, k] for i < n ≤ TILE, through ``tmp`` (K, TILE)
    uint16: the rows are read in memory order, the decode runs along contiguous k-rows."""
    K = bits.shape[1]
    for i in range(n):
        src = bits[p0 + i]
        for k in range(K):
            tmp[k, i] = src[k]
    for k in range(K):
        dst = out[k, q0 : q0 + n]
        row = tmp[k]
        for i in range(n):
            dst[i] = fp16_value(row[i], flush)


@jit
def decode_tile4(quad, p0, n, flush, tmp, out, q0):
    """:func:`decode_tile` for rows given as ``quad`` (P, K/4) uint64, each holding four fp16
    patterns in memory order (:func:`quads`), through ``tmp`` (K/4, TILE) uint64: the transpose
    moves four values per load and store; each tmp row is decoded into four rows of ``out``."""
    K4 = quad.shape[1]
    for i in range(n):
        src = quad[p0 + i]
        for k in range(K4):
            tmp[k, i] = src[k]
    for k in range(K4):
        row = tmp[k]
        d0 = out[4 * k, q0 : q0 + n]
        d1 = out[4 * k + 1, q0 : q0 + n]
        d2 = out[4 * k + 2, q0 : q0 + n]
        d3 = out[4 * k + 3, q0 : q0 + n]
        for i in range(n):
            x = row[i]
            d0[i] = fp16_value(x, flush)
            d1[i] = fp16_value(x >> _Q16, flush)
            d2[i] = fp16_value(x >> _Q32, flush)
            d3[i] = fp16_value(x >> _Q48, flush)


def quads(bits: np.ndarray):
    """A C-contiguous (P, K) uint16 array seen as (P, K/4) uint64, element k of a row in bits
    16·(k mod 4) … of quad k // 4 (little-endian machines); None when K is not a multiple of 4,
    the array is not C-contiguous and 8-byte aligned, or the machine is big-endian."""
    ok = (
        sys.byteorder == "little"
        and bits.ndim == 2
        and bits.shape[1] % 4 == 0
        and bits.shape[1] > 0
        and bits.flags.c_contiguous
        and bits.ctypes.data % 8 == 0
    )
    return bits.view(np.uint64) if ok else None


def decode_rows_t(bits, flush, out):
    """out[k, p] = value of bits[p, k] for a (P, K) uint16 array of any strides into a C-ordered
    (K, P) float32 array, ``TILE`` rows at a time (:func:`decode_tile`)."""
    run_tasks(lambda t0, t1: _decode_rows_t_tasks(bits, flush, out, t0, t1), -(-bits.shape[0] // TILE))


@jit
def _decode_rows_t_tasks(bits, flush, out, t0, t1):
    """Tasks ``t0`` … ``t1`` − 1 of :func:`decode_rows_t`."""
    P, K = bits.shape
    for t in range(t0, min(t1, (P + TILE - 1) // TILE)):
        tmp = np.empty((K, TILE), np.uint16)
        decode_tile(bits, t * TILE, min(TILE, P - t * TILE), flush, tmp, out, t * TILE)
