"""emu.conv in fp32, TF32 and bf16: forward, backward data and backward weight through the one
executor (ConvGemm.compute), checked bit for bit against an independent reference: the
convolution's GEMM built here by explicit im2col loops (NCHW input, KCYX filter, NKHW output) and
run through emu.gemm (tf32 and bf16 units; TF32 operands rounded to nearest even first) or
emu.simt.fma_gemm (the fp32 FMA unit: fp32 without TF32), and, on small integers where every sum is
exact, against a direct fp64 convolution written as plain loops."""

from __future__ import annotations

import dataclasses
import itertools

import ml_dtypes
import numpy as np
import pytest

from emu.atomics import SplitPartials
from emu.conv import ConvArithmetic, ConvGemm, ConvProblem
from emu.gemm import GemmOrder, gemm
from emu.implicit_gemm import ConvShape, conv_gemm, conv_pieces
from emu.operands import round_to_tf32
from emu.simt import fma_gemm
from models.units import unit

FWD = ConvProblem("fwd", n=2, c=3, h=6, w=5, k=4, y=3, x=3, pad_h=(1, 1), pad_w=(1, 0), stride=(2, 1))
BWD_WEIGHT = ConvProblem("bwd_weight", n=2, c=3, h=5, w=6, k=4, y=2, x=3, pad_h=(1, 0), pad_w=(1, 1), stride=(1, 2))
BWD_DATA = ConvProblem("bwd_data", n=2, c=3, h=5, w=6, k=4, y=3, x=2, pad_h=(1, 1), pad_w=(0, 1))
PROBLEMS = {"fwd": FWD, "bwd_weight": BWD_WEIGHT, "bwd_data": BWD_DATA}

UNITS = {
    "fp32": lambda: unit("fma32"),
    "tf32-h100": lambda: unit("h100", input="tf32"),
    "tf32-a100": lambda: unit("a100", input="tf32"),
    "bf16": lambda: unit("h100", input="bf16"),
}


def _tensors(p: ConvProblem, rng, integers: bool = False) -> dict[str, np.ndarray]:
    """Canonical float64 tensors: x (N, C, H, W), w (K, C, Y, X), dy (N, K, Ho, Wo); fp32 values
    over several binades, or small integers."""
    shapes = {"x": (p.n, p.c, p.h, p.w), "w": (p.k, p.c, p.y, p.x), "dy": (p.n, p.k, p.out_h, p.out_w)}
    if integers:
        return {r: rng.integers(-8, 9, s).astype(np.float64) for r, s in shapes.items()}
    return {
        r: (rng.standard_normal(s) * 2.0 ** rng.integers(-6, 6, s)).astype(np.float32).astype(np.float64)
        for r, s in shapes.items()
    }


def _im2col(p: ConvProblem, t: dict[str, np.ndarray]):
    """The direction's GEMM (A, B) with k in the kernel's gemmK order (fwd (c, y, x); bwd_weight
    (n, ho, wo); bwd_data with unit stride (k, y, x)), padding taps as +0, and the result tensor's
    canonical shape; C[m, col] is result[...] in row-major (m, columns) order as below."""
    (sh, sw), pt, pl = p.stride, p.pad_h[0], p.pad_w[0]
    x, w, dy = t["x"], t["w"], t["dy"]

    def xin(n, c, hi, wi):
        return x[n, c, hi, wi] if 0 <= hi < p.h and 0 <= wi < p.w else 0.0

    if p.direction == "fwd":
        cols = list(itertools.product(range(p.n), range(p.out_h), range(p.out_w)))
        ks = list(itertools.product(range(p.c), range(p.y), range(p.x)))
        A = np.array([[w[k, c, fy, fx] for c, fy, fx in ks] for k in range(p.k)])
        B = np.array([[xin(n, c, ho * sh - pt + fy, wo * sw - pl + fx) for n, ho, wo in cols] for c, fy, fx in ks])
        return A, B, lambda C: C.reshape(p.k, p.n, p.out_h, p.out_w).transpose(1, 0, 2, 3)
    if p.direction == "bwd_weight":
        ks = list(itertools.product(range(p.n), range(p.out_h), range(p.out_w)))
        cols = list(itertools.product(range(p.c), range(p.y), range(p.x)))
        A = np.array([[dy[n, k, ho, wo] for n, ho, wo in ks] for k in range(p.k)])
        B = np.array([[xin(n, c, ho * sh - pt + fy, wo * sw - pl + fx) for c, fy, fx in cols] for n, ho, wo in ks])
        return A, B, lambda C: C.reshape(p.k, p.c, p.y, p.x)
    assert p.stride == (1, 1)

    def dyin(n, k, ho, wo):
        return dy[n, k, ho, wo] if 0 <= ho < p.out_h and 0 <= wo < p.out_w else 0.0

    ks = list(itertools.product(range(p.k), range(p.y), range(p.x)))
    cols = list(itertools.product(range(p.n), range(p.h), range(p.w)))
    A = np.array([[w[k, c, fy, fx] for k, fy, fx in ks] for c in range(p.c)])
    B = np.array([[dyin(n, k, hi + pt - fy, wi + pl - fx) for n, hi, wi in cols] for k, fy, fx in ks])
    return A, B, lambda C: C.reshape(p.c, p.n, p.h, p.w).transpose(1, 0, 2, 3)


def _direct(p: ConvProblem, t: dict[str, np.ndarray]) -> np.ndarray:
    """The convolution in fp64 by plain loops over output pixels and taps (exact on small integers)."""
    (sh, sw), pt, pl = p.stride, p.pad_h[0], p.pad_w[0]
    x, w, dy = t["x"], t["w"], t["dy"]
    out = {"fwd": np.zeros(dy.shape), "bwd_weight": np.zeros(w.shape), "bwd_data": np.zeros(x.shape)}[p.direction]
    for ho, wo, fy, fx in itertools.product(range(p.out_h), range(p.out_w), range(p.y), range(p.x)):
        hi, wi = ho * sh - pt + fy, wo * sw - pl + fx
        if not (0 <= hi < p.h and 0 <= wi < p.w):
            continue
        if p.direction == "fwd":
            out[:, :, ho, wo] += x[:, :, hi, wi] @ w[:, :, fy, fx].T
        elif p.direction == "bwd_weight":
            out[:, :, fy, fx] += dy[:, :, ho, wo].T @ x[:, :, hi, wi]
        else:
            out[:, :, hi, wi] += dy[:, :, ho, wo] @ w[:, :, fy, fx]
    return out


def _format(name: str) -> str:
    return "bf16" if name == "bf16" else "fp32"


def _as_format(t: dict[str, np.ndarray], fmt: str) -> dict[str, np.ndarray]:
    dtype = ml_dtypes.bfloat16 if fmt == "bf16" else np.float32
    return {r: v.astype(dtype) for r, v in t.items()}


def _emulated(p: ConvProblem, t, u, order=None, **kw) -> np.ndarray:
    """The executor's result (canonical layouts are the problem's), float32 of the result's shape."""
    op = ConvGemm(p, x=t["x"], w=t["w"], dy=t["dy"])
    n = len(op.subs)
    (out,) = op.compute([ConvArithmetic(units=(u,) * n, orders=(order,) * n, **kw)])
    return out


def _reference(p, t, u, name: str, order=None, tf32_rounding="rne") -> np.ndarray:
    A, B, to_result = _im2col(p, {r: v.astype(np.float64) for r, v in t.items()})
    if name == "fp32":
        C = fma_gemm(A.astype(np.float32), B.astype(np.float32), None, order)
    elif name == "bf16":
        C = gemm(A.astype(ml_dtypes.bfloat16), B.astype(ml_dtypes.bfloat16), None, u, order)
    else:
        A32, B32 = A.astype(np.float32), B.astype(np.float32)
        if tf32_rounding == "rne":
            A32, B32 = round_to_tf32(A32), round_to_tf32(B32)
        C = gemm(A32, B32, None, u, order)
    return np.ascontiguousarray(to_result(C)).reshape(-1)


def _bits(x) -> np.ndarray:
    x = np.asarray(x)
    return x.view(np.uint16 if x.dtype.itemsize == 2 else np.uint32)


@pytest.mark.parametrize("direction", list(PROBLEMS))
@pytest.mark.parametrize("name", list(UNITS))
def test_every_direction_matches_im2col_through_the_unit(direction, name):
    p = PROBLEMS[direction]
    u = UNITS[name]()
    t = _as_format(
        _tensors(p, np.random.default_rng([list(PROBLEMS).index(direction), list(UNITS).index(name)])), _format(name)
    )
    got = _emulated(p, t, u)
    want = _reference(p, t, u, name)
    assert got.dtype == np.float32 and np.array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("direction", list(PROBLEMS))
@pytest.mark.parametrize("name", ["fp32", "tf32-h100", "bf16"])
def test_small_integers_give_the_exact_convolution(direction, name):
    p = PROBLEMS[direction]
    t = _tensors(p, np.random.default_rng(7), integers=True)
    got = _emulated(p, _as_format(t, _format(name)), UNITS[name]())
    assert np.array_equal(got.astype(np.float64), _direct(p, t).reshape(-1))


def test_tf32_rounding_to_nearest_first_or_the_units_truncation():
    p, u = FWD, UNITS["tf32-h100"]()
    t = _as_format(_tensors(p, np.random.default_rng(11)), "fp32")
    rne = _emulated(p, t, u)
    raw = _emulated(p, t, u, tf32_rounding="")
    assert np.array_equal(_bits(raw), _bits(_reference(p, t, u, "tf32-h100", tf32_rounding="")))
    assert not np.array_equal(_bits(raw), _bits(rne))  # the rounding shows on random fp32 operands
    # both in one pass, on the same operands: each its own bits
    op = ConvGemm(p, x=t["x"], w=t["w"], dy=t["dy"])
    both = op.compute([ConvArithmetic((u,), (None,)), ConvArithmetic((u,), (None,), tf32_rounding="")])
    assert np.array_equal(_bits(both[0]), _bits(rne)) and np.array_equal(_bits(both[1]), _bits(raw))
    fma = ConvArithmetic((UNITS["fp32"](),), (None,))
    assert not op.same_arithmetic(ConvArithmetic((u,), (None,)), ConvArithmetic((u,), (None,), tf32_rounding=""))
    assert not op.same_arithmetic(ConvArithmetic((u,), (None,)), fma)


def test_fp32_fma_split_k_partials_and_orders():
    p = BWD_WEIGHT  # gemmK = n·ho·wo = 2·5·3 = 30, split in two chunks of 15
    u = UNITS["fp32"]()
    t = _as_format(_tensors(p, np.random.default_rng(12)), "fp32")
    A, B, to_result = _im2col(p, {r: v.astype(np.float64) for r, v in t.items()})
    A, B = A.astype(np.float32), B.astype(np.float32)
    assert A.shape[1] == 30
    order = GemmOrder(split_k=2)
    got = _emulated(p, t, u, order)
    assert np.array_equal(_bits(got), _bits(np.ascontiguousarray(to_result(fma_gemm(A, B, None, order))).reshape(-1)))
    parts = _emulated(p, t, u, order, keep_partials=True)
    assert isinstance(parts, SplitPartials) and parts.parts.shape[0] == 2
    for i, ks in enumerate((slice(0, 15), slice(15, 30))):
        want = np.ascontiguousarray(to_result(fma_gemm(A[:, ks], B[ks]))).reshape(-1)
        assert np.array_equal(_bits(parts.parts[i]), _bits(want))
    perm = tuple(int(i) for i in np.random.default_rng(1).permutation(30))
    got = _emulated(p, t, u, GemmOrder(k_order=perm))
    want = np.ascontiguousarray(to_result(fma_gemm(A, B, None, GemmOrder(k_order=perm)))).reshape(-1)
    assert np.array_equal(_bits(got), _bits(want))


def test_layout_transposes_change_no_bits():
    """NHWC input and output with the KCYX filter (gemmK still (c, y, x)): the NCHW problem's bits,
    transposed."""
    u = UNITS["fp32"]()
    t = _as_format(_tensors(FWD, np.random.default_rng(13)), "fp32")
    nchw = _emulated(FWD, t, u).reshape(FWD.n, FWD.k, FWD.out_h, FWD.out_w)
    p = dataclasses.replace(FWD, in_layout="nhwc", out_layout="nhwk")
    nhwc_t = {"x": np.ascontiguousarray(t["x"].transpose(0, 2, 3, 1)), "w": t["w"], "dy": t["dy"]}
    op = ConvGemm(p, x=nhwc_t["x"], w=nhwc_t["w"])
    (got,) = op.compute([ConvArithmetic((u,) * len(op.subs), (None,) * len(op.subs))])
    assert np.array_equal(_bits(got), _bits(np.ascontiguousarray(nchw.transpose(0, 2, 3, 1)).reshape(-1)))


def test_fp32_tensors_need_an_fp32_fma_or_tf32_unit():
    t = _as_format(_tensors(FWD, np.random.default_rng(14)), "fp32")
    op = ConvGemm(FWD, x=t["x"], w=t["w"])
    assert op.format == "fp32"
    with pytest.raises(ValueError, match="fp32 FMA unit"):
        op.compute([ConvArithmetic((unit("h100"),), (None,))])
    with pytest.raises(ValueError, match="tf32_rounding"):
        op.compute([ConvArithmetic((unit("h100", input="tf32"),), (None,), tf32_rounding="rz")])
    # uint32 patterns are fp32 tensors; mixing them with 16-bit ones is refused
    assert ConvGemm(FWD, x=t["x"].view(np.uint32), w=t["w"].view(np.uint32)).format == "fp32"
    with pytest.raises(ValueError, match="mixed"):
        ConvGemm(FWD, x=t["x"], w=t["w"].astype(np.float16))


# --- emu.implicit_gemm (the cuDNN / CUTLASS NCHW mapping the capture search uses) ----------------

SYMMETRIC = {
    "fwd": ConvProblem("fwd", n=2, c=3, h=6, w=5, k=4, y=3, x=3, pad_h=(1, 1), pad_w=(1, 1), stride=(2, 1)),
    "bwd_weight": ConvProblem(
        "bwd_weight", n=2, c=3, h=5, w=6, k=4, y=2, x=3, pad_h=(1, 1), pad_w=(0, 0), stride=(1, 2)
    ),
    "bwd_data": ConvProblem("bwd_data", n=2, c=3, h=5, w=6, k=4, y=3, x=2, pad_h=(1, 1), pad_w=(1, 1)),
}
#: the orders of implicit_gemm equal to the im2col above: (c, r, s), (n, p, q), (k, r, s)
IM2COL_ORDER = {"fwd": "crs", "bwd_weight": "npq", "bwd_data": "krs"}


def _shape(p: ConvProblem) -> ConvShape:
    return ConvShape(p.n, p.c, p.h, p.w, p.k, p.y, p.x, stride=p.stride, padding=(p.pad_h[0], p.pad_w[0]))


def _pass_operands(p: ConvProblem, t) -> tuple[np.ndarray, np.ndarray]:
    return {"fwd": (t["x"], t["w"]), "bwd_data": (t["dy"], t["w"]), "bwd_weight": (t["dy"], t["x"])}[p.direction]


@pytest.mark.parametrize("direction", list(SYMMETRIC))
@pytest.mark.parametrize("name", ["fp32", "tf32-a100", "bf16"])
def test_implicit_gemm_passes_in_every_format(direction, name):
    p, u = SYMMETRIC[direction], UNITS[name]()
    t = _as_format(_tensors(p, np.random.default_rng([5, list(UNITS).index(name)])), _format(name))
    first, second = _pass_operands(p, t)
    got = conv_gemm(direction, _shape(p), first, second, u, None, IM2COL_ORDER[direction])
    assert got.shape == _shape(p).out_shape(direction)
    assert np.array_equal(_bits(got.reshape(-1)), _bits(_reference(p, t, u, name)))
    # bit patterns in, the same bits out; the pieces keep the patterns' width
    (piece,) = conv_pieces(direction, _shape(p), _bits(first), _bits(second), IM2COL_ORDER[direction])
    assert piece.A.dtype == (np.uint16 if name == "bf16" else np.uint32)
    got = conv_gemm(direction, _shape(p), _bits(first), _bits(second), u, None, IM2COL_ORDER[direction])
    assert np.array_equal(_bits(got.reshape(-1)), _bits(_reference(p, t, u, name)))


def test_implicit_gemm_nhwc_order_is_a_permutation_of_the_fma_chain():
    """gemmK (r, s, c) of an NHWC fprop: the im2col chain with k permuted the same way."""
    p, u = SYMMETRIC["fwd"], UNITS["fp32"]()
    t = _as_format(_tensors(p, np.random.default_rng(21)), "fp32")
    got = conv_gemm("fwd", _shape(p), t["x"], t["w"], u, None, "rsc")
    perm = tuple(c * p.y * p.x + r * p.x + s for r, s, c in itertools.product(range(p.y), range(p.x), range(p.c)))
    want = _reference(p, t, u, "fp32", GemmOrder(k_order=perm))
    assert np.array_equal(_bits(got.reshape(-1)), _bits(want))
    assert not np.array_equal(_bits(got.reshape(-1)), _bits(_reference(p, t, u, "fp32")))


def test_implicit_gemm_operand_rules():
    p = SYMMETRIC["fwd"]
    t = _as_format(_tensors(p, np.random.default_rng(22)), "fp32")
    with pytest.raises(TypeError, match="one format"):
        conv_pieces("fwd", _shape(p), t["x"], t["w"].astype(np.float16))
    with pytest.raises(ValueError, match="fp32 FMA unit"):
        conv_gemm("fwd", _shape(p), t["x"], t["w"], unit("h100", input="bf16"))
    u = unit("h100", input="tf32")
    rne = conv_gemm("fwd", _shape(p), t["x"], t["w"], u, None, "crs")
    raw = conv_gemm("fwd", _shape(p), t["x"], t["w"], u, None, "crs", tf32_rounding="")
    assert np.array_equal(_bits(rne.reshape(-1)), _bits(_reference(p, t, u, "tf32")))
    assert np.array_equal(_bits(raw.reshape(-1)), _bits(_reference(p, t, u, "tf32", tf32_rounding="")))
    assert not np.array_equal(_bits(rne), _bits(raw))


def test_fp32_fma_in_bounds_products_only():
    """Backward weight counting only the products whose input pixel is inside the image (the
    executor's in-bounds pass): per output, the FMA chain over its in-bounds (n, ho, wo) only."""
    p, u = BWD_WEIGHT, UNITS["fp32"]()
    t = _as_format(_tensors(p, np.random.default_rng(15)), "fp32")
    t64 = {r: v.astype(np.float64) for r, v in t.items()}
    A, B, to_result = _im2col(p, t64)
    inside = _im2col(p, {**t64, "x": np.ones_like(t64["x"])})[1] != 0
    C = np.empty((A.shape[0], B.shape[1]), np.float32)
    for col in range(B.shape[1]):
        ks = np.flatnonzero(inside[:, col])
        C[:, col] = fma_gemm(A[:, ks].astype(np.float32), B[ks, col : col + 1].astype(np.float32))[:, 0]
    got = _emulated(p, t, u, inbounds_only=True)
    assert np.array_equal(_bits(got), _bits(np.ascontiguousarray(to_result(C)).reshape(-1)))
