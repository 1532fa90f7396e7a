"""The capture kit's torch path, on the CPU (``make test-oracle`` installs torch): every op writes
a capture in the fixed format that the reader accepts, with torch's own result in ``out``, its
logical (NCHW) order for channels_last convolutions, and ``repeat_differs`` 0."""

import numpy as np
import pytest

from validation.captures import kit, load_capture

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


SCALED = [
    {"op": "scaled_mm", "seed": 8, "dtype": "e4m3", "shapes": {"A": [5, 48], "B": [48, 32]}, "out_dtype": "fp32",
     "scale_a": 0.375, "scale_b": 2.5},
    {"op": "scaled_mm", "seed": 9, "dtype": "e4m3", "b_dtype": "e5m2", "shapes": {"A": [6, 64], "B": [64, 16]},
     "rowwise": True, "bias": True, "use_fast_accum": True},
    {"op": "scaled_mm", "seed": 10, "dtype": "e5m2", "b_dtype": "e4m3", "shapes": {"A": [3, 32], "B": [32, 48]},
     "out_dtype": "fp16", "bias": True, "range": [-8, 8]},
]  # fmt: skip


def _reference(cap) -> np.ndarray:
    """The scaled product in float64 from the capture's own fields (decoded by ml_dtypes)."""
    import ml_dtypes

    fmt = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
    a_fmt, _, b_fmt = cap.input.partition("x")
    A = cap.operands["A"].view(fmt[a_fmt]).astype(np.float64)
    B = cap.operands["B"].view(fmt[b_fmt or a_fmt]).astype(np.float64)
    ref = (A @ B) * cap.extra["scale_a"] * cap.extra["scale_b"]
    return ref + (cap.extra["bias"] if "bias" in cap.extra else 0)


@pytest.mark.parametrize("spec", SCALED, ids=["tensorwise-fp32", "rowwise-bias-bf16", "e5m2xe4m3-fp16"])
def test_scaled_mm_writes_a_capture_the_reader_accepts(spec, tmp_path, torch):
    """torch._scaled_mm on the CPU (PyTorch's reference, not a GPU kernel): the file holds the
    drawn operands in logical order (B handed to torch column-major) and torch's result."""
    fields = kit.capture_case(torch, spec, device="cpu")
    cap = load_capture(kit.save(tmp_path / "s.npz", fields))
    ops = kit.generate_operands(spec)
    np.testing.assert_array_equal(cap.operands["B"], ops["B"])
    assert int(fields["repeat_differs"]) == 0 and cap.out.dtype.name == kit.check_plan_entry(spec)["out_dtype"]
    ref = _reference(cap)
    got = cap.out.astype(np.float64)
    assert np.max(np.abs(got - ref)) <= 2.0**-7 * np.max(np.abs(ref))  # bf16's precision, a layout slip is O(1)
    omitted = load_capture(
        kit.save(tmp_path / "o.npz", kit.capture_case(torch, spec, device="cpu", omit_operands=True))
    )
    for name, bits in cap.operands.items():
        np.testing.assert_array_equal(omitted.operands[name], bits)
    np.testing.assert_array_equal(omitted.extra["scale_a"], cap.extra["scale_a"])


def test_scaled_mm_on_the_users_own_tensors(tmp_path, torch):
    a = (torch.randn(16, 32) * 4).to(torch.float8_e4m3fn)
    b = (torch.randn(48, 32) * 4).to(torch.float8_e5m2).t()  # (32, 48), column-major as torch wants it
    bias = torch.randn(48, dtype=torch.float16)
    path = kit.capture(
        tmp_path / "mine.npz", "scaled_mm", A=a, B=b, scale_a=torch.tensor(0.5), scale_b=torch.tensor(1.5),
        bias=bias, out_dtype=torch.float16, use_fast_accum=True,
    )  # fmt: skip
    cap = load_capture(path)
    np.testing.assert_array_equal(cap.operands["B"], b.contiguous().view(torch.uint8).numpy())
    assert cap.input == "e4m3xe5m2" and cap.extra["use_fast_accum"] and cap.out.dtype == np.float16
    want = torch._scaled_mm(a, b, scale_a=torch.tensor(0.5), scale_b=torch.tensor(1.5), bias=bias,
                            out_dtype=torch.float16, use_fast_accum=True)  # fmt: skip
    np.testing.assert_array_equal(cap.out.view(np.uint16), want.numpy().view(np.uint16))
    with pytest.raises(ValueError, match="^bias: expected float16 like the output"):
        kit.capture(tmp_path / "x.npz", "scaled_mm", A=a, B=b, scale_a=torch.tensor(0.5), scale_b=torch.tensor(1.5),
                    bias=bias.to(torch.bfloat16), out_dtype=torch.float16)  # fmt: skip
