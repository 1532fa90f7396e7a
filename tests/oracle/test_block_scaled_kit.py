"""The kit's block-scaled ``scaled_mm`` tensors against PyTorch's own (torch CPU; issue 39.4).

The swizzled scale layout is torch's ``to_blocked`` (torch/testing/_internal/common_quantized.py,
the layout torch hands to cuBLASLt); fp4 operands are packed as torch's ``pack_uint4`` packs
them (two e2m1 a byte, the even k in the low nibble); and the kit reads a user's own tensors
(``capture(..., "scaled_mm", A=, B=, scale_a=, scale_b=)``) back to the logical arrays it drew.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from validation.captures import kit  # noqa: E402
from validation.captures.format import blocked_scales  # noqa: E402

pytestmark = pytest.mark.oracle

#: torch's own helpers, run in a child process: importing torch.testing._internal freezes
#: torch.backends' global flags (common_utils calls disable_global_flags) for every later test
#: of the session. expecttest (a test-only package torch's helpers import for TestCase alone)
#: is stood in for when absent.
HELPERS = """
import sys, types, unittest
import numpy as np
try:
    import expecttest
except ImportError:
    sys.modules["expecttest"] = types.SimpleNamespace(TestCase=unittest.TestCase)
import torch
from torch.testing._internal.common_quantized import pack_uint4, to_blocked
data = dict(np.load(sys.argv[1]))
out = {}
for name, x in data.items():
    t = torch.from_numpy(x)
    if name.startswith("scales"):
        out[name] = to_blocked(t.view(torch.float8_e8m0fnu)).view(torch.uint8).numpy()
    else:
        out[name] = pack_uint4(t).numpy()
np.savez(sys.argv[2], **out)
"""


def _torch_helpers(tmp_path, arrays: dict) -> dict:
    np.savez(tmp_path / "in.npz", **arrays)
    res = subprocess.run(
        [sys.executable, "-c", HELPERS, str(tmp_path / "in.npz"), str(tmp_path / "out.npz")],
        capture_output=True,
        text=True,
    )
    if res.returncode:
        pytest.skip(f"torch's test helpers do not run here: {res.stderr.strip().splitlines()[-1][:200]}")
    return dict(np.load(tmp_path / "out.npz"))


SHAPES = [(128, 4), (130, 5), (7, 3), (256, 16), (1, 1)]


def test_swizzle_is_torchs_to_blocked(tmp_path):
    xs = {f"scales{i}": np.random.default_rng(i).integers(0, 255, s).astype(np.uint8) for i, s in enumerate(SHAPES)}
    want = _torch_helpers(tmp_path, xs)
    for name, x in xs.items():
        np.testing.assert_array_equal(blocked_scales(x), want[name], err_msg=str(x.shape))


def test_fp4_packing_is_torchs_pack_uint4(tmp_path):
    x = np.random.default_rng(1).integers(0, 16, (6, 64)).astype(np.uint8)
    got = kit._packed(torch, x, "float4_e2m1fn_x2")
    assert got.dtype == torch.float4_e2m1fn_x2 and tuple(got.shape) == (6, 32)
    np.testing.assert_array_equal(got.view(torch.uint8).numpy(), _torch_helpers(tmp_path, {"fp4": x})["fp4"])


@pytest.mark.parametrize(
    "entry",
    [
        {"dtype": "e2m1", "block_scale": "nvfp4"},
        {"dtype": "e2m1", "block_scale": "mx"},
        {"dtype": "e4m3", "b_dtype": "e5m2", "block_scale": "mx"},
    ],
    ids=["nvfp4", "mxfp4", "mxfp8"],
)
def test_the_tensors_handed_to_torch_read_back_as_drawn(entry):
    """What the kit hands torch._scaled_mm (A, B through .t(), swizzled scales) is read back by
    the user-tensor path to the logical operands and scales it was made from."""
    spec = kit.check_plan_entry({"op": "scaled_mm", "shapes": {"A": [130, 64], "B": [64, 48]}, **entry})
    ops = kit.generate_operands(spec)
    t = kit._scaled_tensors(torch, spec, ops, "cpu")
    assert not t["B"].is_contiguous() and t["B"].t().is_contiguous()  # column-major B, as cuBLASLt takes it
    sdt = torch.float8_e8m0fnu if spec["scale_format"] == "ue8m0" else torch.float8_e4m3fn
    assert t["scale_a"].dtype == sdt and t["scale_a"].ndim == 1
    back_spec, back = kit._user_block_scaled(torch, t["A"], t["B"], t["scale_a"], t["scale_b"], None, False, None)
    for name in ("A", "B", "scale_a", "scale_b"):
        np.testing.assert_array_equal(back[name], ops[name], err_msg=name)
    assert kit.check_plan_entry(back_spec)["block"] == spec["block"]
