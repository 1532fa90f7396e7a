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

import functools
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .gemm import GemmOrder, fma32, fp32_of_odd_sum
from .implicit_gemm import piece_gemm
from .schedule import Schedule
from .simt import fma_gemm, fp32_values

__all__ = [
    "CUDNN_13_POINTS",
    "CUDNN_FPROP_TILE",
    "CUDNN_WGRAD_POINTS",
    "TILES",
    "TransformOrder",
    "WinogradTile",
    "cudnn_data_rows",
    "cudnn_data_rows_13",
    "cudnn_fprop_f4x4_3x3",
    "cudnn_fprop_f9x9_5x5",
    "cudnn_wgrad_delta_rows_13",
    "cudnn_wgrad_f3x3_4x4",
    "cudnn_wgrad_f5x5_9x9",
    "cudnn_wgrad_output_rows_13",
    "fractions_in_output",
    "literal8",
    "toom_cook_tile",
    "transform",
    "winograd_conv2d",
    "winograd_tiles",
]


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


def _poly(roots) -> list[Fraction]:
    """Coefficients (ascending powers) of the monic polynomial with these roots."""
    out = [Fraction(1)]
    for p in roots:
        out = [(out[k - 1] if k else 0) - p * (out[k] if k < len(out) else 0) for k in range(len(out) + 1)]
    return out


def toom_cook_tile(m: int, r: int, points, name: str | None = None) -> WinogradTile:
    """F(m, r) built by the Toom-Cook construction at the α − 1 finite ``points`` and ∞ (α = m +
    r − 1; Lavin & Gray, arXiv:1509.09308, §4; the fractions in G, as github.com/andravin/wincnn
    ``cookToomFilter`` does by default): Aᵀ[i, j] = p_j^i; G[j, k] = p_j^k / f_j with f_j =
    Π_{l≠j} (p_j − p_l); row j of Bᵀ the coefficients of Π_{l≠j} (x − p_l) (the last row:
    Π_l (x − p_l)); the ∞ column of Aᵀ and row of G pick the highest power. Points (0, 1, −1, 2,
    −2) give :data:`TILES`' F(4×4, 3×3). The result is checked exactly: Aᵀ[(G g) ⊙ (Bᵀ d)] is the
    correlation of d with g for every unit d and g (a ValueError otherwise, e.g. repeated points)."""
    a = m + r - 1
    pts = [Fraction(p) for p in points]
    if len(pts) != a - 1 or len(set(pts)) != len(pts):
        raise ValueError(f"points: need {a - 1} distinct finite points for F({m}, {r}), got {list(points)}")
    AT = [[p**i for p in pts] + [Fraction(int(i == m - 1))] for i in range(m)]
    f = [_prod(pj - pl for pl in pts if pl != pj) for pj in pts]
    G = [[pj**k / fj for k in range(r)] for pj, fj in zip(pts, f)] + [[Fraction(int(k == r - 1)) for k in range(r)]]
    BT = [_poly([pl for pl in pts if pl != pj]) + [Fraction(0)] for pj in pts] + [_poly(pts)]
    for i in range(m):  # exact check of the bilinear identity
        for k in range(r):
            for lo in range(a):
                got = sum(AT[i][j] * G[j][k] * BT[j][lo] for j in range(a))
                if got != (lo == i + k):
                    raise ValueError(f"points {list(points)}: the Toom-Cook matrices do not give F({m}, {r})")
    label = name or f"F({m}x{m},{r}x{r}) at {', '.join(str(p) for p in pts)}, inf"
    return WinogradTile(label, m, r, tuple(map(tuple, BT)), tuple(map(tuple, G)), tuple(map(tuple, AT)))


def fractions_in_output(tile: WinogradTile, name: str | None = None) -> WinogradTile:
    """The same F(m×m, r×r) with each row of G divided by its first nonzero entry s_j (1/f_j for
    a Toom-Cook tile's finite point, 1 for ∞) and column j of Aᵀ multiplied by it, so that the
    filter transform is the plain Vandermonde rows and the fractions are taken in the output
    transform: Aᵀ[(G g) ⊙ (Bᵀ d)] is unchanged in exact arithmetic (only the fp32 roundings
    move)."""
    scale = [next(v for v in row if v != 0) for row in tile.G]
    G = tuple(tuple(v / s for v in row) for row, s in zip(tile.G, scale))
    AT = tuple(tuple(v * s for v, s in zip(row, scale)) for row in tile.AT)
    return WinogradTile(name or f"{tile.name}, fractions in A^T", tile.m, tile.r, tile.BT, G, AT)


def _prod(xs) -> Fraction:
    out = Fraction(1)
    for x in xs:
        out *= x
    return out


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

    def gemm(u_pos, v_pos):
        if unit is None:
            return fma_gemm(u_pos, v_pos, None, order)
        return piece_gemm(u_pos, v_pos, unit, order, tf32_rounding=tf32_rounding)

    return _positionwise(
        x,
        w,
        t,
        padding,
        lambda d: transform(t.fp32("BT"), d, input_order),
        lambda g: transform(t.fp32("G"), g, filter_order),
        gemm,
        lambda M: transform(t.fp32("AT"), M, output_order),
    )


def _positionwise(x, w, t: WinogradTile, padding, data, filt, gemm, output) -> np.ndarray:
    """The forward convolution by tile ``t`` with its steps given: x (N, C, H, W) cut into α×α
    tiles every m from −padding (:func:`winograd_tiles`), V = ``data``(tiles) and U =
    ``filt``(w) (both over the last two axes), per position (ξ, ν) M = ``gemm``(U (K × C),
    V (C × N·tiles)), Y = ``output``(M (N, K, th, tw, α, α)) of m×m tiles, cropped to the output.
    x, w: float32 values or uint32 patterns. Returns float32 (N, K, P, Q)."""
    x, w = np.asarray(fp32_values(x, "x")), np.asarray(fp32_values(w, "w"))
    if x.ndim != 4 or w.ndim != 4 or w.shape[1] != x.shape[1] or w.shape[2:] != (t.r, t.r):
        raise ValueError(f"x, w: need (N, C, H, W) and (K, C, {t.r}, {t.r}), got {x.shape} and {w.shape}")
    N, C, H, W = x.shape
    K = w.shape[0]
    P, Q = H + 2 * padding[0] - t.r + 1, W + 2 * padding[1] - t.r + 1
    if P < 1 or Q < 1:
        raise ValueError(f"the output would be empty ({P}×{Q})")
    a, m = t.alpha, t.m
    d = winograd_tiles(x, t, padding, (P, Q))  # (N, C, th, tw, α, α)
    th, tw = d.shape[2], d.shape[3]
    V = data(d)  # (N, C, th, tw, α, α)
    U = filt(w)  # (K, C, α, α)
    # per position: (K × C) · (C × N·th·tw)
    Vp = V.transpose(4, 5, 1, 0, 2, 3).reshape(a, a, C, N * th * tw)
    Up = U.transpose(2, 3, 0, 1)
    M = np.empty((a, a, K, N * th * tw), np.float32)
    for xi in range(a):
        for nu in range(a):
            M[xi, nu] = gemm(np.ascontiguousarray(Up[xi, nu]), np.ascontiguousarray(Vp[xi, nu]))
    M = M.reshape(a, a, K, N, th, tw).transpose(3, 2, 4, 5, 0, 1)  # (N, K, th, tw, α, α)
    Y = output(M)  # (N, K, th, tw, m, m)
    out = Y.transpose(0, 1, 2, 4, 3, 5).reshape(N, K, th * m, tw * m)
    return np.ascontiguousarray(out[:, :, :P, :Q])


#: the finite points of cuDNN's ``winograd_nonfused::winogradWgrad…4x4`` kernels (and ∞): F(3×3,
#: 4×4), the dual of F(4×4, 3×3) at (0, ±1, ±1/2) — the reciprocals of Lavin & Gray's ±2
CUDNN_WGRAD_POINTS = (Fraction(0), Fraction(1), Fraction(-1), Fraction(1, 2), Fraction(-1, 2))
_C = np.float32(2 / 3)  # RN32(2/3): the non-dyadic part of every 1/f_j at these points


def _rn(x) -> np.ndarray:
    return np.asarray(x, np.float32)


def _sum_rn32(terms) -> np.ndarray:
    """RN32 of the exact sum of float32 arrays (error-free float64 sums, then round to odd before
    the one rounding to fp32, as :func:`emu.gemm.fma32`)."""
    hi = np.zeros(np.broadcast(*terms).shape)
    lo = np.zeros_like(hi)
    for t in terms:
        t = np.asarray(t, np.float32).astype(np.float64)
        s = hi + t
        bb = s - hi
        lo = lo + ((hi - (s - bb)) + (t - bb))
        hi = s
    s = hi + lo
    bb = s - hi
    return fp32_of_odd_sum(s, (hi - (s - bb)) + (lo - bb))


def cudnn_data_rows(X: np.ndarray, axis: int) -> np.ndarray:
    """One pass of the data transform Bᵀ d B (X float32, the 6 rows of a tile along ``axis``):
    Bᵀ at (0, ±1, ±1/2, ∞) as cuDNN's weight-gradient data transform rounds it (measured; the
    forward's ``winogradForwardData4x4`` takes the same forms, indistinguishable on 16-bit data):
    row 0 RN(RN(d0/4 + RN(−5/4·d2)) + d4); t0 = RN(d4 − d2/4), t1 = RN(d3 − d1/4), rows 1, 2
    RN(t0 ± t1); t2 = RN(d4 − d2), t3 = RN(d3 − d1), rows 3, 4 RN(t2 ± t3/2); row 5 as row 0 on
    d1, d3, d5. Products by powers of two are exact."""
    d = [np.take(X, k, axis=axis) for k in range(6)]
    m54 = np.float32(-1.25)
    r0 = _rn(_rn(np.float32(0.25) * d[0] + _rn(m54 * d[2])) + d[4])
    r5 = _rn(_rn(np.float32(0.25) * d[1] + _rn(m54 * d[3])) + d[5])
    t0, t1 = _rn(d[4] - np.float32(0.25) * d[2]), _rn(d[3] - np.float32(0.25) * d[1])
    t2, t3 = _rn(d[4] - d[2]), _rn(d[3] - d[1])
    h = np.float32(0.5) * t3
    return np.stack([r0, _rn(t0 + t1), _rn(t0 - t1), _rn(t2 + h), _rn(t2 - h), r5], axis=axis)


CUDNN_13_POINTS = tuple(
    Fraction(p) for p in (0, 1, -1, Fraction(1, 2), Fraction(-1, 2), Fraction(1, 3), Fraction(-1, 3),
                          Fraction(3, 2), Fraction(-3, 2), -3, 2, -2)
)  # fmt: skip
"""The finite points of cuDNN's 13-point Winograd kernels (``winograd_nonfused::…9x9_5x5``:
F(9×9, 5×5) forward, F(5×5, 9×9) for the weight gradient), in the order of the transformed
tile's rows; the 13th is ∞. Measured on an NVIDIA H200 (cuDNN 9.19): the data transform that
cuDNN writes to its workspace is Bᵀ d B of :func:`toom_cook_tile` at these points, bit for bit
with :func:`cudnn_data_rows_13`. Not symmetric: −3 without +3."""


@functools.lru_cache(maxsize=2)
def _tile13(m: int, r: int) -> WinogradTile:
    """F(m×m, r×r) at :data:`CUDNN_13_POINTS` (built and checked once)."""
    return toom_cook_tile(m, r, CUDNN_13_POINTS)


def cudnn_data_rows_13(X: np.ndarray, axis: int) -> np.ndarray:
    """One pass of the data transform Bᵀ d B of cuDNN's ``winogradForwardData9x9_5x5`` (X
    float32, the 13 rows of a 13×13 tile along ``axis``; the kernel runs the pass along the
    tile's last axis first, then along the other): row j is Σ_k RN32(Bᵀ[j, k])·d_k, one fp32
    FMA chain over k ascending from the rounded first product, zero coefficients skipped, except
    two rows that share the rounded product P = RN(Bᵀ[0, 3]·d3) (their odd coefficients are the
    same): the point-0 row adds P with a separate rounding after its k = 2 term, and the −3 row
    starts from P, then k = 1, 5, 7, 9, 11 (measured bit for bit on the workspace of H200
    captures, fp32, fp16 and bf16 operands, forward and weight gradient)."""
    BT = _tile13(9, 5).fp32("BT")
    d = [np.take(X, k, axis=axis) for k in range(13)]
    shared = _rn(BT[0, 3] * d[3])
    rows = []
    for j in range(13):
        if j == 9:  # the point −3: odd coefficients only, from the shared product
            terms, acc = [1, 5, 7, 9, 11], shared
        else:
            terms = [k for k in range(13) if BT[j, k] != 0]
            acc, terms = _rn(BT[j, terms[0]] * d[terms[0]]), terms[1:]
        for k in terms:
            if j == 0 and k == 3:
                acc = _rn(acc + shared)
            else:
                acc = fma32(np.broadcast_to(BT[j, k], d[k].shape), d[k], acc)
        rows.append(acc)
    return np.stack(rows, axis=axis)


def literal8(value) -> np.float32:
    """A constant as cuDNN's 13-point kernels hold it (measured): the fp32 rounding of the exact
    value, printed with 8 digits after the decimal point, read back as an fp32 literal (e.g.
    1/3062.5 → 0.00032653, 21 ulps below RN32(0.000326530612…)); exact for integers and short
    dyadics."""
    return np.float32(float(f"{float(np.float32(float(value))):.8f}"))


def _chain_rows(C: np.ndarray, X: np.ndarray, axis: int, from_k1=frozenset()) -> np.ndarray:
    """C·X along ``axis`` (C fp32 constants): row i one FMA chain over k ascending, zero
    coefficients skipped, the first term ``x`` itself where its coefficient is 1 (else the
    rounded product), ±1 terms added; rows in ``from_k1`` start from their second nonzero term,
    then the first (nvcc's contraction of ``c0·x0 + c1·x1 + …``)."""
    x = [np.take(X, k, axis=axis) for k in range(C.shape[1])]
    rows = []
    for i in range(C.shape[0]):
        order = [k for k in range(C.shape[1]) if C[i, k] != 0]
        if i in from_k1 and len(order) > 1:
            order[0], order[1] = order[1], order[0]
        acc = None
        for k in order:
            c = C[i, k]
            if acc is None:
                acc = x[k] if c == 1 else _rn(c * x[k])
            elif c in (1, -1):
                acc = _rn(acc + c * x[k])
            else:
                acc = fma32(np.broadcast_to(c, x[k].shape), x[k], acc)
        rows.append(acc)
    return np.stack(rows, axis=axis)


#: rows of the 13-point delta transform whose FMA chain starts from the k = 1 product (measured:
#: RN(c1·e1), then c0·e0, c2·e2, … fused); the other rows start from k = 0
_DELTA13_FROM_K1 = frozenset({1, 2, 5, 6, 10, 11})


@functools.lru_cache(maxsize=1)
def _delta13() -> np.ndarray:
    tile = _tile13(5, 9)
    return np.array([[literal8(v) for v in row] for row in tile.G], np.float32)


def cudnn_wgrad_delta_rows_13(E: np.ndarray, axis: int) -> np.ndarray:
    """One pass of U = G e Gᵀ of ``winogradWgradDelta9x9_5x5`` (E float32, 9 rows along ``axis``;
    13 out): G[j, k] = p_j^k / f_j (:func:`toom_cook_tile`, the fractions in G) as
    :func:`literal8` constants; row j one FMA chain over k ascending from the rounded first
    product (from k = 1, then k = 0, for the rows of :data:`_DELTA13_FROM_K1`), the ∞ row e8."""
    return _chain_rows(_delta13(), E, axis, _DELTA13_FROM_K1)


@functools.lru_cache(maxsize=1)
def _output13() -> np.ndarray:
    tile = _tile13(5, 9)
    return np.array([[literal8(v) for v in row] for row in tile.AT], np.float32)


def cudnn_wgrad_output_rows_13(M: np.ndarray, axis: int) -> np.ndarray:
    """One pass of Aᵀ M A of ``winogradWgradOutput9x9_5x5`` (13 rows along ``axis``; 5 out):
    Aᵀ[i, j] = p_j^i (∞: the last row) as :func:`literal8` constants, each row one FMA chain over
    j ascending, zero coefficients skipped, ±1 ones added (measured)."""
    return _chain_rows(_output13(), M, axis)


def _wgrad_positionwise(x, dy, r: int, m: int, padding, data, delta, output) -> np.ndarray:
    """The weight gradient dW (K, C, r, r) of an r×r, stride-1 convolution by a Winograd F(r×r,
    m×m) with its steps given: dy (N, K, P, Q) cut into m×m tiles from (0, 0) (+0 past its edge),
    x (N, C, H, W) into the α×α tiles (α = m + r − 1) they see, from −padding (+0 outside x);
    V = ``data``(x tiles), U = ``delta``(dy tiles) (both over the last two axes); per position of
    the α×α tile M = U·V (K × C), one fp32 FMA chain from +0 over the tiles (image, tile row,
    tile column) ascending (cuDNN's ``…ffma`` GEMM); dW = ``output``(M (K, C, α, α)). x, dy:
    float32 values or uint32 patterns. Returns float32."""
    x, dy = np.asarray(fp32_values(x, "x")), np.asarray(fp32_values(dy, "dy"))
    if x.ndim != 4 or dy.ndim != 4 or x.shape[0] != dy.shape[0]:
        raise ValueError(f"x, dy: need (N, C, H, W) and (N, K, P, Q), got {x.shape} and {dy.shape}")
    N, C, H, W = x.shape
    K, P, Q = dy.shape[1:]
    ph, pw = padding
    if (P, Q) != (H + 2 * ph - r + 1, W + 2 * pw - r + 1):
        want = f"{H + 2 * ph - r + 1}x{W + 2 * pw - r + 1}"
        raise ValueError(
            f"dy: a {r}x{r} stride-1 convolution of {H}x{W} with padding {padding} gives {want}, got {P}x{Q}"
        )
    a = m + r - 1
    th, tw = -(-P // m), -(-Q // m)
    e = np.zeros((N, K, th * m, tw * m), np.float32)
    e[:, :, :P, :Q] = dy
    xp = np.zeros((N, C, th * m + r - 1, tw * m + r - 1), np.float32)
    hh, ww = min(H, xp.shape[2] - ph), min(W, xp.shape[3] - pw)
    xp[:, :, ph : ph + hh, pw : pw + ww] = x[:, :, :hh, :ww]
    d = np.empty((N, C, th, tw, a, a), np.float32)
    et = np.empty((N, K, th, tw, m, m), np.float32)
    for i in range(th):
        for j in range(tw):
            d[:, :, i, j] = xp[:, :, m * i : m * i + a, m * j : m * j + a]
            et[:, :, i, j] = e[:, :, m * i : m * i + m, m * j : m * j + m]
    V, U = data(d), delta(et)
    L = N * th * tw
    Vp = V.transpose(4, 5, 0, 2, 3, 1).reshape(a, a, L, C)
    Up = U.transpose(4, 5, 1, 0, 2, 3).reshape(a, a, K, L)
    M = np.empty((K, C, a, a), np.float32)
    for xi in range(a):
        for nu in range(a):
            M[:, :, xi, nu] = fma_gemm(np.ascontiguousarray(Up[xi, nu]), np.ascontiguousarray(Vp[xi, nu]))
    return output(M)


def cudnn_wgrad_f5x5_9x9(x, dy, padding: tuple[int, int] = (2, 2)) -> np.ndarray:
    """The weight gradient dW (K, C, 5, 5) of a 5×5, stride-1 convolution as cuDNN's
    ``winograd_nonfused::winogradForwardData9x9_5x5``, ``winogradWgradDelta9x9_5x5`` and
    ``winogradWgradOutput9x9_5x5`` kernels and the fp32 GEMM between them compute it (measured
    bit for bit on NVIDIA H200 captures, cuDNN 9.19, fp32, fp16 and bf16 operands, the
    transforms and the GEMM also on cuDNN's workspace; docs/silicon/h200-convolutions.md).
    x (N, C, H, W), dy (N, K, P, Q): float32 values or uint32 fp32 patterns (fp16/bf16 values
    widened exactly); ``padding`` (rows, columns) of the forward convolution. Returns float32.

    F(5×5, 9×9) at :data:`CUDNN_13_POINTS` and ∞ (13×13 tiles): dy is cut into 9×9 tiles from
    (0, 0) (+0 past its edge), x into the 13×13 tiles they see (from −padding, +0 outside x).
    Per tile: V = Bᵀ d B (:func:`cudnn_data_rows_13`) and U = G e Gᵀ
    (:func:`cudnn_wgrad_delta_rows_13`), each the pass along the tile's last axis first; per position
    of the 13×13 tile, M = U·V (K × C) one fp32 FMA chain from +0 over the tiles (image, tile
    row, tile column) ascending; then dW = Aᵀ M A (:func:`cudnn_wgrad_output_rows_13`), the pass along
    the first axis first."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _wgrad_positionwise(
            x,
            dy,
            5,
            9,
            padding,
            lambda d: cudnn_data_rows_13(cudnn_data_rows_13(d, 5), 4),
            lambda e: cudnn_wgrad_delta_rows_13(cudnn_wgrad_delta_rows_13(e, 5), 4),
            lambda M: cudnn_wgrad_output_rows_13(cudnn_wgrad_output_rows_13(M, 2), 3),
        )


@functools.lru_cache(maxsize=1)
def _fprop13() -> tuple[WinogradTile, np.ndarray, np.ndarray]:
    """The tile, G and Aᵀ of cuDNN's 13-point forward, G and Aᵀ as :func:`literal8` constants: G
    the plain Vandermonde rows (1, p, …, p⁴), the fractions 1/f_j in Aᵀ (:func:`fractions_in_output`)."""
    tile = fractions_in_output(_tile13(9, 5))
    G = np.array([[literal8(v) for v in row] for row in tile.G], np.float32)
    AT = np.array([[literal8(v) for v in row] for row in tile.AT], np.float32)
    return tile, G, AT


def cudnn_fprop_f9x9_5x5(x, w, padding: tuple[int, int] = (2, 2)) -> np.ndarray:
    """The 5×5, stride-1 forward convolution of x (N, C, H, W) by w (K, C, 5, 5) (float32 values or
    uint32 fp32 patterns; fp16/bf16 values widened exactly) as cuDNN's
    ``winograd_nonfused::winogradForward{Data,Filter,Output}9x9_5x5`` kernels and their fp32 FFMA
    GEMM compute it (measured bit for bit on NVIDIA H200 captures, cuDNN 9.19: fp32, fp16 and
    bf16 operands, each stage also on cuDNN's workspace; docs/silicon/h200-convolutions.md).
    ``padding`` (rows, columns). Returns float32 (N, K, P, Q).

    F(9×9, 5×5) at :data:`CUDNN_13_POINTS` and ∞: x cut into 13×13 tiles every 9 from −padding
    (+0 outside, the output cropped); V = Bᵀ d B (:func:`cudnn_data_rows_13`, the pass along the
    tile's last axis first); U = G g Gᵀ with G the plain Vandermonde rows as :func:`literal8`
    constants, each row one FMA chain (the pass along the filter's first axis first); per position
    of the 13×13 tile one fp32 FMA chain from +0 over the input channels ascending (the ``…ffma``
    GEMM); then Y = Aᵀ M A with the fractions 1/f_j in Aᵀ (:func:`literal8`), each row one FMA
    chain, row 0 (Σ_j m_j/f_j) from its j = 1 term, the pass along the tile's last axis first."""
    tile, G, AT = _fprop13()
    with np.errstate(over="ignore", invalid="ignore"):
        return _positionwise(
            x,
            w,
            tile,
            padding,
            lambda d: cudnn_data_rows_13(cudnn_data_rows_13(d, 5), 4),
            lambda g: _chain_rows(G, _chain_rows(G, g, 2), 3),
            fma_gemm,
            lambda M: _chain_rows(AT, _chain_rows(AT, M, 5, {0}), 4, {0}),
        )


def _wgrad_delta_rows(E: np.ndarray, axis: int, fused_12: bool = True) -> np.ndarray:
    """A = (Aᵀ)ᵀ with the 1/f_j of the points (4, 2/3, 2/3, −8/3, −8/3, 1) along ``axis`` as
    cuDNN's delta transform rounds it (measured), c = RN32(2/3): the even and odd halves of rows
    1, 2 fma(c, e0, RN(c·e2)) and fma(c, e1, RN(c·e3)) (``fused_12``; else RN(RN(c·e0) + RN(c·e2))
    and RN(RN(c·e1) + RN(c·e3))), rows 1, 2 their sum and difference; rows 3, 4 likewise from
    fma(−4c, e0, RN(−c·e2)) and fma(−2c, e1, RN(−c/2·e3)); row 0 4·e0, row 5 e3."""
    e = [np.take(E, k, axis=axis) for k in range(4)]
    c = _C
    if fused_12:
        ev1, od1 = fma32(c, e[0], _rn(c * e[2])), fma32(c, e[1], _rn(c * e[3]))
    else:
        ev1, od1 = _rn(_rn(c * e[0]) + _rn(c * e[2])), _rn(_rn(c * e[1]) + _rn(c * e[3]))
    ev3 = fma32(np.float32(-4) * c, e[0], _rn(-c * e[2]))
    od3 = fma32(np.float32(-2) * c, e[1], _rn(np.float32(-0.5) * c * e[3]))
    rows = [np.float32(4) * e[0], _rn(ev1 + od1), _rn(ev1 - od1), _rn(ev3 + od3), _rn(ev3 - od3), e[3]]
    return np.stack([_rn(r) for r in rows], axis=axis)


def _wgrad_output_rows(M: np.ndarray, axis: int) -> np.ndarray:
    """Gᵀ·f (the Vandermonde rows 1, p_j, p_j² and ∞) along ``axis`` as cuDNN's output transform
    rounds it (measured): t0 = RN(m1 + m2), t1 = RN(m3 + m4); row 0 RN(RN(m0 + t0) + t1); row 1
    RN(RN(m1 − m2) + (m3 − m4)/2) with m3 − m4 not rounded on its own; row 2 RN(RN(m5 + t0) +
    t1/4)."""
    m = [np.take(M, k, axis=axis) for k in range(6)]
    t0, t1 = _rn(m[1] + m[2]), _rn(m[3] + m[4])
    r0 = _rn(_rn(m[0] + t0) + t1)
    half = np.float32(0.5)
    r1 = _sum_rn32([_rn(m[1] - m[2]), half * m[3], -half * m[4]])
    r2 = _rn(_rn(m[5] + t0) + np.float32(0.25) * t1)
    return np.stack([r0, r1, r2], axis=axis)


def cudnn_wgrad_f3x3_4x4(x, dy, padding: tuple[int, int] = (0, 0)) -> np.ndarray:
    """The weight gradient dW (K, C, 3, 3) of a 3×3, stride-1 convolution as cuDNN's
    ``winograd_nonfused::winogradWgrad{Data,Delta,Output}4x4`` kernels and their fp32 FFMA GEMM
    compute it (measured bit for bit on NVIDIA H200 captures, cuDNN 9.19: fp32 and fp16 operands,
    docs/silicon/h200-convolutions.md). x (N, C, H, W), dy (N, K, P, Q): float32 values or uint32
    fp32 patterns (fp16/bf16 values widened exactly); ``padding`` (rows, columns) of the forward
    convolution.

    F(3×3, 4×4), the dual of F(4×4, 3×3) (:func:`toom_cook_tile` at :data:`CUDNN_WGRAD_POINTS`):
    dy is cut into 4×4 tiles from (0, 0) (+0 past its edge), x into the 6×6 tiles they see (from
    −padding, +0 outside x). Per tile: V = Bᵀ d B from the x tile (rows first, then columns, each
    pass as :func:`cudnn_data_rows`), U = A e Aᵀ from the dy tile (rows first, then columns,
    :func:`_wgrad_delta_rows`; in the column pass of the tile's last row rows 1 and 2 are not
    fused). Per position (ξ, ν) of the 6×6 tile, M = U·V (K × C) is one fp32 FMA chain from +0
    over the tiles (image n, tile row, tile column) ascending (the ``…ffma`` GEMM). Then
    dW = Gᵀ M G (rows first, then columns, :func:`_wgrad_output_rows`). Returns float32."""

    def delta(e):
        T = _wgrad_delta_rows(e, 4)
        U = _wgrad_delta_rows(T, 5)
        U[..., 5, :] = _wgrad_delta_rows(T[..., 5, :], 4, fused_12=False)
        return U

    with np.errstate(over="ignore", invalid="ignore"):
        return _wgrad_positionwise(
            x,
            dy,
            3,
            4,
            padding,
            lambda d: cudnn_data_rows(cudnn_data_rows(d, 4), 5),
            delta,
            lambda M: _wgrad_output_rows(_wgrad_output_rows(M, 2), 3),
        )


def _fprop_output_rows(M: np.ndarray, axis: int, fuse_m2: bool) -> np.ndarray:
    """Aᵀ with the 1/f_j of the points (4, 2/3, 2/3, −8/3, −8/3, 1) in its columns along
    ``axis``, as cuDNN's forward output transform rounds it (measured), c = RN32(2/3), every
    product by a coefficient rounded unless fused:

    - row 0: RN(a + fma(−4c, m3, RN(−4c·m4))), a = RN(RN(4m0 + RN(c·m1)) + RN(c·m2));
    - row 1: RN(p + fma(2c, m4, RN(−2c·m3))), p = RN(RN(c·m1) + RN(−c·m2));
    - row 2: RN(s + fma(−c, m3, RN(−c·m4))), s = RN(RN(c·m1) + RN(c·m2));
    - row 3: RN(RN(p + fma(c/2, m4, RN(−c/2·m3))) + m5).

    With ``fuse_m2`` (the column pass; both passes of the fp32 kernels) the m2 terms are fused
    too: a = fma(c, m2, RN(4m0 + RN(c·m1))), p = fma(−c, m2, RN(c·m1)), s = fma(c, m2, RN(c·m1))."""
    m = [np.take(M, k, axis=axis) for k in range(6)]
    c, four, two, half = _C, np.float32(4), np.float32(2), np.float32(0.5)
    cm1 = _rn(c * m[1])
    if fuse_m2:
        a = fma32(c, m[2], _rn(four * m[0] + cm1))
        p, s = fma32(-c, m[2], cm1), fma32(c, m[2], cm1)
    else:
        a = _rn(_rn(four * m[0] + cm1) + _rn(c * m[2]))
        p, s = _rn(cm1 + _rn(-c * m[2])), _rn(cm1 + _rn(c * m[2]))
    r0 = _rn(a + fma32(-four * c, m[3], _rn(-four * c * m[4])))
    r1 = _rn(p + fma32(two * c, m[4], _rn(-two * c * m[3])))
    r2 = _rn(s + fma32(-c, m[3], _rn(-c * m[4])))
    r3 = _rn(_rn(p + fma32(half * c, m[4], _rn(-half * c * m[3]))) + m[5])
    return np.stack([r0, r1, r2, r3], axis=axis)


#: F(4×4, 3×3) at :data:`CUDNN_WGRAD_POINTS` with the filter transform the plain Vandermonde rows
#: (1, p, p²) and the fractions 1/f_j in the output transform: the basis of cuDNN's forward kernels
CUDNN_FPROP_TILE = fractions_in_output(
    toom_cook_tile(4, 3, CUDNN_WGRAD_POINTS), "F(4x4,3x3) at (0, ±1, ±1/2, inf), fractions in the output transform"
)


def _fprop_filter_rows(g: np.ndarray, axis: int) -> np.ndarray:
    """One pass of U = G g Gᵀ of ``winogradForwardFilter4x4`` (g float32, 3 rows along ``axis``;
    6 out): G the plain rows (1, p, p²) at (0, ±1, ±1/2, ∞), row p RN(RN(g0 + p²·g2) + p·g1), the
    even terms first (measured on fp32 weights; the products are exact)."""
    g0, g1, g2 = (np.take(g, k, axis=axis) for k in range(3))
    rows = [g0]
    for p in (1.0, -1.0, 0.5, -0.5):
        rows.append(_rn(_rn(g0 + np.float32(p * p) * g2) + np.float32(p) * g1))
    rows.append(g2)
    return np.stack(rows, axis=axis)


def cudnn_fprop_f4x4_3x3(x, w, padding: tuple[int, int] = (0, 0), fp32_tensors: bool = False) -> np.ndarray:
    """The 3×3, stride-1 forward convolution of x (N, C, H, W) by w (K, C, 3, 3) (float32 values
    or uint32 fp32 patterns; fp16/bf16 values widened exactly) as cuDNN's
    ``winograd_nonfused::winogradForward{Data,Filter,Output}4x4`` kernels and their fp32 FFMA GEMM
    compute it (measured on NVIDIA H200 captures, cuDNN 9.19: fp32, fp16 and bf16 operands;
    docs/silicon/h200-convolutions.md). ``padding`` (rows, columns). Returns float32 (N, K, P, Q).

    F(4×4, 3×3) at the points (0, ±1, ±1/2, ∞) of the weight gradient's kernels
    (:data:`CUDNN_FPROP_TILE`): x cut into 6×6 tiles every 4 from −padding (+0 outside, the
    output cropped); V = Bᵀ d B with the rounding of the weight gradient's data transform
    (rows first, then columns; on 16-bit inputs its forms are exact but for rare sums); U = G g Gᵀ
    with G the plain rows (1, p, p²), the even terms first (:func:`_fprop_filter_rows`, rows first;
    measured on fp32 weights, exact on 16-bit ones);
    per position (ξ, ν) of the 6×6 tile one fp32 FMA chain from +0 over the input channels
    ascending (the ``…ffma`` GEMM); then Y = Aᵀ M A with the fractions in Aᵀ, rows first, then
    columns, as :func:`_fprop_output_rows`: the kernels of 16-bit tensors (``<float, __half>``,
    ``<float, __nv_bfloat16>``) fuse the m2 terms in the column pass only, those of fp32 tensors
    (``<float, float>``, ``fp32_tensors``) in both passes (measured on fp32 outputs, which pin
    every form: 32,768 of 32,768 outputs, two shapes, forward and backward data). On the nine H200 captures at hand (two shapes, fp16
    and bf16) 1 of 149,504 outputs differs: a value this order puts exactly halfway between two
    fp16 values, which the GPU rounded down."""
    t = CUDNN_FPROP_TILE
    with np.errstate(over="ignore", invalid="ignore"):
        return _positionwise(
            x,
            w,
            t,
            padding,
            lambda d: cudnn_data_rows(cudnn_data_rows(d, 4), 5),
            lambda g: _fprop_filter_rows(_fprop_filter_rows(g, 2), 3),
            fma_gemm,
            lambda M: _fprop_output_rows(_fprop_output_rows(M, 4, fp32_tensors), 5, True),
        )
