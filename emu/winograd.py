"""Winograd convolutions F(m×m, r×r) in fp32: the input, filter and output transforms with their
order of operations explicit, and the per-position products accumulated over input channels
through a unit.

Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks" (CVPR 2016, arXiv:1509.09308),
§4: with α = m + r − 1, an m×m output tile Y of a stride-1 convolution is

    Y = Aᵀ [ Σ_c (G g_c Gᵀ) ⊙ (Bᵀ d_c B) ] A

for the α×α input tile d_c and the r×r filter g_c of each input channel c. Per position (ξ, ν)
of the α×α transformed tile, the sum over channels is a GEMM: M[ξ,ν] (K × tiles) =
U[ξ,ν] (K × C) · V[ξ,ν] (C × tiles), U = G g Gᵀ, V = Bᵀ d B (the paper's eq. 12); that GEMM runs
through a unit (:func:`winograd_conv2d`'s ``unit`` and ``order``).

**The transforms' arithmetic** (:class:`TransformOrder`). Each transform is two products with a
constant matrix, the left one first (T = Bᵀ d, then V = T B, computed as (Bᵀ Tᵀ)ᵀ: the same
row-by-row rule on the transposed tile). One output of ``C X`` (C a constant matrix) is
Σ_k C[i, k]·X[k, j] in the *natural row-by-row order*: k ascending, the first term C[i, k]·x
rounded to fp32, each further term added in fp32 (RNE): separately (``fused=False``: the
product rounded, then the sum) or as one fused multiply-add (``fused=True``). Coefficients that
are zero are skipped (``skip_zeros``: hand-written transforms such as ``d0 − d2`` have no
zero terms; multiplying by ±1 is exact either way). Coefficients are the fp32 roundings of the
paper's rationals (1/6, 1/12, 1/24 of F(4×4, 3×3)'s G are not fp32 values; exact for
F(2×2, 3×3)).

cuDNN's own order inside each transform (which terms it groups, whether its compiler fuses them,
whether it scales G's rows ahead) is not public: these are parameters to be fixed on captures of
cuDNN's Winograd kernels (``winograd…``, ``winogradForward…``) before any claim of bit
agreement; this module's defaults are the natural order, unfused.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .gemm import GemmOrder, fma32
from .implicit_gemm import piece_gemm
from .schedule import Schedule
from .simt import fma_gemm, fp32_values

__all__ = ["TILES", "TransformOrder", "WinogradTile", "transform", "winograd_conv2d", "winograd_tiles"]


def _fr(rows) -> tuple[tuple[Fraction, ...], ...]:
    return tuple(tuple(Fraction(v) for v in row) for row in rows)


@dataclass(frozen=True)
class WinogradTile:
    """F(m×m, r×r): output tile m, filter r, input tile α = m + r − 1, and the paper's exact
    matrices Bᵀ (α × α), G (α × r), Aᵀ (m × α) as fractions."""

    name: str
    m: int
    r: int
    BT: tuple
    G: tuple
    AT: tuple

    @property
    def alpha(self) -> int:
        return self.m + self.r - 1

    def fp32(self, which: str) -> np.ndarray:
        """``"BT"``, ``"G"`` or ``"AT"`` as fp32 coefficients (each fraction rounded to nearest)."""
        return np.array([[float(v) for v in row] for row in getattr(self, which)], np.float64).astype(np.float32)


#: Lavin & Gray (arXiv:1509.09308) §4.1 F(2×2, 3×3) and §4.2 F(4×4, 3×3)
TILES = {
    "F(2x2,3x3)": WinogradTile(
        "F(2x2,3x3)",
        2,
        3,
        _fr([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]),
        _fr([[1, 0, 0], ["1/2", "1/2", "1/2"], ["1/2", "-1/2", "1/2"], [0, 0, 1]]),
        _fr([[1, 1, 1, 0], [0, 1, -1, -1]]),
    ),
    "F(4x4,3x3)": WinogradTile(
        "F(4x4,3x3)",
        4,
        3,
        _fr(
            [
                [4, 0, -5, 0, 1, 0],
                [0, -4, -4, 1, 1, 0],
                [0, 4, -4, -1, 1, 0],
                [0, -2, -1, 2, 1, 0],
                [0, 2, -1, -2, 1, 0],
                [0, 4, 0, -5, 0, 1],
            ]
        ),
        _fr(
            [
                ["1/4", 0, 0],
                ["-1/6", "-1/6", "-1/6"],
                ["-1/6", "1/6", "-1/6"],
                ["1/24", "1/12", "1/6"],
                ["1/24", "-1/12", "1/6"],
                [0, 0, 1],
            ]
        ),
        _fr([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]),
    ),
}


@dataclass(frozen=True)
class TransformOrder:
    """How a transform's sums are computed (see the module docstring): ``fused`` adds each term
    after the first with one fp32 FMA instead of a rounded product and a rounded add;
    ``skip_zeros`` leaves zero coefficients out of the sums."""

    fused: bool = False
    skip_zeros: bool = True


def _left(C: np.ndarray, X: np.ndarray, how: TransformOrder) -> np.ndarray:
    """C·X over the last-but-one axis of X (X: (..., q, s), C: (p, q) fp32), every output in the
    natural row-by-row order of :class:`TransformOrder`, fp32 RNE throughout."""
    rows = []
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(C.shape[0]):
            acc = None
            for k in range(C.shape[1]):
                c = C[i, k]
                if c == 0 and how.skip_zeros:
                    continue
                x = X[..., k, :]
                if acc is None:
                    acc = (c * x).astype(np.float32)
                elif how.fused:
                    acc = fma32(np.broadcast_to(c, x.shape), x, acc)
                else:
                    acc = (acc + (c * x).astype(np.float32)).astype(np.float32)
            rows.append(np.zeros(X[..., 0, :].shape, np.float32) if acc is None else acc)
    return np.stack(rows, axis=-2)


def transform(C: np.ndarray, X: np.ndarray, how: TransformOrder | None = None) -> np.ndarray:
    """C·X·Cᵀ over the last two axes of X (float32), left product first, each product in the
    order ``how`` (default: natural, unfused, zeros skipped): the input transform with C = Bᵀ,
    the filter transform with C = G, the output transform with C = Aᵀ."""
    how = TransformOrder() if how is None else how
    C = np.asarray(C, np.float32)
    T = _left(C, np.asarray(X, np.float32), how)
    return np.swapaxes(_left(C, np.swapaxes(T, -1, -2), how), -1, -2)


def winograd_tiles(x: np.ndarray, tile: WinogradTile, padding: tuple[int, int], out_hw: tuple[int, int]) -> np.ndarray:
    """The α×α input tiles d (N, C, tiles_h, tiles_w, α, α) of x (N, C, H, W): tile (i, j) starts
    at row i·m − pad_h, column j·m − pad_w; positions outside x read +0."""
    N, C, H, W = x.shape
    a, m = tile.alpha, tile.m
    th, tw = -(-out_hw[0] // m), -(-out_hw[1] // m)
    ph, pw = padding
    padded = np.zeros((N, C, th * m + a - 1, tw * m + a - 1), np.float32)
    hh, ww = min(H, padded.shape[2] - ph), min(W, padded.shape[3] - pw)
    padded[:, :, ph : ph + hh, pw : pw + ww] = x[:, :, :hh, :ww]
    out = np.empty((N, C, th, tw, a, a), np.float32)
    for i in range(th):
        for j in range(tw):
            out[:, :, i, j] = padded[:, :, i * m : i * m + a, j * m : j * m + a]
    return out


def winograd_conv2d(
    x,
    w,
    tile: str | WinogradTile = "F(2x2,3x3)",
    padding: tuple[int, int] = (0, 0),
    *,
    unit=None,
    order: GemmOrder | Schedule | None = None,
    input_order: TransformOrder | None = None,
    filter_order: TransformOrder | None = None,
    output_order: TransformOrder | None = None,
    tf32_rounding: str = "rne",
) -> np.ndarray:
    """The stride-1 convolution of x (N, C, H, W) with w (K, C, r, r) (float32 values or uint32
    patterns; cross-correlation, as the libraries compute it) by Winograd ``tile``
    (:data:`TILES` or a :class:`WinogradTile`), zero ``padding`` (rows, columns).

    Steps, each in fp32 (RNE): V = Bᵀ d B per input tile and channel (``input_order``);
    U = G g Gᵀ per filter (``filter_order``); per position (ξ, ν) of the α×α tile, the GEMM
    M[ξ,ν] = U[ξ,ν] (K × C) · V[ξ,ν] (C × tiles), gemmK = the input channels in ``order``
    (None: ascending), through ``unit``: None or the fp32 FMA unit for the SIMT chain of
    :func:`emu.simt.fma_gemm`, or a tf32 unit (operands rounded to tf32 first,
    ``tf32_rounding``; :func:`emu.implicit_gemm.piece_gemm`); then Y = Aᵀ M A per output tile
    (``output_order``), cropped to the output. Returns float32 (N, K, P, Q)."""
    t = TILES[tile] if isinstance(tile, str) else tile
    x, w = np.asarray(fp32_values(x, "x")), np.asarray(fp32_values(w, "w"))
    if x.ndim != 4 or w.ndim != 4 or w.shape[1] != x.shape[1] or w.shape[2:] != (t.r, t.r):
        raise ValueError(f"x, w: need (N, C, H, W) and (K, C, {t.r}, {t.r}), got {x.shape} and {w.shape}")
    N, C, H, W = x.shape
    K = w.shape[0]
    P, Q = H + 2 * padding[0] - t.r + 1, W + 2 * padding[1] - t.r + 1
    if P < 1 or Q < 1:
        raise ValueError(f"the output would be empty ({P}×{Q})")
    a = t.alpha
    d = winograd_tiles(x, t, padding, (P, Q))  # (N, C, th, tw, α, α)
    th, tw = d.shape[2], d.shape[3]
    V = transform(t.fp32("BT"), d, input_order)  # (N, C, th, tw, α, α)
    U = transform(t.fp32("G"), w, filter_order)  # (K, C, α, α)
    # per position: (K × C) · (C × N·th·tw)
    Vp = V.transpose(4, 5, 1, 0, 2, 3).reshape(a, a, C, N * th * tw)
    Up = U.transpose(2, 3, 0, 1)
    M = np.empty((a, a, K, N * th * tw), np.float32)
    for xi in range(a):
        for nu in range(a):
            u_pos, v_pos = np.ascontiguousarray(Up[xi, nu]), np.ascontiguousarray(Vp[xi, nu])
            if unit is None:
                M[xi, nu] = fma_gemm(u_pos, v_pos, None, order)
            else:
                M[xi, nu] = piece_gemm(u_pos, v_pos, unit, order, tf32_rounding=tf32_rounding)
    M = M.reshape(a, a, K, N, th, tw).transpose(3, 2, 4, 5, 0, 1)  # (N, K, th, tw, α, α)
    Y = transform(t.fp32("AT"), M, output_order)  # (N, K, th, tw, m, m)
    m = t.m
    out = Y.transpose(0, 1, 2, 4, 3, 5).reshape(N, K, th * m, tw * m)
    return np.ascontiguousarray(out[:, :, :P, :Q])
