"""The capture kit's torch path, on the CPU (``make test-oracle`` installs torch): every op writes
a capture in the fixed format that the reader accepts, with torch's own result in ``out``, its
logical (NCHW) order for channels_last convolutions, and ``repeat_differs`` 0."""

import numpy as np
import pytest

from validation import capture_torch as kit
from validation.captures import load_capture

pytestmark = pytest.mark.oracle


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


SPECS = [
    {"op": "mm", "seed": 1, "shapes": {"A": [5, 40], "B": [40, 3]}},
    {"op": "addmm", "seed": 2, "shapes": {"A": [5, 40], "B": [40, 3], "C": [3]}, "alpha": 0.5, "beta": 2.0},
    {"op": "bmm", "seed": 3, "shapes": {"A": [2, 5, 16], "B": [2, 16, 3]}},
    {"op": "linear", "seed": 4, "shapes": {"input": [4, 32], "weight": [6, 32], "bias": [6]}},
    {"op": "conv2d", "seed": 5, "shapes": {"input": [2, 4, 6, 6], "weight": [3, 4, 3, 3]}, "padding": 1,
     "memory_format": "channels_last"},
    {"op": "conv2d_bwd_data", "seed": 6, "shapes": {"grad_output": [2, 3, 3, 3], "weight": [3, 4, 3, 3]},
     "input_shape": [2, 4, 6, 6], "stride": 2, "padding": 1},
    {"op": "conv2d_bwd_weight", "seed": 7, "shapes": {"grad_output": [2, 3, 6, 6], "input": [2, 4, 6, 6]},
     "weight_shape": [3, 4, 3, 3], "padding": 1},
]  # fmt: skip


@pytest.mark.parametrize("spec", SPECS, ids=[s["op"] for s in SPECS])
def test_every_op_writes_a_capture_the_reader_accepts(spec, tmp_path, torch):
    fields = kit.capture_case(torch, spec, device="cpu")
    path = kit.save(tmp_path / "c.npz", fields)
    cap = load_capture(path)
    assert cap.op == spec["op"] and int(fields["repeat_differs"]) == 0
    # out is torch's own result, recomputed here from the stored operands in float64 for scale
    assert np.all(np.isfinite(cap.out.astype(np.float64)))
    if spec["op"] == "conv2d":
        x = torch.from_numpy(cap.operands["input"].view(np.float16).astype(np.float32))
        w = torch.from_numpy(cap.operands["weight"].view(np.float16).astype(np.float32))
        want = torch.nn.functional.conv2d(x, w, padding=1).numpy()
        assert cap.out.shape == want.shape  # NCHW values, whatever the memory format
        assert np.max(np.abs(cap.out.astype(np.float32) - want)) < 0.05
    omitted = kit.capture_case(torch, spec, device="cpu", omit_operands=True)
    path2 = kit.save(tmp_path / "o.npz", omitted)
    again = load_capture(path2)
    for name, bits in cap.operands.items():
        np.testing.assert_array_equal(again.operands[name], bits)


def test_the_users_own_tensors(tmp_path, torch):
    a = torch.randn(8, 16, dtype=torch.float16)
    b = torch.randn(16, 4, dtype=torch.float16)
    path = kit.capture(tmp_path / "mine.npz", "mm", A=a, B=b)
    cap = load_capture(path)
    np.testing.assert_array_equal(cap.operands["A"], a.numpy().view(np.uint16))
    assert cap.out.shape == (8, 4)
