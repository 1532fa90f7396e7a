"""The capture kit's fp8 GEMMs (``scaled_mm``, torch._scaled_mm) without torch or a GPU: the
CPU rounding of generated operands into fp8 and bf16 against ml_dtypes, the draws, the plan
checks (torch's contract, each refusal naming its field), the device checks on stand-in device
records, the saved file's layout, and a round trip: a capture written by the kit's ``save`` with
an output emulated by ``emu.gemm`` at a known promotion interval is identified as that schedule
by ``fp16emu identify``. The torch path itself runs in tests/oracle/test_capture_torch.py."""

import json
import re
import zipfile
from pathlib import Path
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

import emu
import models
from validation.captures import kit, load_capture
from validation.cli import main as fp16emu

FP8 = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
PLAN = Path(__file__).parents[3] / "benchmarks" / "captures" / "plan_fp8.json"


def _finite_values(name):
    """Every finite value of an 8-bit format, ascending (decoded by ml_dtypes)."""
    v = np.arange(256, dtype=np.uint8).view(getattr(ml_dtypes, name)).astype(np.float64)
    return np.unique(v[np.isfinite(v)])


@pytest.mark.parametrize("name", FP8)
def test_fp8_rounding_is_ml_dtypes_rne_on_every_value_and_midpoint(name):
    """Probes exact in float32, where ml_dtypes rounds once (from float64 it goes through
    float32: a double rounding, see the next test)."""
    values = _finite_values(name).astype(np.float32)
    mids = (values[:-1] + values[1:]) / 2  # exact ties: RNE picks the even pattern
    nudged = np.concatenate([np.nextafter(mids, np.float32(-np.inf)), np.nextafter(mids, np.float32(np.inf))])
    thirds = values[:-1] + (values[1:] - values[:-1]) / 3
    probes = np.concatenate([values, mids, nudged, thirds, np.float32([0.0, -0.0])])
    got = kit.round_to_patterns(probes.astype(np.float64), name)
    want = probes.astype(getattr(ml_dtypes, name)).view(np.uint8)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(probes[i], f"{got[i]:#04x}", f"{want[i]:#04x}") for i in bad[:5]]
    assert got.dtype == np.uint8


def test_one_rounding_from_float64():
    """400 + 2^-44 lies just above the tie between e4m3's 384 (0x7c) and 416 (0x7d): rounded
    once it is 416; through float32 (400 exactly, a tie to even) it would be 384."""
    x = 400.0 + 2.0**-44
    assert kit.round_to_patterns([x, -x], "float8_e4m3fn").tolist() == [0x7D, 0xFD]
    assert kit.round_to_patterns([400.0], "float8_e4m3fn").tolist() == [0x7C]


def test_bf16_rounding_is_ml_dtypes_rne_on_sampled_midpoints():
    rng = np.random.default_rng(0)
    bits = np.concatenate([rng.integers(0, 0x7F7F, 4000), np.arange(0, 130)]).astype(np.uint16)
    lo = bits.view(ml_dtypes.bfloat16).astype(np.float32)
    hi = (bits + 1).view(ml_dtypes.bfloat16).astype(np.float32)
    mids = lo + (hi - lo) / 2  # exact in float32: bf16 keeps 16 fewer fraction bits
    up = np.float32(np.inf)
    probes = np.concatenate([lo, -lo, mids, -mids, np.nextafter(mids, np.float32(0)), np.nextafter(mids, up)])
    got = kit.round_to_patterns(probes.astype(np.float64), "bfloat16")
    np.testing.assert_array_equal(got, probes.astype(ml_dtypes.bfloat16).view(np.uint16))


def test_rounding_never_saturates_or_overflows_and_fnuz_has_no_negative_zero():
    for value in (449.0, np.inf, np.nan):
        with pytest.raises(ValueError, match="^values: float8_e4m3fn holds finite values up to ±448"):
            kit.round_to_patterns([value], "float8_e4m3fn")
    with pytest.raises(ValueError, match="±240"):
        kit.round_to_patterns([-241.0], "float8_e4m3fnuz")
    tiny = -(2.0**-12)  # below half of e4m3's smallest subnormal 2^-9: rounds to zero
    assert kit.round_to_patterns([tiny], "float8_e4m3fn")[0] == 0x80
    assert kit.round_to_patterns([tiny], "float8_e4m3fnuz")[0] == 0x00


SPEC = {"op": "scaled_mm", "dtype": "e4m3", "b_dtype": "e5m2", "shapes": {"A": [5, 48], "B": [48, 32]}, "seed": 11}


def test_generated_operands_are_numpy_pcg64_draws_rounded_on_the_cpu():
    spec = {**SPEC, "range": [-20.0, 20.0], "bias": True, "rowwise": True, "scale_range": [0.25, 4.0]}
    ops = kit.generate_operands(spec)
    again = kit.generate_operands(spec)
    assert set(ops) == {"A", "B", "bias", "scale_a", "scale_b"}
    for name in ops:
        np.testing.assert_array_equal(ops[name], again[name])
    # the documented stream: A, B, bias, scale_a, scale_b from one default_rng(seed), in that order
    rng = np.random.default_rng(11)
    want_a = rng.uniform(-20, 20, (5, 48)).astype(ml_dtypes.float8_e4m3fn)
    want_b = rng.uniform(-20, 20, (48, 32)).astype(ml_dtypes.float8_e5m2)
    want_bias = rng.uniform(-20, 20, 32).astype(ml_dtypes.bfloat16)
    want_sa = rng.uniform(0.25, 4.0, (5, 1)).astype(np.float32)
    want_sb = rng.uniform(0.25, 4.0, (1, 32)).astype(np.float32)
    np.testing.assert_array_equal(ops["A"], want_a.view(np.uint8))
    np.testing.assert_array_equal(ops["B"], want_b.view(np.uint8))
    np.testing.assert_array_equal(ops["bias"], want_bias.view(np.uint16))
    np.testing.assert_array_equal(ops["scale_a"].view(np.uint32), want_sa.view(np.uint32))
    np.testing.assert_array_equal(ops["scale_b"].view(np.uint32), want_sb.view(np.uint32))
    other = kit.generate_operands({**spec, "seed": 12})
    assert not np.array_equal(ops["A"], other["A"])
    per_tensor = kit.generate_operands({**SPEC, "scale_a": 0.5, "scale_b": 3.0, "out_dtype": "fp16", "bias": True})
    assert per_tensor["scale_a"].shape == () and per_tensor["scale_a"] == np.float32(0.5)
    assert per_tensor["bias"].dtype == np.float16


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"dtype": "float16"}, "dtype"),
        ({"b_dtype": "e5m2fnuz"}, "b_dtype"),
        ({"shapes": {"A": [5, 40], "B": [40, 32]}}, "shapes"),
        ({"shapes": {"A": [5, 48], "B": [48, 30]}}, "shapes"),
        ({"shapes": {"A": [5, 48], "B": [32, 32]}}, "shapes.B"),
        ({"shapes": {"A": [5, 48], "B": [48, 32], "C": [32]}}, "shapes.C"),
        ({"shapes": {"A": [5, 48, 1], "B": [48, 32]}}, "shapes.A"),
        ({"out_dtype": "e4m3"}, "out_dtype"),
        ({"out_dtype": "fp32", "bias": True}, "bias"),
        ({"rowwise": True, "out_dtype": "fp16"}, "rowwise"),
        ({"rowwise": True, "scale_a": 2.0}, "scale_a"),
        ({"rowwise": True, "scale_range": [0, 1]}, "scale_range"),
        ({"scale_b": 0}, "scale_b"),
        ({"scale_a": 1e39}, "scale_a"),
        ({"range": [-500, 500]}, "range"),
        ({"use_fast_accum": "yes"}, "use_fast_accum"),
        ({"op": "mm", "shapes": {"A": [2, 3], "B": [3, 2]}}, "dtype"),
    ],
)
def test_a_bad_scaled_mm_entry_names_its_field(change, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        kit.generate_operands({**SPEC, **change})


def test_the_command_line_describes_the_plan_entry():
    argv = "scaled_mm --A 64 4096 --B 4096 256 --dtype e4m3 --b-dtype e5m2 --rowwise --bias --fast-accum --seed 3"
    spec = kit.plan_entry_from_argv(argv.split())
    assert spec["dtype"] == "float8_e4m3fn" and spec["b_dtype"] == "float8_e5m2"
    assert spec["out_dtype"] == "bfloat16" and spec["rowwise"] and spec["use_fast_accum"]
    assert spec["shapes"] == {"A": [64, 4096], "B": [4096, 256], "bias": [256]}
    assert spec["scale_range"] == [0.5, 2.0]
    plain = kit.plan_entry_from_argv("scaled_mm --A 8 32 --B 32 16 --scale-a 0.5 --out-dtype fp32".split())
    assert plain["dtype"] == plain["b_dtype"] == "float8_e4m3fn" and plain["scale_a"] == 0.5
    assert plain["scale_b"] == 1.0 and "bias" not in plain["shapes"] and not plain["use_fast_accum"]


def test_the_command_line_refuses_before_torch(tmp_path, capsys):
    bad = "scaled_mm --A 8 30 --B 30 16 --dtype e4m3 --out x.npz".split()
    assert kit.main(bad) == 2
    assert capsys.readouterr().err.startswith("capture_torch: shapes: torch._scaled_mm needs K and N multiples of 16")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([{**SPEC, "name": "ok"}, {**SPEC, "name": "bad", "out_dtype": "e5m2"}]))
    assert kit.main(["--plan", str(plan)]) == 2
    assert "--plan: entry 1 (bad): out_dtype:" in capsys.readouterr().err


def _device(major=9, minor=0, hip=None, arch=""):
    """A stand-in for the torch module as check_device reads it (no GPU here)."""
    props = SimpleNamespace(major=major, minor=minor, name="a GPU", gcnArchName=arch)
    return SimpleNamespace(
        __version__="2.13",
        _scaled_mm=None,
        float8_e4m3fn=1,
        float8_e5m2=1,
        float8_e4m3fnuz=1,
        float8_e5m2fnuz=1,
        device=lambda d: SimpleNamespace(type=str(d).split(":")[0]),
        version=SimpleNamespace(hip=hip),
        cuda=SimpleNamespace(get_device_properties=lambda d: props),
    )


@pytest.mark.parametrize(
    ("device", "change", "field"),
    [
        (_device(8, 6), {}, "device: torch._scaled_mm needs compute capability 8.9"),
        (_device(9, 0), {"dtype": "e4m3fnuz", "b_dtype": "e4m3fnuz"}, "dtype: float8_e4m3fnuz is MI300's"),
        (_device(8, 9), {"dtype": "e5m2", "b_dtype": "e5m2"}, "b_dtype: cuBLASLt has no e5m2 × e5m2"),
        (_device(hip="6.2", arch="gfx942:sramecc+:xnack-"), {}, "dtype: MI300 (gfx942) multiplies"),
        (_device(hip="6.2", arch="gfx90a"), {"dtype": "e4m3fnuz", "b_dtype": "e5m2fnuz"}, "dtype: the fnuz types"),
        (_device(hip="6.2", arch="gfx90a"), {}, "device: torch._scaled_mm needs MI300"),
        (_device(hip="6.5", arch="gfx950"), {"rowwise": True}, "b_dtype: row-wise scales on ROCm need B in e4m3"),
    ],
)
def test_the_device_check_refuses_what_the_gpu_cannot_run(device, change, field):
    with pytest.raises(kit.DeviceRefused, match="^" + re.escape(field)):
        kit.check_device(device, kit.check_plan_entry({**SPEC, **change}), "cuda")


def test_the_device_check_accepts_what_the_gpu_runs():
    kit.check_device(_device(9, 0), kit.check_plan_entry(SPEC), "cuda")
    kit.check_device(_device(8, 9), kit.check_plan_entry({**SPEC, "dtype": "e5m2", "b_dtype": "e4m3"}), "cuda")
    fnuz = {**SPEC, "dtype": "e4m3fnuz", "b_dtype": "e4m3fnuz", "rowwise": True}
    kit.check_device(_device(hip="6.2", arch="gfx942:sramecc+:xnack-"), kit.check_plan_entry(fnuz), "cuda")
    kit.check_device(_device(7, 0), kit.check_plan_entry(SPEC), "cpu")  # PyTorch's CPU reference (tests)


M, K, N = 8, 384, 16  # the promotion interval 2 leaves 6 intervals of 64 k


def _emulated_capture(tmp_path, spec, schedule, **recorded):
    """The kit's capture of ``spec`` with the GPU output replaced by ``emu.gemm``'s under
    ``schedule`` (the h100 unit of the spec's formats)."""
    spec = kit.check_plan_entry(spec)
    ops = kit.generate_operands(spec)
    A = ops["A"].view(getattr(ml_dtypes, spec["dtype"]))
    B = ops["B"].view(getattr(ml_dtypes, spec["b_dtype"]))
    short = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}
    unit = models.unit("h100", input=(short[spec["dtype"]], short[spec["b_dtype"]]))
    bias = None
    if "bias" in ops:
        bias = ops["bias"].view(ml_dtypes.bfloat16).astype(np.float32)[None]
    out = np.asarray(emu.gemm(A, B, bias, unit, schedule, scale_a=ops["scale_a"], scale_b=ops["scale_b"]))
    if out.dtype == ml_dtypes.bfloat16:
        out = out.view(np.uint16)  # what the kit writes for a bfloat16 output
    fields = kit.scaled_capture_fields(spec, ops, out, **recorded)
    return kit.save(tmp_path / "fp8.npz", fields), ops


def test_the_saved_file_holds_what_the_loader_reads(tmp_path):
    spec = {**SPEC, "shapes": {"A": [M, K], "B": [K, N]}, "rowwise": True, "bias": True}
    sch = emu.Schedule(k_tile=32, promotion_interval=2, c_entry="epilogue", output="bf16")
    path, ops = _emulated_capture(tmp_path, spec, sch, gpu="NVIDIA H100 80GB HBM3", repeat_differs=0)
    with zipfile.ZipFile(path) as z:
        members = sorted(n.removesuffix(".npy") for n in z.namelist())
    assert members == sorted(
        "op A B A_dtype B_dtype dtype scale_a scale_b bias bias_dtype out out_dtype use_fast_accum scaling "
        "spec seed range shapes gpu repeat_differs".split()
    )
    raw = np.load(path)
    assert raw["A"].dtype == np.uint8 and raw["B"].dtype == np.uint8 and raw["out"].dtype == np.uint16
    assert str(raw["A_dtype"]) == "float8_e4m3fn" and str(raw["B_dtype"]) == "float8_e5m2"
    assert raw["scale_a"].shape == (M, 1) and raw["scale_b"].shape == (1, N) and str(raw["scaling"]) == "rowwise"
    cap = load_capture(path)
    assert cap.op == "scaled_mm" and cap.input == "e4m3xe5m2" and cap.out_format == "bf16"
    np.testing.assert_array_equal(cap.operands["A"], ops["A"])
    np.testing.assert_array_equal(cap.extra["bias"][0], ops["bias"].view(ml_dtypes.bfloat16).astype(np.float32))
    # the plan entry in the file draws the same operands again (what --omit-operands relies on)
    again = kit.generate_operands(json.loads(str(raw["spec"])))
    np.testing.assert_array_equal(again["B"], ops["B"])


def test_a_kit_capture_is_identified_as_the_schedule_that_made_it(tmp_path, capsys):
    """fp32 output, per-tensor scales of 0.75 and 1.5 (their product is exact: the scale orders
    agree), operands over e4m3's whole range: only the promotion interval 2 reproduces."""
    spec = {**SPEC, "shapes": {"A": [M, K], "B": [K, N]}, "out_dtype": "float32", "range": [-448.0, 448.0]}
    spec |= {"scale_a": 0.75, "scale_b": 1.5}
    sch = emu.Schedule(k_tile=32, promotion_interval=2, output="fp32")
    path, _ = _emulated_capture(tmp_path, spec, sch, gpu="NVIDIA H100 80GB HBM3", kernels=np.array(["nvjet_sm90"]))
    assert fp16emu(["identify", str(path), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["answer"] == "identical" and report["n_identical"] == M * N
    assert {s["promotion_interval"] for s in report["schedules"]} == {2}


def test_the_fp8_plan_is_ready_to_run():
    """benchmarks/captures/plan_fp8.json: every entry passes the kit's checks and runs on an
    H100 (the device check on a stand-in sm_90 record); it covers both formats, both scalings,
    fast accumulation on and off, and a K long enough for cuBLAS to split."""
    specs = kit.read_plan(PLAN)
    for spec in specs:
        kit.check_device(_device(9, 0), spec, "cuda")
    names = [s["name"] for s in specs]
    assert len(set(names)) == len(names)
    assert {s["dtype"] for s in specs} | {s["b_dtype"] for s in specs} == {"float8_e4m3fn", "float8_e5m2"}
    assert {s["rowwise"] for s in specs} == {True, False} and {s["use_fast_accum"] for s in specs} == {True, False}
    assert max(s["shapes"]["A"][1] for s in specs) >= 16384
    assert {s["out_dtype"] for s in specs} == {"bfloat16", "float16", "float32"}


def test_a_plan_skips_what_the_gpu_cannot_run_and_reports_failures(tmp_path, monkeypatch, capsys):
    """The GPU loop with a stand-in torch (an sm_90 record) and capture_case replaced: the
    e5m2 × e5m2 entry is skipped before the GPU is touched, a failing entry is reported and the
    others written; exit 1."""
    gpu = _device(9, 0)
    gpu.cuda.is_available = lambda: True
    gpu.cuda.get_device_name = lambda: "NVIDIA H100 80GB HBM3"
    monkeypatch.setitem(__import__("sys").modules, "torch", gpu)
    ran = []

    def fake_capture_case(torch, spec, omit_operands=False):
        ran.append(spec["name"])
        if spec["name"] == "fails":
            raise RuntimeError("CUBLAS_STATUS_NOT_SUPPORTED when calling cublasLtMatmul\nmore")
        out = np.zeros((5, 32), np.uint16)
        return kit.scaled_capture_fields(
            spec, kit.generate_operands(spec), out, kernels=np.array(["k"]), repeat_differs=0
        )

    monkeypatch.setattr(kit, "capture_case", fake_capture_case)
    plan = tmp_path / "plan.json"
    entries = [{**SPEC, "name": "ok"}, {**SPEC, "name": "skip", "dtype": "e5m2"}, {**SPEC, "name": "fails"}]
    plan.write_text(json.dumps(entries))
    assert kit.main(["--plan", str(plan), "--out-dir", str(tmp_path / "out")]) == 1
    captured = capsys.readouterr()
    assert ran == ["ok", "fails"]
    assert "skipped skip: b_dtype: cuBLASLt has no e5m2 × e5m2" in captured.err
    assert "fails.npz: FAILED (scaled_mm 5x48x32 float8_e4m3fn x float8_e5m2" in captured.err
    assert "CUBLAS_STATUS_NOT_SUPPORTED when calling cublasLtMatmul" in captured.err
    assert "1 captured on NVIDIA H100 80GB HBM3 (PyTorch 2.13), 1 skipped, 1 failed" in captured.out
    assert load_capture(tmp_path / "out" / "ok.npz").op == "scaled_mm"


def test_save_never_writes_through_a_planted_link(tmp_path):
    """Issue 41: the kit wrote a fixed temporary name ``.NAME.tmp`` with ``open("wb")``; a link
    planted there was written through, on the GPU machine. Now a random, exclusively created name;
    links at the old temporary name and at the target are left alone or replaced, the victims
    unchanged; the mode follows the umask."""
    import os

    from validation.captures.format import save

    victim, victim2 = tmp_path / "victim", tmp_path / "victim2"
    victim.write_bytes(b"keep")
    victim2.write_bytes(b"keep too")
    out = tmp_path / "cap.npz"
    (tmp_path / ".cap.npz.tmp").symlink_to(victim)
    old = os.umask(0o022)
    try:
        save(out, {"op": "mm", "out": np.zeros(3, np.float16)})
        assert victim.read_bytes() == b"keep"
        assert (out.stat().st_mode & 0o777) == 0o644
        out.unlink()
        out.symlink_to(victim2)  # a link at the target is replaced by the file, not followed
        save(out, {"op": "mm", "out": np.ones(3, np.float16)})
        assert victim2.read_bytes() == b"keep too" and not out.is_symlink()
        assert np.load(out)["out"].tolist() == [1.0, 1.0, 1.0]
    finally:
        os.umask(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".cap.npz.tmp", "cap.npz", "victim", "victim2"]
