"""Block-scaled GEMM captures (MX, NVFP4; issue 39.4): the plan entry, the swizzled scale layout,
the capture format and its loader, and the search, on synthetic captures made here with
``emu.gemm`` under known schedules (no GPU capture of a block-scaled GEMM exists yet): the search
must find the split-K that made them and answer 'differs' for a planted wrong element."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import emu
import models
from validation.captures import kit
from validation.captures.capture import CaptureError, load_capture
from validation.captures.format import blocked_scales, logical_scales
from validation.captures.scaled import block_split_schedules
from validation.captures.search import search

ROOT = Path(__file__).resolve().parents[3]
M, K, N = 8, 512, 16
NVFP4 = {"op": "scaled_mm", "dtype": "e2m1", "block_scale": "nvfp4", "shapes": {"A": [M, K], "B": [K, N]}}
MXFP8 = {
    "op": "scaled_mm",
    "dtype": "e4m3",
    "b_dtype": "e5m2",
    "block_scale": "mx",
    "shapes": {"A": [M, K], "B": [K, N]},
}


def test_swizzle_by_hand():
    """cuBLASLt's layout (torch's to_blocked): a 128 × 4 tile stores row 32·i + j, column c at
    flat position 16·j + 4·i + c; tiles row-major, padded with zeros."""
    x = np.arange(130 * 5, dtype=np.int64).reshape(130, 5)
    flat = blocked_scales(x)
    assert flat.size == 2 * 2 * 512
    for r, c in ((0, 0), (1, 0), (32, 0), (33, 3), (127, 2), (128, 0), (129, 4), (5, 4)):
        R, C, i, j = r // 128, c // 4, (r % 128) // 32, r % 32
        tile = R * 2 + C
        assert flat[tile * 512 + 16 * j + 4 * i + c % 4] == x[r, c], (r, c)
    assert np.count_nonzero(flat) == x.size - 1  # x[0, 0] is 0; the rest is padding
    for rows, cols in ((130, 5), (1, 1), (256, 8), (7, 3)):
        y = np.random.default_rng(rows).integers(0, 256, (rows, cols)).astype(np.uint8)
        np.testing.assert_array_equal(logical_scales(blocked_scales(y), rows, cols), y)
    with pytest.raises(ValueError, match=r"^scales: 100 swizzled scales; \(7, 3\) scales swizzle to 512"):
        logical_scales(np.zeros(100, np.uint8), 7, 3)


def test_plan_entries():
    nv = kit.check_plan_entry(NVFP4)
    assert (nv["scale_format"], nv["block"], nv["b_dtype"], nv["out_dtype"]) == (
        "ue4m3",
        16,
        "float4_e2m1fn_x2",
        "bfloat16",
    )
    mx = kit.check_plan_entry(MXFP8)
    assert (mx["scale_format"], mx["block"], mx["scale_exponents"]) == ("ue8m0", 32, [-4, 4])
    ops = kit.generate_operands(mx)
    assert ops["scale_a"].shape == (M, K // 32) and ops["scale_b"].shape == (N, K // 32)
    assert ops["scale_a"].dtype == np.uint8 and 123 <= ops["scale_a"].min() and ops["scale_b"].max() <= 131
    fp4 = kit.generate_operands(nv)
    assert fp4["A"].max() < 16 and fp4["scale_a"].shape == (M, K // 16) and fp4["scale_b"].max() < 0x80
    np.testing.assert_array_equal(kit.generate_operands(nv)["B"], fp4["B"])  # the same draw on any machine
    spec = kit.plan_entry_from_argv(f"scaled_mm --A {M} {K} --B {K} {N} --dtype e2m1 --block-scale nvfp4".split())
    assert spec == nv


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"block_scale": "fp8"}, "block_scale: 'fp8' is not one of mx, nvfp4"),
        ({"dtype": "e4m3"}, "dtype: nvfp4 block scaling takes float4_e2m1fn_x2"),
        ({"block_scale": "mx", "b_dtype": "e4m3"}, "b_dtype: float8_e4m3fn with A float4_e2m1fn_x2"),
        ({"shapes": {"A": [M, 48], "B": [48, N]}}, "shapes: block-scaled torch._scaled_mm needs K a multiple of 32"),
        ({"bias": True}, "bias: block-scaled torch._scaled_mm takes no bias"),
        ({"use_fast_accum": True}, "use_fast_accum: "),
        ({"scale_a": 2.0}, "scale_a: block scales are drawn"),
        ({"scale_range": [0.5, 500]}, "scale_range: expected [lo, hi] with 0 < lo < hi ≤ 448"),
        ({"block_scale": "mx", "scale_exponents": [3, 200]}, "scale_exponents: expected lo ≤ hi ≤ 127"),
        ({"range": [-8.0, 8.0]}, "range: [-8.0, 8.0] leaves the finite range ±6"),
    ],
)
def test_a_bad_entry_names_its_field(change, field):
    with pytest.raises(ValueError, match="^" + __import__("re").escape(field)):
        kit.check_plan_entry({**NVFP4, **change})


@pytest.mark.parametrize(
    ("gpu", "entry", "refused"),
    [
        ("H100", NVFP4, "gpu: block-scaled torch._scaled_mm needs compute capability 10.0"),
        ("B200", NVFP4, None),
        ("sm_120", MXFP8, None),
        ("MI355X", MXFP8, None),
        ("MI355X", NVFP4, "gpu: on AMD GPUs block-scaled scaled_mm is MX on gfx950"),
        ("MI300X", MXFP8, "gpu: on AMD GPUs block-scaled scaled_mm is MX on gfx950"),
    ],
)
def test_gpu_rules(gpu, entry, refused):
    spec = kit.check_plan_entry(entry)
    if refused is None:
        kit.check_gpu(spec, gpu)
    else:
        with pytest.raises(ValueError, match="^" + __import__("re").escape(refused)):
            kit.check_gpu(spec, gpu)


def test_check_runs_as_plain_copied_files_without_torch(tmp_path):
    """The kit is kit.py, format.py and plan.py copied into one folder: ``--check`` runs there
    under python -I with torch hidden (a module named torch that fails to import)."""
    for name in ("kit.py", "format.py", "plan.py"):
        shutil.copy(ROOT / "validation" / "captures" / name, tmp_path / name)
    (tmp_path / "torch.py").write_text("raise ImportError('no torch here')\n")
    argv = f"scaled_mm --A {M} {K} --B {K} {N} --dtype e2m1 --block-scale nvfp4 --check".split()
    ok = subprocess.run(
        [sys.executable, "-I", str(tmp_path / "kit.py"), *argv], capture_output=True, text=True, cwd=tmp_path
    )
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run(
        [sys.executable, "-I", str(tmp_path / "kit.py"), *argv, "--gpu", "H100"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert bad.returncode == 2 and "compute capability 10.0" in bad.stderr and "Traceback" not in bad.stderr


def _made(spec, unit, bounds, planted=False):
    """The output of ``spec``'s operands under ``unit`` split at ``bounds`` (k indices), made here
    as the GPU would: each split one chain from +0 (``emu.gemm`` with its blocks' scales), the
    partials added in fp32 in split order, rounded to the output format; with ``planted`` one
    element off by one ulp."""
    spec = kit.check_plan_entry(spec)
    ops = kit.generate_operands(spec)
    blk = spec["block"]
    acc = None
    for k0, k1 in zip(bounds[:-1], bounds[1:]):
        sa, sb = ops["scale_a"][:, k0 // blk : k1 // blk], ops["scale_b"][:, k0 // blk : k1 // blk].T
        part = emu.gemm(ops["A"][:, k0:k1], ops["B"][k0:k1], None, unit, scale_a=sa, scale_b=sb)
        acc = part if acc is None else (acc + part).astype(np.float32)
    if spec["out_dtype"] == "bfloat16":
        out = acc.astype(ml_dtypes.bfloat16).view(np.uint16).copy()
    else:
        out = acc.copy()
    if planted:  # one ulp of the output format off
        out.view(np.uint16 if out.itemsize == 2 else np.uint32)[3, 5] ^= 1
    return spec, ops, out


#: fp32 outputs and operands and scales over wide ranges, so that where K is split shows
WIDE_NVFP4 = {**NVFP4, "out_dtype": "float32", "range": [-6.0, 6.0], "scale_range": [0.02, 448.0]}
WIDE_MXFP8 = {**MXFP8, "out_dtype": "float32"}


@pytest.mark.parametrize(
    ("spec", "unit", "gpu", "bounds"),
    [
        (WIDE_NVFP4, models.unit("b200", input="e2m1", scale="ue4m3", block=16), "NVIDIA B200", (0, 256, 512)),
        (
            WIDE_MXFP8,
            models.unit("b200", input=("e4m3", "e5m2"), scale="ue8m0", block=32),
            "NVIDIA B200",
            (0, 128, 256, 384, 512),
        ),
        (
            WIDE_MXFP8,
            models.unit("mi355", input=("e4m3", "e5m2"), scale="ue8m0", block=32),
            "AMD Instinct MI355X",
            (0, 512),
        ),
    ],
    ids=["nvfp4-b200-2-splits", "mxfp8-b200-4-splits", "mxfp8-mi355-one-chain"],
)
def test_the_search_finds_the_split_that_made_the_capture(tmp_path, spec, unit, gpu, bounds):
    """Only the schedule that made the capture reproduces it; one element planted one ulp off:
    'differs', every other output still reproduced."""
    spec, ops, out = _made(spec, unit, bounds)
    path = kit.save(tmp_path / "bs.npz", kit.scaled_capture_fields(spec, ops, out, gpu=gpu, repeat_differs=0))
    raw = np.load(path)
    assert raw["scale_a"].shape == (M, K // spec["block"]) and str(raw["scale_format"]) == spec["scale_format"]
    cap = load_capture(path)
    assert cap.extra["block"] == spec["block"] and cap.out_format == "fp32"
    res = search(cap)
    assert res.answer == "identical", res.stages
    assert res.unit == unit.name
    found = {
        (0, K) if c.schedule.splits == 1 else tuple(b * c.schedule.k_tile for b in c.schedule.split_bounds)
        for c in res.reproducing
    }
    assert found == {tuple(bounds)}
    planted = _made(spec, unit, bounds, planted=True)[2]
    path = kit.save(tmp_path / "bad.npz", kit.scaled_capture_fields(spec, ops, planted, gpu=gpu))
    res = search(load_capture(path))
    assert res.answer == "differs" and res.n_identical == M * N - 1


def test_split_bounds_never_cut_a_block():
    for sch in block_split_schedules(512, 32)[1:]:
        assert all(b * sch.k_tile % 32 == 0 for b in sch.split_bounds)
    assert block_split_schedules(512, 32)[0].splits == 1


def test_identify_cli(tmp_path, capsys):
    from validation.cli import main as fp16emu

    unit = models.unit("b200", input="e2m1", scale="ue4m3", block=16)
    spec, ops, out = _made(NVFP4, unit, (0, 256, 512))
    path = kit.save(tmp_path / "nv.npz", kit.scaled_capture_fields(spec, ops, out, gpu="NVIDIA B200"))
    assert fp16emu(["identify", str(path), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["answer"] == "identical" and report["n_identical"] == M * N


def test_loader_errors_name_the_field(tmp_path):
    spec, ops, out = _made(NVFP4, models.unit("b200", input="e2m1", scale="ue4m3", block=16), (0, K))
    fields = kit.scaled_capture_fields(spec, ops, out, gpu="NVIDIA B200")
    for change, message in (
        ({"scale_a": ops["scale_a"][:, :-1]}, r"scale_a: expected uint8 ue4m3 patterns of shape \(8, 32\)"),
        ({"block": 32}, "block: expected one of the block scalings"),
        ({"A": ops["A"] | 0x10}, "A: fp4 .*below 16"),
        ({"B_dtype": "float8_e4m3fn"}, "B: expected uint8 patterns"),
    ):
        kit.save(tmp_path / "x.npz", {**fields, **change})
        with pytest.raises(CaptureError, match=message):
            load_capture(tmp_path / "x.npz")
    kit.save(tmp_path / "x.npz", {**fields, "gpu": "NVIDIA H100"})
    with pytest.raises(CaptureError, match="gpu: unit: 'h100' has no block-scaled instructions"):
        search(load_capture(tmp_path / "x.npz"))


def test_omitted_operands_and_scales_are_drawn_again(tmp_path):
    """``--omit-operands``: the operands and both scale arrays leave only their sha256; the loader
    draws them again from the plan entry in the file and checks them."""
    unit = models.unit("b200", input="e2m1", scale="ue4m3", block=16)
    spec, ops, out = _made(WIDE_NVFP4, unit, (0, 256, 512))
    fields = kit.scaled_capture_fields(spec, ops, out, gpu="NVIDIA B200")
    for name in ops:  # what capture_case(..., omit_operands=True) keeps
        fields[f"{name}_sha256"] = kit.operand_digest(fields.pop(name))
    cap = load_capture(kit.save(tmp_path / "omit.npz", fields))
    np.testing.assert_array_equal(cap.extra["scale_b"], ops["scale_b"])
    assert search(cap).answer == "identical"
    fields["scale_a_sha256"] = "0" * 64
    with pytest.raises(CaptureError, match="scale_a: the operand drawn from seed 0 is not the GPU machine's"):
        load_capture(kit.save(tmp_path / "omit.npz", fields))


def test_a_file_with_swizzled_scales_is_read_as_logical(tmp_path):
    """A file that kept the scales as torch handed them to cuBLASLt (``scale_layout =
    "swizzled"``, flat) reads as the same capture as the logical one."""
    unit = models.unit("b200", input="e2m1", scale="ue4m3", block=16)
    spec, ops, out = _made(WIDE_NVFP4, unit, (0, 256, 512))
    fields = kit.scaled_capture_fields(spec, ops, out, gpu="NVIDIA B200")
    swizzled = {**fields, "scale_layout": "swizzled"}
    swizzled.update(scale_a=blocked_scales(ops["scale_a"]), scale_b=blocked_scales(ops["scale_b"]))
    cap = load_capture(kit.save(tmp_path / "sw.npz", swizzled))
    np.testing.assert_array_equal(cap.extra["scale_a"], ops["scale_a"])
    np.testing.assert_array_equal(cap.extra["scale_b"], ops["scale_b"])
    kit.save(tmp_path / "sw.npz", {**swizzled, "scale_b": blocked_scales(ops["scale_b"])[:-4]})
    with pytest.raises(CaptureError, match=r"scale_b: scales: 4092 swizzled scales; \(16, 32\) scales swizzle to 4096"):
        load_capture(tmp_path / "sw.npz")
    kit.save(tmp_path / "sw.npz", {**swizzled, "scale_layout": "tiled"})
    with pytest.raises(CaptureError, match="scale_layout: expected 'logical' or 'swizzled'"):
        load_capture(tmp_path / "sw.npz")


def test_the_block_scaled_plan_is_ready_to_run():
    """benchmarks/captures/plan_blockscaled.json (made by make_plan_blockscaled.py): every entry
    passes the kit's checks and what a B200 accepts; NVFP4, MXFP4 and MXFP8 (e4m3, e5m2),
    bfloat16 and float32 outputs, a K long enough to be split."""
    specs = kit.read_plan(ROOT / "benchmarks" / "captures" / "plan_blockscaled.json")
    for spec in specs:
        kit.check_gpu(spec, "NVIDIA B200")
    assert len({s["name"] for s in specs}) == len(specs)
    assert {(s["block_scale"], s["dtype"], s["b_dtype"]) for s in specs} == {
        ("nvfp4", "float4_e2m1fn_x2", "float4_e2m1fn_x2"),
        ("mx", "float4_e2m1fn_x2", "float4_e2m1fn_x2"),
        ("mx", "float8_e4m3fn", "float8_e4m3fn"),
        ("mx", "float8_e4m3fn", "float8_e5m2"),
    }
    assert {s["out_dtype"] for s in specs} == {"bfloat16", "float32"}
    assert max(s["shapes"]["A"][1] for s in specs) >= 16384


@pytest.mark.parametrize("kind", ["mxf4", "mxf8f6f4"])
def test_the_search_reads_which_instruction_ran(tmp_path, kind):
    """MXFP4 on Blackwell is kind::mxf4 (GST-FDPA) or kind::mxf8f6f4 (ST-FDPA): the search runs
    both and names the one that made the capture."""
    mxfp4 = {**NVFP4, "block_scale": "mx", "out_dtype": "float32", "range": [-6.0, 6.0], "scale_exponents": [-8, 8]}
    unit = models.unit("b200", input="e2m1", scale="ue8m0", block=32, kind=kind)
    spec, ops, out = _made(mxfp4, unit, (0, 512))
    res = search(
        load_capture(kit.save(tmp_path / "mx4.npz", kit.scaled_capture_fields(spec, ops, out, gpu="NVIDIA B200")))
    )
    assert res.answer == "identical"
    assert {c.unit for c in res.reproducing} == {f"b200 kind::{kind}"}
    assert {c.schedule.splits for c in res.reproducing} == {1}
