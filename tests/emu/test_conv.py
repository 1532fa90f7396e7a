"""emu.conv: convolution as implicit GEMM against a direct fp64 convolution, the gemmK order, and
the gemm sizes of the 2022 rocMLIR suite.

Inputs are small integers, so every product and sum is exact in fp16/fp32/fp64 and results are
compared for exact equality. The reference below is written independently of emu.conv: plain
loops over output (or dx) pixels and filter taps with explicit index arithmetic, on tensors in the
canonical letter order (input n,g,c,h,w; filter g,k,c,y,x; output n,g,k,h,w).
"""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emu.conv import ConvGemm, ConvProblem, conv, gemm_operands, gemm_sizes, normalize_layout, sub_gemms

TSV = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "rocmlir_f16_configs_2022.tsv"

CANONICAL = {"input": "ngchw", "filter": "gkcyx", "output": "ngkhw"}


def exact_gemm(a, b):
    """fp64 product of fp16 matrices, returned as float32 (exact for the small integers used)."""
    assert a.dtype == np.float16 and b.dtype == np.float16
    assert a.flags.c_contiguous and b.flags.c_contiguous and a.shape[1] == b.shape[0]
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)


# --- layouts, written out independently of emu.conv ---------------------------------------------


def full_layout(layout: str) -> str:
    """miopen-gen 2022 correctParameters: where a 4-letter layout's g goes."""
    if len(layout) == 5:
        return layout
    return {"nchw": "ngchw", "nhwc": "nhwgc", "nkhw": "ngkhw", "nhwk": "nhwgk"}.get(layout, "g" + layout)


def canonical_sizes(p: ConvProblem, role: str) -> tuple[int, ...]:
    g = p.groups
    return {
        "input": (p.n, g, p.c // g, p.h, p.w),
        "filter": (g, p.k // g, p.c // g, p.y, p.x),
        "output": (p.n, g, p.k // g, p.out_h, p.out_w),
    }[role]


def to_memory(canon: np.ndarray, p: ConvProblem, role: str) -> np.ndarray:
    """A canonical-order tensor → flat float16 in the problem's layout for that tensor."""
    layout = full_layout(p.layout(role))
    perm = [CANONICAL[role].index(d) for d in layout]
    return np.ascontiguousarray(canon.transpose(perm)).astype(np.float16).reshape(-1)


def from_memory(flat: np.ndarray, p: ConvProblem, role: str) -> np.ndarray:
    """Flat memory in the problem's layout → canonical-order float64 tensor."""
    layout = full_layout(p.layout(role))
    sizes = dict(zip(CANONICAL[role], canonical_sizes(p, role)))
    arr = np.asarray(flat, dtype=np.float64).reshape([sizes[d] for d in layout])
    return arr.transpose([layout.index(d) for d in CANONICAL[role]])


# --- direct fp64 reference convolutions ---------------------------------------------------------


def ref_fwd(p: ConvProblem, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    (sh, sw), (dh, dw), pt, pl = p.stride, p.dilation, p.pad_h[0], p.pad_w[0]
    out = np.zeros(canonical_sizes(p, "output"))
    for ho, wo, fy, fx in itertools.product(range(p.out_h), range(p.out_w), range(p.y), range(p.x)):
        hi, wi = ho * sh - pt + fy * dh, wo * sw - pl + fx * dw
        if 0 <= hi < p.h and 0 <= wi < p.w:
            out[:, :, :, ho, wo] += np.einsum("ngc,gkc->ngk", x[:, :, :, hi, wi], w[:, :, :, fy, fx])
    return out


def ref_bwd_weight(p: ConvProblem, x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    (sh, sw), (dh, dw), pt, pl = p.stride, p.dilation, p.pad_h[0], p.pad_w[0]
    dw_ = np.zeros(canonical_sizes(p, "filter"))
    for ho, wo, fy, fx in itertools.product(range(p.out_h), range(p.out_w), range(p.y), range(p.x)):
        hi, wi = ho * sh - pt + fy * dh, wo * sw - pl + fx * dw
        if 0 <= hi < p.h and 0 <= wi < p.w:
            dw_[:, :, :, fy, fx] += np.einsum("ngk,ngc->gkc", dy[:, :, :, ho, wo], x[:, :, :, hi, wi])
    return dw_


def ref_bwd_data(p: ConvProblem, w: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """Loops over dx pixels: dx[hi] gathers dy[ho] where hi + pad − y·dil = ho·stride."""
    (sh, sw), (dh, dw), pt, pl = p.stride, p.dilation, p.pad_h[0], p.pad_w[0]
    dx = np.zeros(canonical_sizes(p, "input"))
    for hi, wi, fy, fx in itertools.product(range(p.h), range(p.w), range(p.y), range(p.x)):
        th, tw = hi + pt - fy * dh, wi + pl - fx * dw
        if th % sh or tw % sw:
            continue
        ho, wo = th // sh, tw // sw
        if 0 <= ho < p.out_h and 0 <= wo < p.out_w:
            dx[:, :, :, hi, wi] += np.einsum("ngk,gkc->ngc", dy[:, :, :, ho, wo], w[:, :, :, fy, fx])
    return dx


def check_against_reference(p: ConvProblem, seed: int = 0, n_chunk=None, shaped: bool = False):
    """Random small-integer tensors; emu.conv must equal the direct fp64 convolution exactly."""
    rng = np.random.default_rng(seed)
    canon = {r: rng.integers(-4, 5, canonical_sizes(p, r)).astype(np.float64) for r in CANONICAL}
    mem = {r: to_memory(canon[r], p, r) for r in CANONICAL}
    if shaped:
        mem = {r: m.reshape(p.tensor_shape(r)) for r, m in mem.items()}
    if p.direction == "fwd":
        got = conv(p, mem["input"], mem["filter"], gemm=exact_gemm, n_chunk=n_chunk)
        expected = ref_fwd(p, canon["input"], canon["filter"])
    elif p.direction == "bwd_weight":
        got = conv(p, mem["input"], None, mem["output"], gemm=exact_gemm, n_chunk=n_chunk)
        expected = ref_bwd_weight(p, canon["input"], canon["output"])
    else:
        got = conv(p, None, mem["filter"], mem["output"], gemm=exact_gemm, n_chunk=n_chunk)
        expected = ref_bwd_data(p, canon["filter"], canon["output"])
    role = p.result_role
    assert got.dtype == np.float32
    assert got.shape == p.tensor_shape(role)
    np.testing.assert_array_equal(from_memory(got.reshape(-1), p, role), expected)
    return got


# --- every direction × every filter layout, with varied input/output layouts --------------------

FILTER_LAYOUTS = ["".join(q) for q in itertools.permutations("gkcyx")] + [
    "".join(q) for q in itertools.permutations("kcyx")
]
IN_OUT_LAYOUTS = [
    ("nchw", "nkhw"),
    ("nhwc", "nhwk"),
    ("chwn", "khwn"),
    ("ngchw", "ngkhw"),
    ("nhwgc", "nhwgk"),
    ("gchwn", "nghwk"),
    ("hwcn", "gnkhw"),
    ("cnhw", "knhw"),
]
DIRS = ("fwd", "bwd_weight", "bwd_data")


@pytest.mark.parametrize("direction", DIRS)
@pytest.mark.parametrize("fil_layout", FILTER_LAYOUTS)
def test_every_filter_layout(direction, fil_layout):
    i = FILTER_LAYOUTS.index(fil_layout)
    in_layout, out_layout = IN_OUT_LAYOUTS[i % len(IN_OUT_LAYOUTS)]
    groups = (1, 2, 4)[i % 3]
    p = ConvProblem(
        direction, n=2, c=2 * groups, h=6, w=7, k=3 * groups, y=3, x=2, groups=groups,
        pad_h=(1, 2), pad_w=(2, 0), stride=(2, 1), dilation=(1, 2),
        in_layout=in_layout, fil_layout=fil_layout, out_layout=out_layout,
    )  # fmt: skip
    check_against_reference(p, seed=i, shaped=i % 2 == 0)


@pytest.mark.parametrize("direction", DIRS)
@pytest.mark.parametrize("groups", (1, 2, 4))
@pytest.mark.parametrize("pads", [((0, 0), (0, 0)), ((1, 1), (2, 2)), ((2, 0), (0, 1))])
@pytest.mark.parametrize("stride", (1, 2, 3))
@pytest.mark.parametrize("dilation", (1, 2, 3))
def test_geometry(direction, groups, pads, stride, dilation):
    layouts = [("ngchw", "gkcyx", "ngkhw"), ("nhwgc", "gkyxc", "nhwgk"), ("chwn", "yxck", "khwn")]
    in_l, fil_l, out_l = layouts[(stride + dilation + groups) % 3]
    p = ConvProblem(
        direction, n=2, c=2 * groups, h=8, w=7, k=2 * groups, y=3, x=2, groups=groups,
        pad_h=pads[0], pad_w=pads[1], stride=(stride, max(1, stride - 1)), dilation=(dilation, 4 - dilation),
        in_layout=in_l, fil_layout=fil_l, out_layout=out_l,
    )  # fmt: skip
    check_against_reference(p, seed=stride * 10 + dilation)


@pytest.mark.parametrize(
    "geometry",
    [
        dict(h=7, w=5, y=1, x=1, stride=(3, 2)),  # pixels no sub-GEMM writes
        dict(h=5, w=8, y=2, x=3, stride=(4, 3), dilation=(2, 3)),  # filter smaller than yTilda
        dict(h=9, w=9, y=3, x=3, stride=(2, 2), dilation=(2, 2)),  # gcd > 1: one sub-GEMM
        dict(h=9, w=10, y=3, x=3, stride=(3, 2), dilation=(2, 3), pad_h=(3, 0), pad_w=(0, 4)),
        dict(h=4, w=4, y=3, x=3, pad_h=(2, 2), pad_w=(2, 2)),  # padding wider than the image
    ],
)
@pytest.mark.parametrize("direction", DIRS)
def test_awkward_geometry(direction, geometry):
    p = ConvProblem(direction, n=2, c=4, k=6, groups=2, **geometry)
    got = check_against_reference(p, seed=3)
    if direction == "bwd_data":
        written = np.zeros(p.h, dtype=bool)
        for hi, fy in itertools.product(range(p.h), range(p.y)):
            t = hi + p.pad_h[0] - fy * p.dilation[0]
            written[hi] |= t % p.stride[0] == 0 and 0 <= t // p.stride[0] < p.out_h
        # pixels without any contribution are +0.0, not -0.0
        unwritten = from_memory(got.reshape(-1), p, "input")[:, :, :, ~written, :]
        assert not np.signbit(unwritten).any()


def test_chunking_is_invisible():
    p = ConvProblem("fwd", n=3, c=4, h=9, w=8, k=4, y=3, x=3, groups=2, pad_h=(1, 1), pad_w=(1, 0), stride=(2, 1))
    whole = check_against_reference(p, n_chunk=10**9)
    for n_chunk in (1, 7, 64):
        got = check_against_reference(p, n_chunk=n_chunk)
        np.testing.assert_array_equal(got.view(np.uint32), whole.view(np.uint32))
    for direction in ("bwd_weight", "bwd_data"):
        q = ConvProblem(direction, n=2, c=4, h=9, w=8, k=4, y=3, x=3, groups=2, pad_h=(1, 1), stride=(2, 2))
        for n_chunk in (1, 5):
            check_against_reference(q, n_chunk=n_chunk)


# --- the gemmK order ----------------------------------------------------------------------------


def recording(calls):
    def gemm(a, b):
        calls.append((a.copy(), b.copy()))
        return exact_gemm(a, b)

    return gemm


def encoded_filter(p: ConvProblem, encode) -> np.ndarray:
    """Canonical filter whose value at (g, k, c, y, x) is encode(g, k, c, y, x)."""
    w = np.zeros(canonical_sizes(p, "filter"))
    for idx in np.ndindex(w.shape):
        w[idx] = encode(*idx)
    return w


@pytest.mark.parametrize(
    "fil_layout, in_layout, order",
    [
        ("kcyx", "nchw", "cyx"),
        ("gkcyx", "ngchw", "cyx"),
        ("kyxc", "nhwc", "yxc"),
        ("gkyxc", "nhwgc", "yxc"),
        ("yxck", "hwcn", "yxc"),
        ("xkgyc", "nwhgc", "xyc"),
        ("kyxc", "nchw", "yxc"),  # the filter's order, whatever the input's
        ("kcyx", "nhwc", "cyx"),
    ],
)
def test_fwd_gemm_k_order(fil_layout, in_layout, order):
    p = ConvProblem("fwd", n=1, c=4, h=5, w=5, k=4, y=3, x=2, groups=2, fil_layout=fil_layout, in_layout=in_layout)
    assert "".join(p.gemm_k_order) == order
    w = encoded_filter(p, lambda g, k, c, y, x: 100 * c + 10 * y + x + 1)
    x_canon = np.zeros(canonical_sizes(p, "input"))
    x_canon[:] = (np.arange(2) + 1)[None, None, :, None, None]  # value c + 1 everywhere
    calls = []
    conv(p, to_memory(x_canon, p, "input"), to_memory(w, p, "filter"), gemm=recording(calls))
    assert len(calls) == 2  # one per group
    ranges = {"c": range(2), "y": range(3), "x": range(2)}
    expected_a, expected_b = [], []
    for digits in itertools.product(*(ranges[d] for d in order)):
        v = dict(zip(order, digits))
        expected_a.append(100 * v["c"] + 10 * v["y"] + v["x"] + 1)
        expected_b.append(v["c"] + 1)
    for a, b in calls:
        assert a.shape == (2, 12) and b.shape == (12, p.out_h * p.out_w)
        for row in a:
            np.testing.assert_array_equal(row, expected_a)
        for col in b.T:  # no padding: every column is a full window
            np.testing.assert_array_equal(col, expected_b)


def test_bwd_weight_gemm_k_order():
    p = ConvProblem(
        "bwd_weight", n=2, c=2, h=4, w=3, k=2, y=2, x=1, fil_layout="kyxc", in_layout="nhwc", out_layout="nhwk"
    )
    assert p.gemm_k_order == ("n", "ho", "wo") and p.gemm_n_order == ("y", "x", "c")
    dy = np.zeros(canonical_sizes(p, "output"))
    for n, k, ho, wo in np.ndindex(2, 2, p.out_h, p.out_w):
        dy[n, 0, k, ho, wo] = 100 * n + 10 * ho + wo + 1
    x_canon = np.zeros(canonical_sizes(p, "input"))
    x_canon[:] = (np.arange(2) + 1)[:, None, None, None, None]  # value n + 1
    calls = []
    conv(p, to_memory(x_canon, p, "input"), None, to_memory(dy, p, "output"), gemm=recording(calls))
    ((a, b),) = calls
    expected = [100 * n + 10 * ho + wo + 1 for n in range(2) for ho in range(p.out_h) for wo in range(p.out_w)]
    for row in a:
        np.testing.assert_array_equal(row, expected)
    n_of_k = [n + 1 for n in range(2) for _ in range(p.out_h * p.out_w)]
    for col in b.T:
        np.testing.assert_array_equal(col, n_of_k)


def test_bwd_data_gemm_k_order_and_sub_gemms():
    # stride 2, dilation 1: yTilda = xTilda = 2, four sub-GEMMs; 3×3 filter taps split {0,2} / {1}.
    p = ConvProblem("bwd_data", n=1, c=2, h=7, w=7, k=3, y=3, x=3, pad_h=(1, 1), pad_w=(1, 1), stride=(2, 2))
    assert p.out_h == 4
    subs = sub_gemms(p)
    assert [(s.gemm_id, s.i_ytilda, s.i_xtilda, s.y_dot_slice, s.x_dot_slice) for s in subs] == [
        (0, 0, 0, 2, 2), (1, 0, 1, 2, 1), (2, 1, 0, 1, 2), (3, 1, 1, 1, 1),
    ]  # fmt: skip
    # hTilda = 4 + 1 = 5, iHTildaLeft = 0, iHTildaRight = min(5, ceil(7/2) + 1) = 5
    assert gemm_sizes(p) == [(1, 2, 25, 12), (1, 2, 25, 6), (1, 2, 25, 6), (1, 2, 25, 3)]
    w = encoded_filter(p, lambda g, k, c, y, x: 100 * k + 10 * y + x + 1)
    calls = []
    dy = to_memory(np.ones(canonical_sizes(p, "output")), p, "output")
    conv(p, None, to_memory(w, p, "filter"), dy, gemm=recording(calls))
    assert len(calls) == 4
    for (a, _), s in zip(calls, subs):
        expected = [
            100 * k + 10 * (ydot * 2 + s.i_ytilda) + (xdot * 2 + s.i_xtilda) + 1
            for k in range(3) for ydot in range(s.y_dot_slice) for xdot in range(s.x_dot_slice)
        ]  # fmt: skip
        for row in a:
            np.testing.assert_array_equal(row, expected)


def test_bwd_data_tilda_slices():
    # stride 2, pad 3, 3×3, H = W = 8: Ho = 6, hTilda = 6 + ⌈2/2⌉ = 7, iHTildaLeft = ⌊(3 − 1)/2⌋ = 1,
    # iHTildaRight = min(7, ⌈(3 + 8 − 1)/2⌉ + 1) = 6: hTildaSlice 5, each sub-GEMM has N = 2·5·5.
    p = ConvProblem("bwd_data", n=2, c=4, h=8, w=8, k=6, y=3, x=3, groups=2, pad_h=(3, 3), pad_w=(3, 3), stride=(2, 2))
    assert p.out_h == 6
    assert gemm_sizes(p) == [(2, 2, 50, 12), (2, 2, 50, 6), (2, 2, 50, 6), (2, 2, 50, 3)]
    check_against_reference(p)
    # hTilda = Ho + ⌈dilation·(Y−1)/stride⌉ = 4 + ⌈1/2⌉ binds iHTildaRight = min(5, ⌈7/2⌉ + 1).
    p = ConvProblem("bwd_data", n=1, c=2, h=8, w=8, k=3, y=2, x=2, stride=(2, 2))
    assert gemm_sizes(p) == [(1, 2, 25, 3)] * 4
    check_against_reference(p)
    # stride 1 (any dilation, padding): one sub-GEMM covering exactly the N·H·W pixels of dx.
    for dil, pad in [(1, (0, 0)), (2, (3, 1)), (3, (0, 4))]:
        q = ConvProblem("bwd_data", n=2, c=3, h=9, w=8, k=5, y=3, x=2, pad_h=pad, pad_w=pad[::-1], dilation=(dil, dil))
        assert gemm_sizes(q) == [(1, 3, 2 * 9 * 8, 5 * 3 * 2)]


def test_bwd_data_b_reads_dy_at_htilda_minus_ydot():
    # stride 1, dilation 2: yTilda = 1, one sub-GEMM, ho = htilda − 2·ydot.
    p = ConvProblem("bwd_data", n=1, c=1, h=6, w=1, k=1, y=3, x=1, pad_h=(2, 1), dilation=(2, 1))
    th_left = max(0, 2 - 2 * 0) // 1
    dy = np.zeros(canonical_sizes(p, "output"))
    dy[0, 0, 0, :, 0] = np.arange(p.out_h) + 1
    w = to_memory(np.ones(canonical_sizes(p, "filter")), p, "filter")
    a, b = gemm_operands(p, None, w, to_memory(dy, p, "output"))
    h_slice = b.shape[1]
    for ydot in range(3):
        for j in range(h_slice):
            ho = th_left + j - 2 * ydot
            assert b[ydot, j] == (ho + 1 if 0 <= ho < p.out_h else 0)


# --- shapes, operands and errors ----------------------------------------------------------------


def test_tensor_shapes_and_layout_normalisation():
    shape = dict(n=2, c=6, h=5, w=4, k=8, y=3, x=2, groups=2)
    p = ConvProblem("fwd", **shape, fil_layout="kcyx", in_layout="chwn", out_layout="nhwk")
    assert p.tensor_shape("filter") == (8, 3, 3, 2)  # K, C/G, Y, X
    assert p.tensor_shape("input") == (6, 5, 4, 2)  # C, H, W, N
    assert p.tensor_shape("output") == (2, 5 - 2, 4 - 1, 8)
    q = ConvProblem("fwd", **shape, fil_layout="yxck", in_layout="hwcn", out_layout="gnkhw")
    assert q.tensor_shape("filter") == (2, 3, 2, 3, 4)  # gyxck: no 4-D shape describes it
    assert q.tensor_shape("input") == (2, 5, 4, 3, 2)  # ghwcn
    assert q.tensor_shape("output") == (2, 2, 4, 3, 3)
    assert ConvProblem("fwd", 1, 2, 3, 3, 2, 1, 1, fil_layout="yxck").tensor_shape("filter") == (1, 1, 2, 2)
    for layout, role, full in [
        ("nchw", "input", "ngchw"), ("nhwc", "input", "nhwgc"), ("nhwk", "output", "nhwgk"),
        ("kyxc", "filter", "gkyxc"), ("chwn", "input", "gchwn"), ("nghwc", "input", "nghwc"),
    ]:  # fmt: skip
        assert normalize_layout(layout, role) == full


def test_accepts_bits_flat_and_shaped_and_rejects_bad_input():
    p = ConvProblem("fwd", n=1, c=2, h=4, w=4, k=2, y=2, x=2, in_layout="nhwc", fil_layout="kyxc", out_layout="nhwk")
    rng = np.random.default_rng(1)
    x = rng.integers(-4, 5, p.tensor_shape("input")).astype(np.float16)
    w = rng.integers(-4, 5, p.tensor_shape("filter")).astype(np.float16)
    y = conv(p, x, w, gemm=exact_gemm)
    np.testing.assert_array_equal(conv(p, x.view(np.uint16).ravel(), w.view(np.uint16), gemm=exact_gemm), y)
    np.testing.assert_array_equal(conv(p, x.reshape(1, 4, 4, 1, 2), w, gemm=exact_gemm), y)  # 5-D nhwgc
    with pytest.raises(ValueError, match="shape"):
        conv(p, x.reshape(2, 4, 4), w, gemm=exact_gemm)
    with pytest.raises(TypeError, match="float16"):
        conv(p, x.astype(np.float64), w, gemm=exact_gemm)
    with pytest.raises(ValueError, match="mixed"):  # fp32 tensors are a format of their own
        conv(p, x.astype(np.float32), w, gemm=exact_gemm)
    with pytest.raises(ValueError, match="needs"):
        conv(p, None, w, gemm=exact_gemm)
    with pytest.raises(TypeError, match="float32"):
        conv(p, x, w, gemm=lambda a, b: exact_gemm(a, b).astype(np.float64))


def test_gemm_operands_match_conv_gemm_chunks():
    p = ConvProblem("fwd", n=2, c=4, h=6, w=6, k=4, y=3, x=3, groups=2, pad_h=(1, 1), pad_w=(1, 1))
    rng = np.random.default_rng(2)
    x = (rng.integers(1, 5, p.tensor_size("input")) * rng.choice([-1, 1], p.tensor_size("input"))).astype(np.float16)
    w = rng.integers(-4, 5, p.tensor_size("filter")).astype(np.float16)
    op = ConvGemm(p, x, w)
    a_full, b_full = gemm_operands(p, x, w, group=1)
    assert a_full.shape == (2, 18) and b_full.shape == (18, 72) and a_full.dtype == np.float16
    a, b = gemm_operands(p, x, w, group=1, n_start=5, n_stop=40)
    np.testing.assert_array_equal(a.view(np.uint16), a_full.view(np.uint16))
    np.testing.assert_array_equal(b.view(np.uint16), b_full[:, 5:40].view(np.uint16))
    np.testing.assert_array_equal(op.b(0, 1, 5, 40).view(np.uint16), b.view(np.uint16))
    assert (b_full[:, 0] == 0).sum() == 2 * 5  # corner window: 5 of 9 taps in the padding, 2 channels; x ≠ 0
    assert (b_full.view(np.uint16)[b_full == 0] == 0x0000).all()  # padding reads +0.0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(direction="conv2d"), "direction"),
        (dict(groups=3), "divide"),
        (dict(in_layout="nchq"), "layout"),
        (dict(fil_layout="kcyxg"[:3]), "layout"),
        (dict(stride=(0, 1)), "stride"),
        (dict(y=9), "empty"),
    ],
)
def test_problem_validation(kwargs, match):
    args = dict(direction="fwd", n=1, c=4, h=5, w=5, k=4, y=3, x=3) | kwargs
    with pytest.raises(ValueError, match=match):
        ConvProblem(**args)


# --- the 2022 rocMLIR suite: gemm sizes and orders ----------------------------------------------

OPERATION = {"conv2d": "fwd", "conv2d_bwd_data": "bwd_data", "conv2d_bwd_weight": "bwd_weight"}


def tsv_rows():
    if not TSV.exists():
        pytest.skip(f"reference data not found: {TSV} (../shared/reference is absent)")
    with open(TSV, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def tsv_problem(r) -> ConvProblem:
    i = lambda name: int(r[name])  # noqa: E731
    return ConvProblem(
        OPERATION[r["operation"]], n=i("batch_N"), c=i("in_channels_C"), h=i("in_h"), w=i("in_w"),
        k=i("out_channels_K"), y=i("fil_h_Y"), x=i("fil_w_X"), groups=i("groups_G"),
        pad_h=(i("pad_h_l"), i("pad_h_r")), pad_w=(i("pad_w_l"), i("pad_w_r")),
        stride=(i("stride_h"), i("stride_w")), dilation=(i("dilation_h"), i("dilation_w")),
        in_layout=r["in_layout"], fil_layout=r["fil_layout"], out_layout=r["out_layout"],
    )  # fmt: skip


def test_gemm_sizes_match_the_2022_suite():
    rows = tsv_rows()
    assert len(rows) == 146
    checked = {"fwd": 0, "bwd_weight": 0, "bwd_data": 0}
    for r in rows:
        p = tsv_problem(r)
        where = f"{r['source_file']} {r['check_prefix']}"
        assert (p.out_h, p.out_w) == (int(r["out_h"]), int(r["out_w"])), where
        assert ",".join(p.gemm_k_order) == r["gemmK_order"], where
        sizes = gemm_sizes(p)
        if r["gemmN"] == "see_doc":
            # bwd_data: sub-GEMMs each M = C/G; their K add up to the row's (K/G)·Y·X.
            assert p.direction == "bwd_data", where
            assert all((g, m) == (int(r["gemmG"]), int(r["gemmM"])) for g, m, _, _ in sizes), where
            assert sum(k for *_, k in sizes) == int(r["gemmK"]), where
        else:
            assert sizes == [tuple(int(r[c]) for c in ("gemmG", "gemmM", "gemmN", "gemmK"))], where
        checked[p.direction] += 1
    assert checked == {"fwd": 88, "bwd_weight": 41, "bwd_data": 17}


def test_largest_suite_config_chunks_stay_small():
    # N 256, C 3, 224×224, K 64, 7×7, stride 2, pad 3: gemmN 3,211,264, gemmK 147.
    p = ConvProblem("fwd", n=256, c=3, h=224, w=224, k=64, y=7, x=7, pad_h=(3, 3), pad_w=(3, 3), stride=(2, 2),
                    in_layout="ngchw", fil_layout="gkcyx", out_layout="ngkhw")  # fmt: skip
    assert gemm_sizes(p) == [(1, 64, 3_211_264, 147)]
    x = np.zeros(p.tensor_size("input"), dtype=np.float16)
    w = np.zeros(p.tensor_size("filter"), dtype=np.float16)
    op = ConvGemm(p, x, w)
    n_chunk = op.default_n_chunk()
    assert n_chunk * (2 * 147 + 4 * 64) <= 64 * 2**20 and n_chunk > 100_000
    assert op.b(0, 0, 1_000_000, 1_000_016).shape == (147, 16)


# --- property: random small problems, random layouts --------------------------------------------


@st.composite
def problems(draw):
    groups = draw(st.sampled_from((1, 2, 3)))
    y, x = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    pad_h = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    pad_w = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    h = draw(st.integers(max(1, dilation[0] * (y - 1) + 1 - sum(pad_h)), 8))
    w = draw(st.integers(max(1, dilation[1] * (x - 1) + 1 - sum(pad_w)), 8))

    def layout(letters):
        if draw(st.booleans()):
            letters = letters.replace("g", "")
        return "".join(draw(st.permutations(letters)))

    return ConvProblem(
        draw(st.sampled_from(DIRS)), n=draw(st.integers(1, 2)), c=groups * draw(st.integers(1, 3)), h=h, w=w,
        k=groups * draw(st.integers(1, 3)), y=y, x=x, groups=groups, pad_h=pad_h, pad_w=pad_w, stride=stride,
        dilation=dilation, in_layout=layout("ngchw"), fil_layout=layout("gkcyx"), out_layout=layout("ngkhw"),
    )  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(problems(), st.integers(0, 2**16), st.sampled_from((None, 1, 3)))
def test_random_problems(p, seed, n_chunk):
    check_against_reference(p, seed=seed, n_chunk=n_chunk, shaped=seed % 2 == 0)
