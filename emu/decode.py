"""fp16 bit patterns to float32 values inside numba code, for operands in any memory order.

:func:`fp16_value` is the arithmetic form of :data:`emu.formats.FP16_TO_FP32` (and, with
``flush``, of ``FP16_TO_FP32_FTZ``): the same bits for all 65,536 patterns, NaN payloads kept
(the signalling ones too, which a hardware half-to-single conversion would quiet), and no 256 KiB
table to keep in cache, so LLVM can vectorise it. :func:`decode_rows_t` decodes a block of rows
into the kernels' lane-major layout (the transpose), tile by tile in cache.
"""

from __future__ import annotations

import numpy as np

from .jit import jit, prange

__all__ = ["fp16_value", "decode_tile", "decode_rows_t", "TILE"]

_MAG = np.uint32(0x7FFF)
_SIGN = np.uint32(0x8000)
_EXP = np.uint32(0x7C00)
_BIAS = np.uint32(112 << 23)  # fp32 bias 127 − fp16 bias 15, in the exponent field
_INF32 = np.uint32(0x7F800000)
_MAGIC = np.uint32(0x4B000000)  # 2^23: (2^23 + m) − 2^23 = m exactly
_TWO23 = np.float32(2.0**23)
_TWO_M24 = np.float32(2.0**-24)
_SIXTEEN = np.uint32(16)
_THIRTEEN = np.uint32(13)

#: rows per tile of :func:`decode_rows_t`
TILE = 32


@jit(inline="always")
def fp16_value(h, flush):
    """The float32 value of the fp16 pattern ``h`` (uint16); with ``flush``, subnormals and ±0
    read as +0. Normal: exponent rebiased, significand shifted; inf/NaN: exponent all ones,
    payload shifted; subnormal: m·2^-24 computed exactly in float32, then signed."""
    x = np.uint32(h)
    mag = x & _MAG
    sign = (x & _SIGN) << _SIXTEEN
    e = x & _EXP
    bits = sign | ((mag << _THIRTEEN) + _BIAS)
    if e == _EXP:
        bits = sign | (mag << _THIRTEEN) | _INF32
    v = np.uint32(bits).view(np.float32)
    if e == 0:
        if flush:
            v = np.float32(0.0)
        else:
            sub = (np.uint32(_MAGIC | mag).view(np.float32) - _TWO23) * _TWO_M24
            v = -sub if sign else sub
    return v


@jit(inline="always")
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


@jit(parallel=True)
def decode_rows_t(bits, flush, out):
    """out[k, p] = value of bits[p, k] for a (P, K) uint16 array of any strides into a C-ordered
    (K, P) float32 array, ``TILE`` rows at a time (:func:`decode_tile`)."""
    P, K = bits.shape
    for t in prange((P + TILE - 1) // TILE):
        tmp = np.empty((K, TILE), np.uint16)
        decode_tile(bits, t * TILE, min(TILE, P - t * TILE), flush, tmp, out, t * TILE)
