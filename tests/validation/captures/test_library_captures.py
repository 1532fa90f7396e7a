"""The capture search on H200 captures made with the capture kit (tests/data/captures): one case
of each schedule family the development and held-out runs met, found from the output alone and
checked on every output bit; and ``fp16emu identify``'s answers, exit codes and JSON fields."""

import json
from pathlib import Path

import numpy as np
import pytest

from validation.captures import load_capture, read_capture
from validation.captures.cli import identify_capture
from validation.captures.report import to_json
from validation.captures.search import search

DATA = Path(__file__).resolve().parents[2] / "data" / "captures"

#: case → what the schedule found must have (the rest of its fields may vary among equivalents)
CASES = {
    # CUTLASS 2.x split-K, the k residue first (K = 1000, 8 splits of 128)
    "h200_dev/mm_100x1000x100_s108_f32": dict(unit="h100", splits=8, residue_tile=64),
    # the same kernel with an fp16 output: its split partials are __half before splitKreduce
    "h200_dev/mm_100x1000x100_s108_f16": dict(unit="h100", splits=8, partial_format="fp16"),
    # cuBLAS bias epilogue: acc + bias rounded once
    "h200_dev/addmm_128x1024x256_s170": dict(unit="h100", splits=1, c_entry="epilogue"),
    # split-K with alpha = 0.5, beta = 2 in the epilogue
    "h200_dev/addmm_64x8192x64_s171_beta": dict(unit="h100", splits=6, c_entry="epilogue", alpha=0.5),
    # a GEMV kernel: 32 lanes over every 32nd k, a warp shuffle tree, fp32 FMA
    "h200_holdout/h_mm_1x777x16_1": dict(unit="fma32", splits=32, split_rule="strided", reduction="halving"),
    # the xmma fprop kernel: channels in blocks of 64, the taps inside
    "h200_dev/c3x3_c128_k64_h8_nhwc_fwd": dict(unit="h100", k_order="rsc", channel_block=64),
    # the sm90 xmma dgrad kernel: rotated filter, output channels in blocks of 64
    "h200_dev/c3x3_c256_k256_h7_nchw_bwd_data": dict(unit="h100", channel_block=64, flip=True),
    # wgrad per image, then cuDNN's reduce_wgrad
    "h200_dev/c1x1_c64_k128_h14_nchw_bwd_weight": dict(unit="h100", splits=2, k_tile=196),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_search_finds_each_family_from_the_output(case):
    cap = load_capture(DATA / f"{case}.npz")
    r = search(cap)
    assert r.answer == "identical" and r.n_identical == r.n == cap.out.size
    # printed, a result is one line naming the answer and the schedule, not its arrays (issue 38)
    assert repr(r).startswith("<SearchResult identical:") and "\n" not in repr(r) and "array(" not in repr(r)
    fields = r.best.fields()
    for key, want in CASES[case].items():
        assert fields.get(key, 1.0 if key == "alpha" else None) == want, (key, fields)


def test_a_winograd_kernel_is_named_as_not_modelled(tmp_path):
    """cuDNN's TRUE_HALF Winograd kernels (``<__half, __half>``: fp16 arithmetic) are named as not
    modelled; the fp32 ones are not: the 4×4 weight gradient's (winogradWgrad*4x4:
    emu.winograd.cudnn_wgrad_f3x3_4x4), the 4×4 forward's (winogradForward*4x4:
    emu.winograd.cudnn_fprop_f4x4_3x3) and the 13-point ones (emu.winograd.cudnn_wgrad_f5x5_9x9,
    cudnn_fprop_f9x9_5x5)."""
    from models.libraries import not_modelled

    wgrad = load_capture(DATA / "h200_dev" / "c3x3_c32_k32_h16_nchw_bwd_weight.npz")
    assert any("winograd" in k for k in wgrad.kernels) and not_modelled(wgrad.kernels) == []
    fwd = load_capture(DATA / "h200_s16" / "t_conv2d_n2c24k40h10r3s1p0_conti_f16.npz")
    assert any("winogradForward" in k for k in fwd.kernels) and not_modelled(fwd.kernels) == []
    ns = "void cudnn::winograd_nonfused::"
    nine = [  # an H200 5×5 weight gradient (tests/data/captures/h200_probes, set 4)
        f"{ns}winogradForwardData9x9_5x5<float, __half>(cudnn::winograd_nonfused::WinogradDataParams<float, __half>)",
        f"{ns}winogradWgradDelta9x9_5x5<float, __half>(cudnn::winograd_nonfused::WinogradDeltaParams<float, __half>)",
        "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel",
        f"{ns}winogradWgradOutput9x9_5x5<float, __half>(cudnn::winograd_nonfused::WinogradOutputParams<float, __half>)",
    ]
    assert not_modelled(nine) == []
    forward = [nine[0], nine[0].replace("ForwardData", "ForwardFilter").replace("DataParams", "FilterParams")]
    assert not_modelled(forward) == []  # the 13-point forward (emu.winograd.cudnn_fprop_f9x9_5x5)
    true_half = [k.replace("<float, __half>", "<__half, __half>") for k in wgrad.kernels]  # fp16 arithmetic
    assert not_modelled(true_half) and "Winograd" in not_modelled(true_half)[0]


def test_identify_answers_in_json_and_exits_by_the_answer(tmp_path, capsys, monkeypatch):
    """The JSON, the text and the Python API of one capture answer alike. They share one search
    per capture and hw (the search is the same function of the capture whoever calls it; here it
    runs once, not three times): each still reads its capture, screens the mix-ups and writes its
    report on its own."""
    from validation.captures import report as reports
    from validation.captures.gemms import bits

    runs = {}

    def searched_once(cap, hw=None, progress=None):
        key = (bits(cap.out).tobytes(), tuple((k, v.tobytes()) for k, v in sorted(cap.operands.items())), hw)
        if key not in runs:
            runs[key] = search(cap, hw=hw, progress=progress)
        return runs[key]

    monkeypatch.setattr(reports, "search", searched_once)
    path = DATA / "h200_holdout" / "h_mm_33x8192x96_6.npz"
    assert identify_capture(path, fmt="json") == 0
    report = json.loads(capsys.readouterr().out)
    for key in ("answer", "n", "n_identical", "schedule", "schedules", "searched", "seconds", "unit"):
        assert key in report
    assert report["answer"] == "identical" and report["unit"] == "h100" and report["schedule"]["splits"] == 6
    # one output bit changed: differs, exit 1, the element named (a short K keeps the whole space quick)
    path = DATA / "h200_holdout" / "h_mm_16x256x256_12.npz"
    z = dict(np.load(path))
    z["out"] = z["out"].copy()
    z["out"].view(np.uint16)[7, 40] ^= 1 << 3
    changed = tmp_path / "changed.npz"
    np.savez(changed, **z)
    assert identify_capture(changed, fmt="json") == 1
    report = json.loads(capsys.readouterr().out)
    assert report["answer"] == "differs" and report["n_identical"] == report["n"] - 1
    worst = report["suspects"]["elements"][0]
    assert (worst["m"], worst["n"], worst["ulps"]) == (7, 40, 8)
    assert report["nearest"]["splits"] == 1
    # the text report says the same
    assert identify_capture(changed) == 1
    text = capsys.readouterr().out
    assert "DIFFERS" in text and "m=7, n=40" in text
    # and so does the Python API: the same reading, exit code and reports as the command
    reading = read_capture(changed)
    assert (reading.answer, reading.exit_code) == ("differs", 1)

    def untimed(report):  # every line but the one with the search's time
        return [line for line in report.splitlines() if not line.startswith("  searched ")]

    assert untimed(text) == untimed(reading.text())
    got = reading.json()
    assert {k: v for k, v in got.items() if k != "seconds"} == {k: v for k, v in report.items() if k != "seconds"}
    assert len(runs) == 2  # each capture searched once (the command's hw, None, is the API's)


def test_hw_overrides_the_gpu_name_and_is_checked(capsys):
    path = DATA / "h200_holdout" / "h_mm_16x256x256_12.npz"
    assert identify_capture(path, hw="mi300x") == 1  # another unit cannot reproduce the H200's bits
    assert "unit mi300x" in capsys.readouterr().out
    assert identify_capture(path, hw="tpu") == 2
    assert capsys.readouterr().err.startswith("fp16emu identify: error: --hw:")


def test_the_report_fields_are_json(tmp_path):
    cap = load_capture(DATA / "h200_dev" / "c3x3_c32_k32_h16_nchw_fwd.npz")
    r = search(cap)
    rep = to_json(cap, r)
    json.dumps(rep)
    assert rep["schedule"]["k_order"] == "rsc" and rep["kernel_families"] == ["cudnn-cutlass-fprop"]


def test_a_split_k_kernel_with_atomics_is_inside_its_ensemble():
    """Outputs of a split-K GEMM whose partials were added in a random order per element (fp32
    atomics): no fixed order reproduces them, every one is some order's outcome."""
    import emu
    import models
    from validation.captures import Capture

    rng = np.random.default_rng(5)
    A = rng.uniform(-1, 1, (64, 1024)).astype(np.float16)
    B = rng.uniform(-1, 1, (1024, 64)).astype(np.float16)
    order = emu.Schedule(k_tile=64, splits=8, split_rule="ceil")
    parts = emu.split_partials(A, B, models.unit("h100"), order, seed=99)
    out = np.asarray(parts.member(3, "element"), np.float16).reshape(64, 64)
    cap = Capture("atomics", "mm", {"A": A.view(np.uint16), "B": B.view(np.uint16)}, out, gpu="NVIDIA H100")
    r = search(cap)
    assert r.answer == "inside-ensemble", r.stages
    assert r.best.schedule.splits == 8 and r.n_identical < r.n


#: the bf16 and tf32 cuBLAS GEMMs of the development run (issue 29): capture → (unit, variant,
#: schedule fields) that ``fp16emu identify`` found; the tf32 kernel (CUTLASS s1688gemm) rounds
#: its fp32 operands to tf32 to nearest-even before the mma (the unit alone would cut them, RZ)
FORMAT_CASES = {
    "mm_128x2048x128_s190_bf16": ("h100", {}),
    "mm_256x1024x256_s192_bf16": ("h100", {}),
    "mm_64x8192x64_s191_bf16": ("h100", {"splits": 6, "k_tile": 64, "split_rule": "ceil"}),
    "mm_128x2048x128_s195_tf32": ("h100", {"splits": 22, "k_tile": 32, "split_rule": "ceil"}),
    "mm_64x8192x64_s196_tf32": ("h100", {"splits": 52, "k_tile": 32, "split_rule": "ceil"}),
}


def _same_bits(a, b) -> int:
    kind = np.dtype(f"u{a.dtype.itemsize}")
    return int(np.count_nonzero(np.ascontiguousarray(a).view(kind) == np.ascontiguousarray(b).view(kind)))


@pytest.mark.parametrize("case", sorted(FORMAT_CASES))
def test_bf16_and_tf32_gemms_are_their_schedule_bit_for_bit(case):
    from emu.schedule import Schedule
    from validation.captures.gemms import Candidate, Variant, run_candidate

    cap = load_capture(DATA / "h200_dev" / f"{case}.npz")
    unit, fields = FORMAT_CASES[case]
    assert cap.input == case.rsplit("_", 1)[1] and cap.gpu == "NVIDIA H200"
    variant = Variant(tf32_rounding="rne") if cap.input == "tf32" else Variant()
    got = run_candidate(cap, Candidate(unit, variant, Schedule(output=cap.out_format, **fields)))
    assert _same_bits(got, cap.out) == cap.out.size
    if cap.input == "tf32":  # the raw fp32 bits through the unit (RZ) are not what the GPU computed
        raw = run_candidate(cap, Candidate(unit, Variant(), Schedule(output=cap.out_format, **fields)))
        assert _same_bits(raw, cap.out) < cap.out.size // 2


def test_the_search_finds_a_bf16_gemm_from_the_output():
    cap = load_capture(DATA / "h200_dev" / "mm_256x1024x256_s192_bf16.npz")
    r = search(cap)
    assert r.answer == "identical" and r.n_identical == r.n == cap.out.size and r.best.fields()["splits"] == 1
    assert to_json(cap, r)["input"] == "bf16"
