"""Convolutions as the libraries' implicit GEMMs: forward, backward data and backward weight.

Each pass is one GEMM per group, ``out[m, col] = Σ_kk A[m, kk]·B[kk, col]``, whose gemmK order is
what a kernel's loop nest makes of it; the unit then reduces that sequence in its order
(:func:`emu.gemm`). Taps that fall into the padding are zero products *in* the sequence, as an
implicit-GEMM kernel loads them.

* forward (``y = conv2d(x, w)``): rows k (output channel), columns (n, p, q), gemmK over (c, r, s)
  in the order ``"rsc"`` (filter row, filter column, channel: an NHWC kernel such as CUTLASS's
  ``fprop``) or ``"crs"`` (channel outermost: an NCHW kernel);
* backward data (``dx``): rows c, columns (n, h, w), gemmK over (k, r, s) in the order ``"rsk"``
  or ``"krs"``, with the filter taps ascending (``flip=False``) or descending (``flip=True``: the
  rotated filter of a dgrad written as a forward convolution); with ``skip_invalid`` the taps
  whose output position is not a whole multiple of the stride are left out of the sequence (a
  strided dgrad that iterates each phase's own taps) instead of entering as zeros;
* backward weight (``dw``): rows k, columns (c, r, s), gemmK over (n, p, q) ascending.

Tensors are NCHW values of one format: fp16 or bf16 (float16 or ``ml_dtypes.bfloat16`` values,
or uint16 patterns) or fp32 (float32 values or uint32 patterns); the GEMM operands come back as
bit patterns of the same width (uint16, uint32) with the output index of each GEMM element, so
any unit and schedule runs them. ``rows`` / ``columns`` select a subset of a group's GEMM
outputs (for searches on a sample). :func:`conv_gemm` runs a whole pass through a unit: fp16 and
bf16 operands through units of their format; fp32 operands through the fp32 FMA unit (fp32
without TF32: :func:`emu.simt.fma_gemm`) or a tf32 unit, the operands first rounded to tf32 as
the kernel does (:func:`emu.operands.tf32_operands`: ties to even by default, as GEMMs and sm90
kernels do; ties away for code built for sm_80). Layout transposes (the
``nchwToNhwcKernel`` / ``nhwcToNchwKernel`` around an NHWC kernel) move values without changing
them and are not modelled: an NHWC kernel is its gemmK order (``"rsc"``).

Sources: the implicit-GEMM formulation of CUTLASS (``docs/implicit_gemm_convolution.md``,
github.com/NVIDIA/cutlass, conv2d fprop/dgrad/wgrad iterators; v3.5) and cuDNN's
``CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM``; the (r, s, c) order of the NHWC fprop kernel was
measured on an NVIDIA H200 (fp16emu's library captures).
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from .dot import unit_params
from .gemm import GemmOrder, gemm
from .operands import TF32_ROUNDINGS, input_name, tf32_operands
from .schedule import Schedule
from .simt import fma_gemm, is_fp32_fma
from .units import InputFormat

__all__ = [
    "ConvShape",
    "GemmPiece",
    "PASSES",
    "K_ORDERS",
    "TF32_ROUNDINGS",
    "conv_pieces",
    "conv_gemm",
    "patterns",
    "piece_gemm",
]

PASSES = ("fwd", "bwd_data", "bwd_weight")
#: the gemmK orders each pass accepts
K_ORDERS = {"fwd": ("rsc", "crs"), "bwd_data": ("rsk", "krs"), "bwd_weight": ("npq",)}


@dataclass(frozen=True)
class ConvShape:
    """A 2-D convolution's shapes: input (N, C, H, W), weight (K, C/G, R, S), output (N, K, P, Q)."""

    N: int
    C: int
    H: int
    W: int
    K: int
    R: int
    S: int
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (0, 0)
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1

    def __post_init__(self):
        for name in ("N", "C", "H", "W", "K", "R", "S", "groups"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name}: must be a whole number ≥ 1, got {v!r}")
        if self.C % self.groups or self.K % self.groups:
            raise ValueError(f"groups: {self.groups} does not divide C={self.C} and K={self.K}")
        for name, low in (("stride", 1), ("padding", 0), ("dilation", 1)):
            v = getattr(self, name)
            if len(v) != 2 or any(int(x) != x or x < low for x in v):
                raise ValueError(f"{name}: expected two whole numbers ≥ {low}, got {v!r}")
        if self.P < 1 or self.Q < 1:
            raise ValueError(f"the output would be empty ({self.P}×{self.Q}): filter larger than the padded input")

    @property
    def P(self) -> int:
        return (self.H + 2 * self.padding[0] - self.dilation[0] * (self.R - 1) - 1) // self.stride[0] + 1

    @property
    def Q(self) -> int:
        return (self.W + 2 * self.padding[1] - self.dilation[1] * (self.S - 1) - 1) // self.stride[1] + 1

    @property
    def Cg(self) -> int:
        return self.C // self.groups

    @property
    def Kg(self) -> int:
        return self.K // self.groups

    def out_shape(self, pass_: str) -> tuple[int, ...]:
        return {
            "fwd": (self.N, self.K, self.P, self.Q),
            "bwd_data": (self.N, self.C, self.H, self.W),
            "bwd_weight": (self.K, self.Cg, self.R, self.S),
        }[pass_]

    def gemm_size(self, pass_: str) -> tuple[int, int, int]:
        """(rows, columns, gemmK) of one group's GEMM."""
        return {
            "fwd": (self.Kg, self.N * self.P * self.Q, self.Cg * self.R * self.S),
            "bwd_data": (self.Cg, self.N * self.H * self.W, self.Kg * self.R * self.S),
            "bwd_weight": (self.Kg, self.Cg * self.R * self.S, self.N * self.P * self.Q),
        }[pass_]


def patterns(x, name: str) -> np.ndarray:
    """Bit patterns of a tensor: float16 and ``ml_dtypes.bfloat16`` values and uint16 patterns as
    uint16; float32 values and uint32 patterns as uint32. TypeError otherwise."""
    x = np.asarray(x)
    if x.dtype in (np.uint16, np.uint32):
        return x
    if x.dtype in (np.float16, np.dtype(ml_dtypes.bfloat16)):
        return x.view(np.uint16)
    if x.dtype == np.float32:
        return x.view(np.uint32)
    raise TypeError(
        f"{name}: expected float16, bfloat16 or float32 values or uint16 / uint32 bit patterns, got dtype {x.dtype}"
    )


@dataclass(frozen=True)
class GemmPiece:
    """One GEMM of a pass: ``A`` (rows, gemmK) and ``B`` (gemmK, columns) bit patterns (uint16
    for fp16 and bf16 tensors, uint32 for fp32), and
    ``out_index`` (rows, columns): the flat index of each GEMM output in the pass's output."""

    A: np.ndarray
    B: np.ndarray
    out_index: np.ndarray


def _take_or_zero(t: np.ndarray, idx: tuple, valid: np.ndarray) -> np.ndarray:
    clipped = tuple(np.where(valid, i, 0) for i in np.broadcast_arrays(*idx))
    return np.where(valid, t[clipped], t.dtype.type(0))


def _sel(n: int, subset) -> np.ndarray:
    return np.arange(n) if subset is None else np.asarray(subset, np.int64)


def conv_pieces(
    pass_: str,
    shape: ConvShape,
    first,
    second,
    k_order: str | None = None,
    *,
    flip: bool = False,
    skip_invalid: bool = False,
    channel_block: int = 0,
    channel_tile: int = 0,
    rows=None,
    columns=None,
    groups=None,
) -> list[GemmPiece]:
    """The implicit GEMMs of one pass, one :class:`GemmPiece` per group.

    ``fwd``: ``first`` the input x (N, C, H, W), ``second`` the weight w (K, C/G, R, S);
    ``bwd_data``: ``first`` dy (N, K, P, Q), ``second`` w; ``bwd_weight``: ``first`` dy,
    ``second`` x. ``k_order`` one of :data:`K_ORDERS` for the pass (its first by default).
    ``rows`` / ``columns`` / ``groups`` restrict the pieces to a subset of each GEMM's outputs.
    ``skip_invalid`` (bwd_data only) needs a stride: taps a phase never reads are dropped, so
    the pieces' gemmK differs per column and the GEMM is built per phase (one piece per group and
    phase). ``channel_block`` b > 0 walks the channels (c forward, k backward data) in blocks of
    b, the filter taps inside each block: (c // b, r, s, c % b), as kernels that load b channels
    of every tap per k tile do ("rsc" with b = C/G, "crs" with b = 1). ``channel_tile`` t > 0
    (orders ``"rsc"`` / ``"rsk"`` and channel blocks) pads the channel axis with zero products up
    to a whole multiple of t, for every filter tap: alone, C = 48 with t = 32 gives
    (r, s, c 0…31), (r, s, c 32…47, 16 zeros) per tap; with ``channel_block=t`` the blocks run
    over the padded channels, (c // t, r, s, c % t): the gemmK of an NHWC kernel whose k tile
    holds t channels of one tap, the taps inside each channel tile and the channel predicate
    clearing the rest of the last tile (CUTLASS
    ``include/cutlass/conv/threadblock/conv2d_fprop_activation_tile_access_iterator_optimized.h``),
    so the unit's groups restart with every (tile, tap); measured on H200 cuDNN captures."""
    if pass_ not in PASSES:
        raise ValueError(f"pass: {pass_!r} is not one of {', '.join(PASSES)}")
    k_order = k_order or K_ORDERS[pass_][0]
    if k_order not in K_ORDERS[pass_]:
        raise ValueError(f"k_order: {k_order!r} is not one of {', '.join(K_ORDERS[pass_])} for {pass_}")
    a, b = patterns(first, "first"), patterns(second, "second")
    if a.dtype != b.dtype:
        raise TypeError(f"first, second: one format for both, got {a.dtype.name} and {b.dtype.name} patterns")
    s = shape
    (sh, sw), (ph, pw), (dh, dw) = s.stride, s.padding, s.dilation
    n_rows, n_cols, _ = s.gemm_size(pass_)
    rows_sel, cols_sel = _sel(n_rows, rows), _sel(n_cols, columns)
    out = []
    for g in _sel(s.groups, groups):
        if pass_ == "fwd":
            x, w = a, b
            n, rem = np.divmod(cols_sel, s.P * s.Q)
            p, q = np.divmod(rem, s.Q)
            c, r, t = _k_axes(k_order, s.Cg, s.R, s.S, channel_block, channel_tile)
            live = c < s.Cg
            c = np.where(live, c, 0)
            A = w[(g * s.Kg + rows_sel)[:, None], c[None], r[None], t[None]]
            A = np.where(live[None], A, A.dtype.type(0))
            h = p[None] * sh - ph + r[:, None] * dh
            wi = q[None] * sw - pw + t[:, None] * dw
            valid = (h >= 0) & (h < s.H) & (wi >= 0) & (wi < s.W) & live[:, None]
            B = _take_or_zero(x, (n[None], g * s.Cg + c[:, None], h, wi), valid)
            index = ((n[None] * s.K + g * s.Kg + rows_sel[:, None]) * s.P + p[None]) * s.Q + q[None]
            out.append(GemmPiece(A, B, index))
        elif pass_ == "bwd_weight":
            dy, x = a, b
            c, rem = np.divmod(cols_sel, s.R * s.S)
            r, t = np.divmod(rem, s.S)
            n, rem = np.divmod(np.arange(s.N * s.P * s.Q), s.P * s.Q)
            p, q = np.divmod(rem, s.Q)
            A = dy[n[None], (g * s.Kg + rows_sel)[:, None], p[None], q[None]]
            h = p[:, None] * sh - ph + r[None] * dh
            wi = q[:, None] * sw - pw + t[None] * dw
            valid = (h >= 0) & (h < s.H) & (wi >= 0) & (wi < s.W)
            B = _take_or_zero(x, (n[:, None], g * s.Cg + c[None], h, wi), valid)
            index = (((g * s.Kg + rows_sel[:, None]) * s.Cg + c[None]) * s.R + r[None]) * s.S + t[None]
            out.append(GemmPiece(A, B, index))
        else:
            out.extend(
                _bwd_data_pieces(
                    s, a, b, g, k_order, flip, skip_invalid, channel_block, channel_tile, rows_sel, cols_sel
                )
            )
    return out


def _k_axes(order: str, C: int, R: int, S: int, block: int = 0, tile: int = 0):
    """(c, r, s) of each gemmK position for a forward order (``block``, ``tile``: see
    :func:`conv_pieces`); with a tile, c ≥ C marks the zero products that pad each tap."""
    if tile:
        if order not in ("rsc", "rsk") and not block:
            raise ValueError(
                f"channel_tile: pads the channels of each tap, for the orders rsc / rsk or channel blocks, not {order!r}"
            )
        if block and block % tile and tile % block:
            raise ValueError(f"channel_tile: {tile} and channel_block {block} must divide one another")
        C = -(-C // tile) * tile
    kk = np.arange(C * R * S)
    if block and block < C:
        if C % block:
            raise ValueError(f"channel_block: {block} does not divide the {C} channels")
        cb, rem = np.divmod(kk, R * S * block)
        rs, ci = np.divmod(rem, block)
        r, t = np.divmod(rs, S)
        return cb * block + ci, r, t
    if order in ("rsc", "rsk"):
        rs, c = np.divmod(kk, C)
        r, t = np.divmod(rs, S)
    else:
        c, rs = np.divmod(kk, R * S)
        r, t = np.divmod(rs, S)
    return c, r, t


def _bwd_data_pieces(s: ConvShape, dy, w, g, k_order, flip, skip_invalid, block, tile, rows_sel, cols_sel):
    (sh, sw), (ph, pw), (dh, dw) = s.stride, s.padding, s.dilation
    kk = np.arange(s.Kg * s.R * s.S)
    if tile:
        k, r, t = _k_axes("rsc" if block else k_order, s.Kg, s.R, s.S, block, tile)
    elif block and block < s.Kg:
        k, r, t = _k_axes("rsc", s.Kg, s.R, s.S, block)
    elif k_order == "rsk":
        rs, k = np.divmod(kk, s.Kg)
        r, t = np.divmod(rs, s.S)
    else:
        k, rs = np.divmod(kk, s.R * s.S)
        r, t = np.divmod(rs, s.S)
    if flip:
        r, t = s.R - 1 - r, s.S - 1 - t
    live = k < s.Kg
    k = np.where(live, k, 0)
    n, rem = np.divmod(cols_sel, s.H * s.W)
    h, wi = np.divmod(rem, s.W)
    A = w[(g * s.Kg + k)[None], rows_sel[:, None], r[None], t[None]]
    A = np.where(live[None], A, A.dtype.type(0))
    hp = h[None] + ph - r[:, None] * dh
    wp = wi[None] + pw - t[:, None] * dw
    aligned = (hp % sh == 0) & (wp % sw == 0)
    p, q = hp // sh, wp // sw
    valid = aligned & (p >= 0) & (p < s.P) & (q >= 0) & (q < s.Q) & live[:, None]
    B = _take_or_zero(dy, (n[None], (g * s.Kg + k)[:, None], p, q), valid)
    index = ((n[None] * s.C + g * s.Cg + rows_sel[:, None]) * s.H + h[None]) * s.W + wi[None]
    if not skip_invalid or (sh == 1 and sw == 1):
        return [GemmPiece(A, B, index)]
    pieces = []
    phase = (h + ph) % sh * sw + (wi + pw) % sw
    for ph_id in np.unique(phase):
        cols = np.flatnonzero(phase == ph_id)
        keep = aligned[:, cols[0]]
        pieces.append(GemmPiece(A[:, keep], B[np.ix_(keep, cols)], index[:, cols]))
    return pieces


def piece_gemm(A, B, unit, order: GemmOrder | Schedule | None = None, C=None, *, tf32_rounding: str = "rne"):
    """One piece's GEMM through ``unit``: ``A`` (rows, gemmK) and ``B`` (gemmK, columns) bit
    patterns as :func:`conv_pieces` gives them, ``C`` float32 (broadcastable) or None for +0.

    uint16 patterns are of the unit's input format (fp16 or bf16): :func:`emu.gemm.gemm`.
    uint32 patterns are fp32 tensors: the fp32 FMA unit (:func:`emu.simt.is_fp32_fma`) multiplies
    them whole (:func:`emu.simt.fma_gemm`, a SIMT kernel: fp32 without TF32); a tf32 unit gets
    them rounded to tf32 as ``tf32_rounding`` says (:data:`emu.operands.TF32_ROUNDINGS`: ``"rne"``
    as CUTLASS's ``NumericConverter<tfloat32_t, float>`` and cuBLAS's tf32 GEMMs do, ``"rna"`` as
    cuDNN's sm80 tf32 convolutions do), then drops what is left of the 13 low bits. ValueError
    for any other unit on fp32 patterns."""
    A, B = patterns(A, "A"), patterns(B, "B")
    if A.dtype == np.uint32 or B.dtype == np.uint32:
        if is_fp32_fma(unit):
            return fma_gemm(A, B, C, order)
        params = unit_params(unit)
        if params.input_format != InputFormat.TF32:
            raise ValueError(
                f"unit: multiplies {input_name(params.input_format)}; fp32 operands take the fp32 FMA unit "
                "(fp32 without TF32) or a tf32 unit (input='tf32')"
            )
        A, B = tf32_operands(A, tf32_rounding), tf32_operands(B, tf32_rounding)
    return gemm(A, B, C, unit, order)


def conv_gemm(
    pass_: str,
    shape: ConvShape,
    first,
    second,
    unit,
    order: GemmOrder | Schedule | None = None,
    k_order: str | None = None,
    *,
    flip: bool = False,
    skip_invalid: bool = False,
    channel_block: int = 0,
    channel_tile: int = 0,
    tf32_rounding: str = "rne",
) -> np.ndarray:
    """A whole pass (``fwd``, ``bwd_data``, ``bwd_weight``; operands as :func:`conv_pieces`
    takes them) through ``unit`` in ``order``: each piece of :func:`conv_pieces` run by
    :func:`piece_gemm` and scattered into the output. Returns float32 of
    ``shape.out_shape(pass_)`` (NCHW, KCRS for the weight gradient)."""
    pieces = conv_pieces(
        pass_,
        shape,
        first,
        second,
        k_order,
        flip=flip,
        skip_invalid=skip_invalid,
        channel_block=channel_block,
        channel_tile=channel_tile,
    )
    out = np.zeros(int(np.prod(shape.out_shape(pass_))), np.float32)
    for piece in pieces:
        out[piece.out_index] = piece_gemm(piece.A, piece.B, unit, order, tf32_rounding=tf32_rounding)
    return out.reshape(shape.out_shape(pass_))
