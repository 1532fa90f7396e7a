"""cuDNN's Winograd kernels (issue 37 item 3). The weight gradient of ``winogradWgrad…4x4`` is
reproduced bit for bit (:func:`emu.winograd.cudnn_wgrad_f3x3_4x4`): fp32, TF32-allowed (fp32 on
the CUDA cores) and fp16 captures, two shapes and channel counts, answered ``identical`` in
seconds. So is the forward ``winogradForward…4x4`` (:func:`emu.winograd.cudnn_fprop_f4x4_3x3`,
session 24): 8 of 9 H200 captures identical, 1 output of 14,976 differing in the ninth (a value
the order puts exactly halfway between two fp16 values), which is answered "not modelled:
Winograd" with that order as the nearest, never a kernel bug. The captures are session 16's
(tests/data/captures/h200_s16, README there), the development set's (h200_dev) and session 23's
random draws of the sweep's Winograd shape (h200_probes/probes_set1.tar.gz)."""

import time
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from capture_data import archived
from recipes import capture_recipe

import emu
from emu.winograd import CUDNN_WGRAD_POINTS, toom_cook_tile, winograd_conv2d
from validation.captures.capture import load_capture
from validation.captures.convs import (
    is_winograd_fprop,
    is_winograd_wgrad,
    winograd_fprop_output,
    winograd_orders,
    winograd_wgrad_output,
)
from validation.captures.gemms import Candidate, Variant, run_candidate
from validation.captures.search import search

DATA = Path(__file__).resolve().parents[2] / "data" / "captures"


def _cap(name):
    path = DATA / name
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    return load_capture(path)


def _identical_quickly(cap, order: str, outputs: int):
    """The search of ``cap``: under a minute, identical on all ``outputs``, as cuDNN's Winograd
    ``order`` of the family ``cudnn-winograd``; the result."""
    t0 = time.perf_counter()
    r = search(cap)
    assert time.perf_counter() - t0 < 60
    assert r.answer == "identical" and r.n_identical == r.n == outputs
    assert r.best.variant.winograd == order and r.best.family == "cudnn-winograd"
    return r


@pytest.mark.parametrize(
    "name",
    [
        "h200_s16/t_conv2d_bwd_weight_n2c48k20h15r3s1p1_conti_f32.npz",  # fp32, 15×15, padding 1 (partial tiles)
        "h200_s16/t_conv2d_bwd_weight_n2c48k20h15r3s1p1_conti_tf32.npz",  # TF32 allowed, other operands
        "h200_dev/c3x3_c32_k32_h16_nchw_bwd_weight.npz",  # fp16, 16×16, 32 channels
    ],
)
def test_the_weight_gradient_is_identical_quickly(name):
    cap = _cap(name)
    r = _identical_quickly(cap, "cudnn-wgrad-4x4", np.asarray(cap.out).size)
    assert r.reproducing == [r.best]
    assert r.hints[0] == "the kernels are Winograd; cuDNN's Winograd order gives every output bit of this capture"
    assert "F(3x3, 4x4)" in r.best.describe() and r.best.fields()["winograd"] == "cudnn-wgrad-4x4"
    got = winograd_wgrad_output(cap)
    np.testing.assert_array_equal(got.view(np.uint8), np.asarray(cap.out).view(np.uint8))


@pytest.mark.parametrize(
    "name",
    [
        "h200_s16/t_conv2d_n2c24k40h10r3s1p0_conti_f16.npz",  # forward, fp16, 2×40×8×8 outputs
        "h200_s16/t_conv2d_n2c24k40h10r3s1p0_conti_bf16.npz",  # its bf16 twin
    ],
)
def test_the_forward_is_identical_quickly(name):
    cap = _cap(name)
    assert is_winograd_fprop(cap) and not is_winograd_wgrad(cap)
    r = _identical_quickly(cap, "cudnn-fprop-4x4", 5120)
    assert r.hints[0] == "the kernels are Winograd; cuDNN's Winograd order gives every output bit of this capture"
    assert "F(4x4, 3x3)" in r.best.describe() and r.best.fields()["winograd"] == "cudnn-fprop-4x4"


@pytest.mark.parametrize("name", [f"r_wino_s0525_{t}_{i}" for t in ("float16", "bfloat16") for i in range(3)])
def test_six_random_draws_of_the_sweep_shape(name, tmp_path):
    """Input (1, 52, 26, 26), weight (26, 52, 3, 3), operands from the draw's seed: every output
    bit (session 24's order missed one output of r_wino_s0525_float16_0, a tie its filter
    transform put on the wrong side; the filter forms measured on fp32 weights in session 25,
    even terms first, put it right). The same Winograd with the fractions in the filter
    transform (Lavin & Gray's placement), every emu.winograd order the search names, and the
    direct fp32 FMA chain miss 10 or more fp16 outputs (4 or more bf16)."""
    cap = load_capture(archived("probes_set1.tar.gz", name, tmp_path))
    assert is_winograd_fprop(cap)
    want = np.asarray(cap.out).view(np.uint16)
    got = winograd_fprop_output(cap)
    assert np.count_nonzero(got.view(np.uint16) != want) == 0
    if name == "r_wino_s0525_float16_0":
        r = search(cap)
        assert r.answer == "identical" and r.best.variant.winograd == "cudnn-fprop-4x4"
    x, w = _operands(cap)
    dtype = np.float16 if cap.input == "fp16" else ml_dtypes.bfloat16
    in_g = winograd_conv2d(x, w, toom_cook_tile(4, 3, CUDNN_WGRAD_POINTS)).astype(dtype)
    direct = run_candidate(cap, Candidate("fma32", Variant("crs"), emu.Schedule(output=cap.out_format)))
    for other in [out for _, out in winograd_orders(cap)] + [direct, in_g]:
        assert np.count_nonzero(other.view(np.uint16) != want) >= (10 if cap.input == "fp16" else 4)


def _operands(cap):
    s = cap.conv
    dtype = np.float16 if cap.input == "fp16" else ml_dtypes.bfloat16
    x, w = (np.asarray(cap.operands[k]).view(dtype).astype(np.float32) for k in ("input", "weight"))
    return x.reshape(s.N, s.C, s.H, s.W), w.reshape(s.K, s.C, 3, 3)


def test_the_forward_winograd_orders_are_measured_and_named():
    """The forward capture: F(2×2, 3×3) and F(4×4, 3×3), unfused and fused, each measured on every
    output (none reproduces: 20 and 29 fp16 outputs differ; a capture cuDNN's order misses names
    them in its hints, test_six_random_draws_of_the_sweep_shape)."""
    cap = _cap("h200_s16/t_conv2d_n2c24k40h10r3s1p0_conti_f16.npz")
    orders = winograd_orders(cap)
    assert [t.split(",")[0] for t, _ in orders] == [
        "Winograd F(2x2",
        "Winograd F(2x2",
        "Winograd F(4x4",
        "Winograd F(4x4",
    ]
    want = np.asarray(cap.out).view(np.uint16)
    for _, out in orders:
        differ = int(np.count_nonzero(out.view(np.uint16) != want))
        assert 0 < differ < 100  # near (a few ulps), not reproduced


def test_no_forward_order_for_a_weight_gradient_and_no_wgrad_order_for_a_forward():
    wgrad = _cap("h200_s16/t_conv2d_bwd_weight_n2c48k20h15r3s1p1_conti_tf32.npz")
    assert winograd_orders(wgrad) == [] and is_winograd_wgrad(wgrad)
    assert not is_winograd_wgrad(_cap("h200_s16/t_conv2d_n2c24k40h10r3s1p0_conti_f16.npz"))


def test_a_flipped_output_of_a_modelled_winograd_reads_not_modelled_and_says_why(tmp_path):
    """One output of the fp16 forward bench moved by 64 ulps: cuDNN's measured order is the nearest
    (1 output differs) and the reading is not-modelled, exit 1, with a reason that says the order
    is modelled and misses, not that the family is unmodelled; the 13-point forward Winograd (not
    modelled; set 6, ``cudnn.benchmark``) keeps that reason."""
    from validation.captures.format import save
    from validation.captures.report import read_capture

    path = DATA / "h200_s16" / "t_conv2d_n2c24k40h10r3s1p0_conti_f16.npz"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    with np.load(path, allow_pickle=False) as z:
        fields = {k: z[k] for k in z.files}
    fields["out"] = fields["out"].copy()
    fields["out"].view(np.uint16)[1, 7, 3, 2] ^= 0x40
    rd = read_capture(save(tmp_path / "flipped.npz", fields))
    assert rd.reading == "not-modelled" and rd.result.nearest_distance["n_differ"] == 1
    assert rd.result.best.variant.winograd == "cudnn-fprop-4x4"
    assert rd.not_modelled.startswith("the kernels are cuDNN's Winograd, whose measured order misses")
    with np.load(path, allow_pickle=False) as z:  # cuDNN's TRUE_HALF kernels (fp16 arithmetic): not modelled
        fields = {k: z[k] for k in z.files}
    fields["kernels"] = np.array([str(k).replace("<float, __half>", "<__half, __half>") for k in fields["kernels"]])
    true_half = read_capture(save(tmp_path / "true_half.npz", fields))
    assert true_half.not_modelled == "the kernels are of a family the search does not model (Winograd)"


def test_the_13_point_forward_is_identical():
    """PyTorch's 5×5 forward (N 2, C = K = 32, 20×20, padding 2, fp16, ``cudnn.benchmark``; set 6,
    operands from the draw's seed) that cuDNN ran as ``winogradForward{Data,Filter,Output}9x9_5x5``:
    every output bit, as F(9×9, 5×5) on 13×13 tiles (emu.winograd.cudnn_fprop_f9x9_5x5)."""
    from validation.captures.report import read_capture

    path = DATA / "h200_probes" / "w_fprop_n2c32k32h20r5p2_float16_bench.npz"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    rd = read_capture(path)
    assert rd.reading == "rounding" and rd.result.answer == "identical" and rd.result.n_identical == 25600
    assert rd.result.best.variant.winograd == "cudnn-fprop-9x9"
    assert "F(9x9, 5x5) on 13x13 tiles" in rd.result.best.describe()


@pytest.mark.parametrize(
    "case, order",
    [
        ("a_dgrad_winograd_nonfused_n2c32k32h16r5p2_float16", "cudnn-dgrad-9x9"),
        ("a_dgrad_winograd_nonfused_n1c8k16h10r3p1_float32", "cudnn-dgrad-4x4"),
        ("a_fprop_winograd_nonfused_n2c32k32h16r3p1_float32", "cudnn-fprop-4x4"),
    ],
)
def test_backward_data_and_fp32_tensors_read_identical(case, order, tmp_path):
    """cuDNN's backward data by its Winograd kernels (the forward ones, on grad_output and the
    turned filter) and the 4×4 forward on fp32 tensors, which rounds its output transform otherwise:
    H200 captures made by calling the algorithm by number (h200_probes/cudnn_algos.tar.gz), written
    as library captures and read back: identical, each as its own order."""
    import json
    import tarfile

    from validation.captures.format import save
    from validation.captures.report import read_capture

    archive = DATA / "h200_probes" / "cudnn_algos.tar.gz"
    if not archive.is_file():
        pytest.skip(f"{archive} is absent")
    recipe = capture_recipe("cudnn_algos")
    with tarfile.open(archive) as tar:
        member = tar.getmember(f"cudnn_algos/{case}.npz")
        tar.extract(member, tmp_path, filter="data")
    with np.load(tmp_path / member.name) as z:
        fields = {k: z[k] for k in z.files}
    spec_ = json.loads(str(fields["case"]))
    dtype = {"float32": np.float32, "float16": np.float16}[spec_["config"]]
    arrays = {key: bits.view(dtype) for key, bits in recipe.operand_bits(spec_).items()}
    n, c, h, pad = spec_["n"], spec_["c"], spec_["h"], spec_["pad"]
    dgrad = spec_["pass_"] == "dgrad"
    operands = (
        {"grad_output": arrays["dy"], "weight": arrays["w"]} if dgrad else {"input": arrays["x"], "weight": arrays["w"]}
    )
    capture = {
        "op": "conv2d_bwd_data" if dgrad else "conv2d",
        "out": fields["out"].view(dtype),
        "dtype": spec_["config"],
        "stride": [1, 1],
        "padding": [pad, pad],
        "dilation": [1, 1],
        "groups": 1,
        "input_shape": [n, c, h, h],
        "memory_format": "contiguous",
        "shapes": json.dumps({k: list(v.shape) for k, v in operands.items()}),
        "allow_tf32": False,
        "kernels": fields["kernels"],
        "gpu": "NVIDIA H200",
        **operands,
    }
    rd = read_capture(save(tmp_path / f"{case}_capture.npz", capture))
    assert rd.reading == "rounding" and rd.result.answer == "identical"
    assert rd.result.best.variant.winograd == order


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_13_point_weight_gradient_is_identical(dtype, tmp_path):
    """PyTorch's 5×5 weight gradient (N 2, C = K = 32, 16×16, padding 2, NCHW; set 4, operands
    from the draw's seed) that cuDNN ran as ``winogradForwardData9x9_5x5`` +
    ``winogradWgrad{Delta,Output}9x9_5x5``: every output bit (12,093 of 25,600 fp16 outputs differ
    from the exact gradient rounded once), in seconds, as cuDNN's measured order F(5×5, 9×9)."""
    cap = load_capture(archived("probes_set4.tar.gz", f"c_wgrad_n2c32k32h16r5s1p2_conti_{dtype}", tmp_path))
    assert is_winograd_wgrad(cap) and not is_winograd_fprop(cap)
    r = _identical_quickly(cap, "cudnn-wgrad-9x9", 25600)
    assert "F(5x5, 9x9) on 13x13 tiles" in r.best.describe()
    direct = run_candidate(cap, Candidate("fma32", Variant("npq"), emu.Schedule(output=cap.out_format)))
    assert np.count_nonzero(direct.view(np.uint16) != np.asarray(cap.out).view(np.uint16)) > 1000
