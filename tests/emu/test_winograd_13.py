"""cuDNN's Winograd kernels (``winograd_nonfused::…``) against H200 captures made by calling
the algorithm by number through cuDNN's legacy API, with cuDNN's workspace read back after the
call (``benchmarks/captures/cudnn_algos.py``). Bits compared, no tolerance: every convolution
there of cuDNN's fp32 kernels (``<float, …>``: 4×4 and 13-point; forward, backward data and
weight gradient; fp32, fp16 and bf16 operands; one weight gradient through cuBLAS ``gemmSN``
instead of the xmma GEMM), and, on the workspace, the 13-point data transform Bᵀ d B
(:func:`emu.winograd.cudnn_data_rows_13`), the delta transform G e Gᵀ
(:func:`emu.winograd.cudnn_wgrad_delta_rows_13`) and the GEMM between them (one fp32 FMA chain
over the tiles, ascending)."""

from __future__ import annotations

import functools
import hashlib
import json
import tarfile
from fractions import Fraction
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from recipes import capture_recipe

from emu.simt import fma_gemm
from emu.winograd import (
    CUDNN_13_POINTS,
    TransformOrder,
    cudnn_data_rows_13,
    cudnn_fprop_f4x4_3x3,
    cudnn_fprop_f9x9_5x5,
    cudnn_wgrad_delta_rows_13,
    cudnn_wgrad_f3x3_4x4,
    cudnn_wgrad_f5x5_9x9,
    literal8,
    toom_cook_tile,
    transform,
)

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = ROOT / "tests" / "data" / "captures" / "h200_probes" / "cudnn_algos.tar.gz"
RANDOM_SHAPES = ARCHIVE.with_name("cudnn_algos2.tar.gz")  # plan 2: 72 random shapes, made after the fit
# (case, tiles padded to): the workspace holds V as [13·13 positions][C][tiles padded]
WITH_WORKSPACE = [
    ("a_wgrad_winograd_nonfused_n1c16k8h9r5p2_float32", 16),
    ("a_wgrad_winograd_nonfused_n1c16k8h9r5p2_float16", 16),
    ("a_fprop_winograd_nonfused_n1c16k8h9r5p2_float32", 16),
    ("a_wgrad_winograd_nonfused_n2c32k32h16r5p2_float32", 64),
]


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    if not ARCHIVE.is_file():
        pytest.skip(f"{ARCHIVE} is absent")
    recipe = capture_recipe("cudnn_algos")
    folder = tmp_path_factory.mktemp("cudnn_algos")
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(folder, filter="data")
    out = {}
    for path in sorted((folder / "cudnn_algos").glob("a_*.npz")):
        name = path.stem
        with np.load(path) as z:
            fields = {key: z[key] for key in z.files}
        case = json.loads(str(fields["case"]))
        operands = recipe.operand_bits(case)
        for key, bits in operands.items():
            assert hashlib.sha256(bits.tobytes()).hexdigest() == str(fields[f"{key}_sha256"]), (name, key)
        out[name] = (case, fields, operands)
    return out


def differing_bits(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.count_nonzero(np.ascontiguousarray(a).view(np.uint32) != np.ascontiguousarray(b).view(np.uint32)))


def _widened(bits: np.ndarray, config: str = "float16") -> np.ndarray:
    """fp32 values of int32 fp32 bits, or of int16 fp16 or bf16 bits (``config``)."""
    if bits.dtype == np.int32:
        return bits.view(np.float32)
    return bits.view(ml_dtypes.bfloat16 if config == "bfloat16" else np.float16).astype(np.float32)


def _tiles(x: np.ndarray, pad: int = 2) -> np.ndarray:
    """The 13×13 tiles (tiles in (n, row, column) order, C, 13, 13) of x padded by ``pad``, one
    tile per 9 outputs of the 5×5 convolution, +0 outside x."""
    n, c, h, w = x.shape
    per_side = -(-(h + 2 * pad - 4) // 9)
    padded = np.zeros((n, c, 9 * per_side + 4, 9 * per_side + 4), np.float32)
    padded[:, :, pad : pad + h, pad : pad + w] = x
    tiles = [padded[:, :, 9 * i : 9 * i + 13, 9 * j : 9 * j + 13] for i in range(per_side) for j in range(per_side)]
    return np.stack(tiles, axis=1).reshape(-1, c, 13, 13)


def _workspace_v(fields, c: int, tiles: int, pitch: int) -> np.ndarray:
    ws = fields["workspace"].view(np.float32)
    return ws[: 169 * c * pitch].reshape(13, 13, c, pitch)[..., :tiles].transpose(3, 2, 0, 1)


@pytest.mark.parametrize("name,pitch", WITH_WORKSPACE)
def test_data_transform_is_cudnn_data_rows_13_bit_for_bit(captures, name, pitch):
    case, fields, operands = captures[name]
    x = _widened(operands["x"])
    d = _tiles(x)
    got = cudnn_data_rows_13(cudnn_data_rows_13(d, -1), -2)
    want = _workspace_v(fields, case["c"], d.shape[0], pitch)
    assert differing_bits(got, want) == 0
    # the same sums in the natural order (no shared product) miss: the forms are what is tested
    bt = toom_cook_tile(9, 5, CUDNN_13_POINTS).fp32("BT")
    natural = transform(bt, np.swapaxes(d, -1, -2), TransformOrder(fused=True))
    assert differing_bits(np.swapaxes(natural, -1, -2), want) > 0


def test_the_gemm_is_one_fma_chain_over_the_tiles_ascending(captures):
    name, pitch = WITH_WORKSPACE[-1]
    case, fields, operands = captures[name]
    c, k, tiles = case["c"], case["k"], 8
    ws = fields["workspace"].view(np.float32)
    v = ws[: 169 * c * pitch].reshape(169, c, pitch)[..., :tiles]  # [position][C][tile]
    start = 169 * c * pitch
    u = ws[start : start + 169 * pitch * k].reshape(169, pitch, k)[:, :tiles]  # [position][tile][K]
    start += 169 * pitch * k
    m = ws[start : start + 169 * c * k].reshape(169, c, k)  # [position][C][K]
    for position in (0, 40, 84, 168):
        got = fma_gemm(np.ascontiguousarray(v[position]), np.ascontiguousarray(u[position]))
        assert differing_bits(got, m[position]) == 0, position
        backwards = fma_gemm(np.ascontiguousarray(v[position][:, ::-1]), np.ascontiguousarray(u[position][::-1]))
        assert differing_bits(backwards, m[position]) > 0, position


def _dy_tiles(dy: np.ndarray) -> np.ndarray:
    """The 9×9 tiles (tiles in (n, row, column) order, K, 9, 9) of dy from (0, 0), +0 past its edge."""
    n, k, p, q = dy.shape
    per_side = -(-p // 9)
    padded = np.zeros((n, k, 9 * per_side, 9 * per_side), np.float32)
    padded[:, :, :p, :q] = dy
    tiles = [padded[:, :, 9 * i : 9 * i + 9, 9 * j : 9 * j + 9] for i in range(per_side) for j in range(per_side)]
    return np.stack(tiles, axis=1).reshape(-1, k, 9, 9)


@pytest.mark.parametrize("name,pitch", [w for w in WITH_WORKSPACE if "wgrad" in w[0]])
def test_delta_transform_is_cudnn_wgrad_delta_rows_13_bit_for_bit(captures, name, pitch):
    case, fields, operands = captures[name]
    e = _dy_tiles(_widened(operands["dy"]))
    c, k, tiles = case["c"], case["k"], e.shape[0]
    start = 169 * c * pitch
    ws = fields["workspace"].view(np.float32)
    want = ws[start : start + 169 * pitch * k].reshape(13, 13, pitch, k)[:, :, :tiles].transpose(2, 3, 0, 1)
    got = cudnn_wgrad_delta_rows_13(cudnn_wgrad_delta_rows_13(e, -1), -2)
    assert differing_bits(got, want) == 0
    # G rounded to nearest fp32 instead of cuDNN's 8-decimal literals: the constants are what is tested
    g = toom_cook_tile(5, 9, CUDNN_13_POINTS).fp32("G")
    natural = transform(g, np.swapaxes(e, -1, -2), TransformOrder(fused=True))
    assert differing_bits(np.swapaxes(natural, -1, -2), want) > 0


def test_the_literals_are_eight_decimals_of_the_fp32_value():
    # 1/3062.5 (the point 2's fraction): RN32 is 0.000326530612…, cuDNN's constant 0.00032653 (21 ulps off)
    assert literal8(Fraction(2, 6125)) == np.float32(0.00032653) != np.float32(2 / 6125)
    assert literal8(Fraction(1, 27)) == np.float32(0.03703704)
    assert literal8(3) == np.float32(3) and literal8(Fraction(27, 8)) == np.float32(3.375)


def _model(case: dict, x, w, dy) -> np.ndarray:
    """The output of a capture's case by the emu.winograd order of its pass and filter."""
    pad, r, f32 = case["pad"], case["r"], case["config"] == "float32"
    if case["pass_"] == "wgrad":
        return (cudnn_wgrad_f5x5_9x9 if r == 5 else cudnn_wgrad_f3x3_4x4)(x, dy, (pad, pad))
    fprop = cudnn_fprop_f9x9_5x5 if r == 5 else functools.partial(cudnn_fprop_f4x4_3x3, fp32_tensors=f32)
    if case["pass_"] == "fprop":
        return fprop(x, w, (pad, pad))
    turned = np.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))  # backward data: K and C swapped
    return fprop(dy, turned, (r - 1 - pad, r - 1 - pad))


def test_every_capture_of_the_fp32_kernels_is_identical(captures):
    """The 45 captures cuDNN ran with its fp32 Winograd kernels (``<float, …>``): forward, backward
    data and weight gradient, 3×3 (the 4×4 kernels) and 5×5 (the 13-point ones), fp32, fp16 and
    bf16 operands, two or three shapes each. The 6 of the TRUE_HALF configuration
    (``<__half, __half>``, an fp16 wmma GEMM) are not modelled."""
    done = 0
    for name, (case, fields, operands) in captures.items():
        if case["config"] == "truehalf":
            assert any("<__half, __half>" in str(k) for k in fields["kernels"])
            continue
        x, w, dy = (_widened(operands[k], case["config"]) for k in ("x", "w", "dy"))
        got = _model(case, x, w, dy)
        want = fields["out"]
        if want.dtype == np.int16:
            dtype = ml_dtypes.bfloat16 if case["config"] == "bfloat16" else np.float16
            assert int(np.count_nonzero(got.astype(dtype).view(np.int16) != want)) == 0, name
        else:
            assert differing_bits(got, want.view(np.float32)) == 0, name
        done += 1
    assert done == 45


def test_the_weight_gradient_checks_its_shapes():
    x = np.zeros((1, 2, 9, 9), np.float32)
    with pytest.raises(ValueError, match="dy: a 5x5 stride-1 convolution of 9x9 with padding"):
        cudnn_wgrad_f5x5_9x9(x, np.zeros((1, 3, 8, 8), np.float32), (2, 2))
    with pytest.raises(ValueError, match="x, dy: need"):
        cudnn_wgrad_f5x5_9x9(x[0], np.zeros((1, 3, 9, 9), np.float32))


def test_72_random_shapes_made_after_the_fit_are_identical(tmp_path):
    """Plan 2 of cudnn_algos.py, run after every order here was written: 72 random draws (a pass,
    a 3×3 or 5×5 filter, padding 0 … r // 2, N 1 … 3, C and K 1 … 48, rectangular H × W in 5 … 40,
    fp32, fp16 or bf16 tensors), all through WINOGRAD_NONFUSED: every output of every one."""
    if not RANDOM_SHAPES.is_file():
        pytest.skip(f"{RANDOM_SHAPES} is absent")
    recipe = capture_recipe("cudnn_algos")
    with tarfile.open(RANDOM_SHAPES) as tar:
        tar.extractall(tmp_path, filter="data")
    paths = sorted((tmp_path / "cudnn_algos").glob("b_*.npz"))
    assert len(paths) == 72
    for path in paths:
        with np.load(path) as z:
            case, want = json.loads(str(z["case"])), z["out"]
        operands = recipe.operand_bits(case)
        x, w, dy = (_widened(operands[k], case["config"]) for k in ("x", "w", "dy"))
        got = _model(case, x, w, dy)
        if want.dtype == np.int16:
            dtype = ml_dtypes.bfloat16 if case["config"] == "bfloat16" else np.float16
            assert int(np.count_nonzero(got.astype(dtype).view(np.int16) != want)) == 0, path.name
        else:
            assert differing_bits(got, want.view(np.float32)) == 0, path.name


def _direct(x, w, pad):
    """The exact (float64) stride-1 correlation of x (N, C, H, W) with w (K, C, r, r)."""
    r = w.shape[-1]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    P, Q = xp.shape[2] - r + 1, xp.shape[3] - r + 1
    out = np.zeros((x.shape[0], w.shape[0], P, Q))
    for i in range(r):
        for j in range(r):
            out += np.einsum("ncpq,kc->nkpq", xp[:, :, i : i + P, j : j + Q], w[:, :, i, j].astype(np.float64))
    return out


def test_the_13_point_orders_are_the_convolution_rounded():
    """On random data both 13-point orders are the convolution up to their (large) rounding: a
    wrong tile origin, crop or coefficient moves outputs by whole units. The forward on a 20×17
    image (partial tiles, rectangular), the weight gradient of the same convolution."""
    rng = np.random.default_rng(13)
    x = rng.uniform(-1, 1, (2, 3, 20, 17)).astype(np.float32)
    w = rng.uniform(-1, 1, (4, 3, 5, 5)).astype(np.float32)
    dy = rng.uniform(-1, 1, (2, 4, 20, 17)).astype(np.float32)
    y, exact = cudnn_fprop_f9x9_5x5(x, w, (2, 2)), _direct(x, w, 2)
    assert y.shape == exact.shape and np.abs(y - exact).max() < 2e-3 * np.abs(exact).max()
    assert np.count_nonzero(y != exact.astype(np.float32)) > 0
    dw = cudnn_wgrad_f5x5_9x9(x, dy, (2, 2))
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (2, 2), (2, 2)))
    exact_dw = np.stack(
        [
            np.einsum("ncpq,nkpq->kc", xp[:, :, i : i + 20, j : j + 17], dy.astype(np.float64))
            for i in range(5)
            for j in range(5)
        ],
        axis=-1,
    ).reshape(4, 3, 5, 5)
    assert dw.shape == exact_dw.shape and np.abs(dw - exact_dw).max() < 2e-3 * np.abs(exact_dw).max()


def test_a_nan_reaches_only_the_outputs_of_its_tiles():
    """Adversarial: a NaN in one input pixel of the forward spreads through the transforms to the
    outputs of the tiles whose 13×13 window holds it (every output channel), nowhere else; in the
    weight gradient to every tap of its input channel, for every output channel."""
    rng = np.random.default_rng(14)
    x = rng.uniform(-1, 1, (1, 2, 20, 20)).astype(np.float32)
    w = rng.uniform(-1, 1, (3, 2, 5, 5)).astype(np.float32)
    x[0, 1, 3, 12] = np.nan  # padded row 5, column 14: tile row 0 (rows 0–12), tile column 1 (9–21)
    y = cudnn_fprop_f9x9_5x5(x, w, (2, 2))
    nan = np.zeros(y.shape, bool)
    nan[0, :, 0:9, 9:18] = True
    np.testing.assert_array_equal(np.isnan(y), nan)
    dy = rng.uniform(-1, 1, (1, 3, 20, 20)).astype(np.float32)
    dw = cudnn_wgrad_f5x5_9x9(x, dy, (2, 2))
    np.testing.assert_array_equal(np.isnan(dw).any(axis=(2, 3)), np.array([[False, True]] * 3))
    assert np.isnan(dw[:, 1]).all() and not np.isnan(dw[:, 0]).any()
