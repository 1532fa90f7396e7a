"""cuDNN's 13-point Winograd kernels (``winograd_nonfused::…9x9_5x5``) against what an H200
wrote to cuDNN's workspace (``benchmarks/captures/cudnn_algos.py``: the algorithm called by
number through cuDNN's legacy API, the workspace read back after the call). Bits compared, no
tolerance: the data transform Bᵀ d B (:func:`emu.winograd.cudnn_data_rows_13`) and the GEMM
that follows it (one fp32 FMA chain over the tiles, ascending)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest

from emu.simt import fma_gemm
from emu.winograd import CUDNN_13_POINTS, TransformOrder, cudnn_data_rows_13, toom_cook_tile, transform

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = ROOT / "tests" / "data" / "captures" / "h200_probes" / "cudnn_algos.tar.gz"
RECIPE = ROOT / "benchmarks" / "captures" / "cudnn_algos.py"
# (case, tiles padded to): the workspace holds V as [13·13 positions][C][tiles padded]
WITH_WORKSPACE = [
    ("a_wgrad_winograd_nonfused_n1c16k8h9r5p2_float32", 16),
    ("a_wgrad_winograd_nonfused_n1c16k8h9r5p2_float16", 16),
    ("a_fprop_winograd_nonfused_n1c16k8h9r5p2_float32", 16),
    ("a_wgrad_winograd_nonfused_n2c32k32h16r5p2_float32", 64),
]


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    if not ARCHIVE.is_file() or not RECIPE.is_file():
        pytest.skip(f"{ARCHIVE} or {RECIPE} is absent")
    spec = importlib.util.spec_from_file_location("cudnn_algos", RECIPE)
    recipe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recipe)
    folder = tmp_path_factory.mktemp("cudnn_algos")
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(folder, filter="data")
    out = {}
    for name, _ in WITH_WORKSPACE:
        with np.load(folder / "cudnn_algos" / f"{name}.npz") as z:
            fields = {key: z[key] for key in z.files}
        case = json.loads(str(fields["case"]))
        operands = recipe.operand_bits(case)
        for key, bits in operands.items():
            assert hashlib.sha256(bits.tobytes()).hexdigest() == str(fields[f"{key}_sha256"]), (name, key)
        out[name] = (case, fields, operands)
    return out


def differing_bits(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.count_nonzero(np.ascontiguousarray(a).view(np.uint32) != np.ascontiguousarray(b).view(np.uint32)))


def _widened(bits: np.ndarray) -> np.ndarray:
    """fp32 values of int32 fp32 bits or int16 fp16 bits (the fp16 cases' operand type)."""
    return bits.view(np.float32) if bits.dtype == np.int32 else bits.view(np.float16).astype(np.float32)


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
