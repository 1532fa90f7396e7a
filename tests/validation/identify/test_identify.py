"""Identification: leave-one-out over the named units, adaptive probing, the measured NVIDIA rows,
a negative control, the input formats, the command line, and the GPU probe script's CPU path.

The expected answers are the named units of ``models.units`` (whose parameters come from the
papers and MMA-Sim, not from the identification code), and for the NVIDIA rows the measured
outputs of the GPUs themselves.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import reference_data as ref

import emu
import models
from emu.units import Format
from models import space
from validation import cli
from validation.identify import probe_gpu
from validation.identify import probes as probe
from validation.identify import search as ident

NAMED = [(n, "fp32") for n in models.units.UNIT_NAMES] + [
    (n, "fp16") for n in ("v100", "t4", "a100", "ada", "h100", "b200")
]
IDS = [f"{n}-{o}" for n, o in NAMED]
PROBE_ROWS = 4096


@pytest.fixture(scope="module")
def probes():
    return {acc: probe.probe_set(PROBE_ROWS, 16, seed=0, accumulator=acc) for acc in ("fp32", "fp16")}


def _device_rows(p: probe.ProbeSet, unit) -> ident.Rows:
    """The probe rows with outputs from the unit's own kernel (the stand-in device)."""
    d = emu.dot_add(p.a, p.b, p.c_values(), unit)
    return ident.Rows(p.a, p.b, p.c, d.view(np.uint16 if p.fp16_accumulator else np.uint32))


def _point(name, output):
    return space.Point(space.canonical(models.unit(name, output=output).params))


# --- leave one out ------------------------------------------------------------------------------


@pytest.mark.parametrize("name,output", NAMED, ids=IDS)
def test_leave_one_out_identifies_every_named_unit(probes, name, output):
    rows = _device_rows(probes[output], models.unit(name, output=output))
    result = ident.identify(rows, next_count=0)
    assert result.points_searched > 300
    assert result.consistent == [_point(name, output)], [space.describe(p) for p in result.consistent]
    key = name if output == "fp32" else f"{name}/fp16"
    assert key in result.named.split(" = ")
    assert result.explained == len(rows)


@pytest.fixture(scope="module")
def pools():
    """Every point's outputs on a pool of candidate probes, per output format (computed once)."""
    out = {}
    for fmt in (Format.FP32, Format.FP16):
        pts = space.points(fmt, 16)
        out[fmt] = (pts, ident.pool_outputs(pts, 16, fmt, pool_rows=2048))
    return out


@pytest.mark.parametrize("name,output", NAMED, ids=IDS)
def test_adaptive_identification(pools, name, output):
    fmt = Format.FP16 if output == "fp16" else Format.FP32
    pts, pool = pools[fmt]
    u = models.unit(name, output=output)

    def device(a, b, c):
        d = emu.dot_add(a, b, c.view(np.float16 if fmt == Format.FP16 else np.float32), u)
        return d.view(np.uint16 if fmt == Format.FP16 else np.uint32)

    live, asked, answers = ident.adaptive_identify(device, pts, k=16, output_format=fmt, pool=pool)
    assert len(answers) == len(asked)
    assert live == [_point(name, output)], [space.describe(p) for p in live]
    # log2(number of points) probes would suffice if each halved the set; allow a generous factor
    # (the counts were also printed by a summary test that asserted nothing; it is gone)
    assert 1 <= len(asked) <= 30, (len(asked), len(pts))
    assert len(set(asked)) == len(asked)  # no pool row asked twice


def test_next_probes_split_the_remaining_points(probes):
    rows = _device_rows(probes["fp32"], models.unit("mi300"))
    # keep only the random category: too little to pin the two-stage parameters
    rows = rows.take(np.flatnonzero(probes["fp32"].category == "random")[:64])
    result = ident.identify(rows, next_count=6, pool_rows=1024)
    assert len(result.consistent) > 1 and _point("mi300", "fp32") in result.consistent
    assert result.next_probes
    sizes = [p["classes"] for p in result.next_probes]
    assert sizes == sorted(sizes) and sizes[0] >= 2  # each probe splits further
    # asking the proposed probes (device: the unit's own kernel) narrows the set to a subset
    a = np.array([[int(x, 16) for x in p["a"]] for p in result.next_probes], np.uint16)
    b = np.array([[int(x, 16) for x in p["b"]] for p in result.next_probes], np.uint16)
    c = np.array([int(p["c"], 16) for p in result.next_probes], np.uint32)
    d = emu.dot_add(a, b, c.view(np.float32), models.unit("mi300")).view(np.uint32)
    more = ident.Rows(
        np.concatenate([rows.a, a]),
        np.concatenate([rows.b, b]),
        np.concatenate([rows.c, c]),
        np.concatenate([rows.d, d]),
    )
    again = ident.identify(more, result.consistent, next_count=0)
    assert _point("mi300", "fp32") in again.consistent
    assert len(again.consistent) < len(result.consistent)


# --- negative controls --------------------------------------------------------------------------


def test_flipped_last_bits_are_explained_by_no_point(probes):
    rows = _device_rows(probes["fp32"], models.unit("h100"))
    flipped = np.arange(0, len(rows), 10)
    d = rows.d.copy()
    d[flipped] ^= np.uint32(1)
    bad = ident.Rows(rows.a, rows.b, rows.c, d)
    result = ident.identify(bad)
    assert result.consistent == [] and result.named is None
    assert result.explained < len(rows)
    nearest = result.nearest[0]
    assert nearest.point == _point("h100", "fp32")
    assert nearest.failed == flipped.size
    assert list(nearest.failed_rows) == list(flipped[: len(nearest.failed_rows)])
    text = result.format_text()
    assert "no point reproduces every row" in text and "fails" in text


def test_a_unit_outside_the_space_is_not_forced_onto_a_point(probes):
    outside = models.unit("a100").params._replace(fraction_bits=30)  # F outside 22…26
    assert not space.contains(outside)
    rows = _device_rows(probes["fp32"], outside)
    result = ident.identify(rows)
    assert result.consistent == []
    assert result.nearest and all(n.failed > 0 for n in result.nearest)


# --- the measured NVIDIA rows -------------------------------------------------------------------

DATAPATH = ("family", "group_size", "fraction_bits", "alignment_rounding")


def _datapaths(result):
    return {tuple(space.as_dict(p).get(f) for f in DATAPATH) for p in result.consistent}


@pytest.mark.parametrize("gpu", ref.NVIDIA_HW_GPUS)
def test_measured_nvidia_rows(gpu):
    folder = ref.require("nvidia_tensor_core_hw", gpu, "fp16")
    name = ref.NVIDIA_HW_UNIT[gpu]
    paths = {}
    for output in ("fp32", "fp16"):
        rows = ident.load_rows(folder, output)
        # the loader reads the same bits as the tests' own loader
        hw = ref.load_nvidia_hw(gpu, "fp16")
        assert np.array_equal(rows.a, hw.a) and np.array_equal(rows.b, hw.b)
        if output == "fp32":
            assert np.array_equal(rows.c, hw.c) and np.array_equal(rows.d, hw.d_fp32)
        else:
            assert np.array_equal(rows.d.view(np.float16).astype(np.float32).view(np.uint32), hw.d_fp16)
        result = ident.identify(rows, next_count=0)
        assert _point(name, output) in result.consistent, f"{gpu} {output}: the named unit does not fit"
        # a guard against a runaway search, not a speed test (speed is measured in benchmarks/):
        # 30 s failed at 30.2 s on a loaded 2-core VM whose numba cache was being filled
        assert result.seconds < 600
        paths[output] = _datapaths(result)
    # the datapath (family, group, F, alignment) both output formats agree on is the named unit's
    named = tuple(space.as_dict(_point(name, "fp32")).get(f) for f in DATAPATH)
    assert paths["fp32"] & paths["fp16"] == {named}


# --- input formats and the command line ----------------------------------------------------------


def _run_cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


def test_cli_probe_then_identify(tmp_path):
    path = tmp_path / "p.npz"
    code, out, err = _run_cli(["probe", "--out", str(path), "--rows", "2048", "--emulate", "mi200"])
    assert code == 0, err
    data = np.load(path)
    assert data["a"].dtype == np.uint16 and data["a"].shape == (2048, 16) and data["c"].dtype == np.uint32
    code, out, err = _run_cli(["identify", str(path), "--format", "json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["named"] == "mi200" and doc["rows"] == doc["explained"] == 2048
    assert len(doc["consistent"]) == 1 and doc["consistent"][0]["family"] == "PAIRWISE"
    assert doc["next_probes"] == []
    code, out, _ = _run_cli(["identify", str(path)])
    assert code == 0 and "named unit: mi200" in out


def test_cli_fp16_probe(tmp_path):
    path = tmp_path / "p16.npz"
    assert (
        _run_cli(["probe", "--out", str(path), "--rows", "2048", "--accumulator", "fp16", "--emulate", "h100"])[0] == 0
    )
    assert np.load(path)["d"].dtype == np.uint16
    code, out, err = _run_cli(["identify", str(path), "--format", "json"])
    assert code == 0, err
    assert "h100/fp16" in json.loads(out)["named"].split(" = ")


def test_csv_rows_match_the_npz(probes, tmp_path):
    rows = _device_rows(probes["fp32"], models.unit("v100")).take(np.arange(0, PROBE_ROWS, 4))
    path = tmp_path / "rows.csv"
    with path.open("w") as f:
        f.write("a,b,c,d\n")
        for i in range(len(rows)):
            f.write(
                " ".join(f"{x:04x}" for x in rows.a[i])
                + ","
                + " ".join(f"{x:04x}" for x in rows.b[i])
                + f",0x{rows.c[i]:08x},{rows.d[i]:032b}\n"
            )
    loaded = ident.load_rows(path)
    for f in ("a", "b", "c", "d"):
        assert np.array_equal(getattr(loaded, f), getattr(rows, f)), f
    assert ident.identify(loaded, next_count=0).named == "v100"


@pytest.mark.parametrize(
    "content,needle",
    [
        (None, "no such file"),
        ("npz-missing-d", "no array d"),
        ("npz-bad-dtype", "uint16"),
        ("csv-no-columns", "CSV needs columns a, b, c, d"),
        ("csv-bad-word", "is not a hex or 32-bit binary word"),
        ("csv-ragged", "same number K"),
        ("dir-empty", "expected one file a_*.txt"),
        ("garbage.npz", "cannot read as .npz"),
        ("npz-empty", "no rows"),
    ],
)
def test_malformed_inputs_exit_2_with_one_line(tmp_path, content, needle):
    path = tmp_path / "missing.npz"
    if content == "npz-missing-d":
        path = tmp_path / "x.npz"
        np.savez(path, a=np.zeros((2, 16), np.uint16), b=np.zeros((2, 16), np.uint16), c=np.zeros(2, np.uint32))
    elif content == "npz-empty":
        path = tmp_path / "x.npz"
        np.savez(
            path,
            a=np.zeros((0, 16), np.uint16),
            b=np.zeros((0, 16), np.uint16),
            c=np.zeros(0, np.uint32),
            d=np.zeros(0, np.uint32),
        )
    elif content == "npz-bad-dtype":
        path = tmp_path / "x.npz"
        np.savez(
            path,
            a=np.zeros((2, 16), np.float32),
            b=np.zeros((2, 16), np.uint16),
            c=np.zeros(2, np.uint32),
            d=np.zeros(2, np.uint32),
        )
    elif content is not None and content.startswith("csv"):
        path = tmp_path / "x.csv"
        text = {
            "csv-no-columns": "a,b\n1,2\n",
            "csv-bad-word": "a,b,c,d\n3c00 zz,3c00 3c00,0x0,0x0\n",
            "csv-ragged": "a,b,c,d\n3c00 3c00,3c00,0x0,0x0\n",
        }[content]
        path.write_text(text)
    elif content == "dir-empty":
        path = tmp_path / "d"
        path.mkdir()
    elif content == "garbage.npz":
        path = tmp_path / "garbage.npz"
        path.write_bytes(b"not a zip file at all")
    code, out, err = _run_cli(["identify", str(path)])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err and needle in err, err


def test_bad_options_exit_2(tmp_path):
    for argv in (
        ["probe", "--out", str(tmp_path / "p.npz"), "--k", "0"],
        ["probe", "--out", str(tmp_path / "p.npz"), "--accumulator", "bf16"],
        ["probe", "--out", str(tmp_path / "p.npz"), "--emulate", "nosuchgpu"],
        ["identify", str(tmp_path), "--format", "xml"],
        ["identify", str(tmp_path), "--next", "-1"],
    ):
        code, _, err = _run_cli(argv)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (argv, err)


# --- the GPU probe script -----------------------------------------------------------------------


def _emulated_backend(unit):
    """A stand-in for the GPU: the tile GEMM D = A·B + C computed by the unit's emulation."""

    def backend(A, B, C):
        a = A[:, :, None, :].view(np.uint16)  # (T, 16, 1, K)
        b = np.ascontiguousarray(B.transpose(0, 2, 1))[:, None, :, :].view(np.uint16)  # (T, 1, 16, K)
        return np.asarray(emu.dot_add(a, b, C, unit))

    return backend


@pytest.mark.parametrize("name,acc", [("h100", "fp32"), ("mi300", "fp32"), ("a100", "fp16")])
def test_probe_gpu_cpu_path_with_a_stand_in_device(tmp_path, name, acc):
    probes_path = tmp_path / "p.npz"
    p = probe.probe_set(1000, 16, seed=3, accumulator=acc)  # not a multiple of the tile: padding
    probe.save(probes_path, p)
    out = tmp_path / "p.out.npz"
    u = models.unit(name, output=acc)
    summary = probe_gpu.run_file(str(probes_path), str(out), "emulation", backend=_emulated_backend(u))
    assert summary["rows"] == 1000 and summary["differing_rows"] == 0
    data = np.load(out)
    expect = np.asarray(emu.dot_add(p.a, p.b, p.c_values(), u)).view(data["d"].dtype)
    assert np.array_equal(data["d"], expect)
    result = ident.identify(ident.load_rows(out), next_count=0)
    assert (name if acc == "fp32" else f"{name}/fp16") in result.named_among  # 1000 rows: maybe not unique


def test_probe_gpu_invariance_check_catches_position_dependent_results(tmp_path):
    p = probe.probe_set(256, 16, seed=4)
    good = _emulated_backend(models.unit("h100"))

    def faulty(A, B, C):  # tile position 3 computed differently (as a split-K edge kernel might)
        D = good(A, B, C)
        D[:, 3, 3] = np.nextafter(D[:, 3, 3], np.float32(np.inf))
        return D

    _, differing = probe_gpu.measure(p.a, p.b, p.c, faulty)
    assert differing.size > 0


def test_probe_gpu_reports_missing_backends_in_one_line(tmp_path, capsys):
    path = tmp_path / "p.npz"
    probe.save(path, probe.probe_set(32, 16, seed=1))
    code = probe_gpu.main([str(path), "--backend", "nosuch"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--backend" in err
    assert probe_gpu.main([str(tmp_path / "absent.npz")]) == 2


def test_probe_gpu_imports_only_numpy_torch_triton():
    source = Path(probe_gpu.__file__).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    # the standard library (os for the atomic write of --out; io, stat, zipfile for the checked
    # reader when the script runs alone), numpy, torch, triton; fp16emu's own checked loader only
    # where it is installed (an ImportError falls back to the script's reader)
    outside = imported - set(sys.stdlib_module_names)
    assert outside <= {"numpy", "torch", "triton", "validation"}, outside
    assert "from validation.files import load_npz_file\n    except ImportError:" in source


# --- the study's measured lines (forward tests) -------------------------------------------------


def test_study_lines_identify_the_unit_of_each_gpu():
    from validation import study
    from validation.identify import study as identify_study

    folder = ref.require("fp16_study_raw_results")
    test = "conv2d_host_validation_f16_fwd_CHECK_KYXC_NHWC_NHWK5_f16"
    measured = [m for m in study.read_measured(folder) if m.test_name == test]
    result = identify_study.identify_forward(measured, [test])
    for gpu in ("mi100", "mi200"):
        units = {c.unit for c in result[(test, gpu)]}
        assert units == {gpu}, (gpu, [c.label() for c in result[(test, gpu)]])
        assert identify_study.StudyCandidate(gpu, "kernel") in result[(test, gpu)]


def test_study_lines_exclude_the_sep_2022_kblocks_of_bwd_weight1():
    """BWD_WEIGHT1 (gemm 64×64×3136): calculateKBlockNum with the KPack term gives KBlocks 4; over
    every order of its 4 atomic adds the exact-element count of r4 is 4094, the GPUs printed 4096
    (reference: reproduction_findings.md §5). KBlocks 8 reaches 4096 with some orders."""
    from validation import study
    from validation.identify import study as identify_study

    folder = ref.require("fp16_study_raw_results")
    test = "conv2d_host_validation_f16_bwd_CHECK_BWD_WEIGHT1"
    measured = [m for m in study.read_measured(folder) if m.test_name == test]
    result = identify_study.identify_kblocks(
        measured, [test], gpus=("mi200",), ranges=("r4",), validators=("cpu",), kblocks=(4, 8)
    )
    verdicts = {v.kblocks: v for v in result[(test, "mi200")]}
    assert verdicts[4].verdict == "excluded", verdicts[4].detail
    assert verdicts[4].detail == ("r4/cpu: n_exact 4096 measured, [4094, 4094] over every order",)
    assert verdicts[8].verdict == "consistent", verdicts[8].detail


def test_csv_fp16_outputs_and_output_mismatch(probes, tmp_path):
    rows = _device_rows(probes["fp16"], models.unit("h100", output="fp16")).take(np.arange(0, PROBE_ROWS, 2))
    path = tmp_path / "rows16.csv"
    c32 = rows.c.view(np.float16).astype(np.float32).view(np.uint32)  # c given as fp32 (exact)
    with path.open("w") as f:
        f.write("a,b,c,d\n")
        for i in range(len(rows)):
            f.write(
                " ".join(f"{x:04x}" for x in rows.a[i])
                + ","
                + " ".join(f"{x:04x}" for x in rows.b[i])
                + f",0x{c32[i]:08x},0x{rows.d[i]:04x}\n"
            )
    loaded = ident.load_rows(path)
    assert loaded.output_format == Format.FP16 and loaded.notes  # c rounded to fp16: noted
    assert np.array_equal(loaded.c, rows.c) and np.array_equal(loaded.d, rows.d)
    npz = tmp_path / "rows16.npz"
    np.savez(npz, a=rows.a, b=rows.b, c=rows.c, d=rows.d)
    code, _, err = _run_cli(["identify", str(npz), "--output", "fp32"])
    assert code == 2 and "fp16 patterns" in err and err.count("\n") == 1


def test_cli_identify_from_the_study_folder():
    folder = ref.require("fp16_study_raw_results")
    code, out, err = _run_cli(["identify", str(folder), "--test", "fwd_CHECK_KYXC_NHWC_NHWK5_f16", "--format", "json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["result"]["mi100"] and all(label.startswith("mi100 unit") for label in doc["result"]["mi100"])
    assert doc["result"]["mi200"] and all(label.startswith("mi200 unit") for label in doc["result"]["mi200"])
    code, out, err = _run_cli(["identify", str(folder)])
    assert code == 2 and "--test" in err and err.count("\n") == 1
    code, out, err = _run_cli(["identify", str(folder), "--test", "fwd_CHECK_KYXC_NHWC_NHWK5_f16", "--gpu", "mi300"])
    assert code == 2 and "--gpu" in err


def test_study_lines_pick_the_strided_groups_of_a_k_reduction_instruction():
    """ISSUE_71_1 (v_mfma_f32_16x16x16f16, two split-K chunks): the strided groups {b, b+4, b+8,
    b+12} reproduce the r4 lines; consecutive groups do not (reproduction_findings.md §5)."""
    from validation import study
    from validation.identify import study as identify_study

    folder = ref.require("fp16_study_raw_results")
    test = "conv2d_host_validation_f16_bwd_CHECK_ISSUE_71_1"
    measured = [m for m in study.read_measured(folder) if m.test_name == test]
    result = identify_study.identify_forward(measured, [test], ranges=("r4",))
    for gpu in ("mi100", "mi200"):
        orders = {c.order for c in result[(test, gpu)]}
        assert orders == {"kernel"}, (gpu, [c.label() for c in result[(test, gpu)]])
    with pytest.raises(ValueError, match="KBlocks"):
        identify_study.identify_forward(measured, ["conv2d_host_validation_f16_bwd_CHECK_BWD_WEIGHT1"])


def test_identify_exits_1_when_no_point_reproduces_every_row(tmp_path):
    path = tmp_path / "p.npz"
    assert _run_cli(["probe", "--out", str(path), "--rows", "512", "--emulate", "mi200"])[0] == 0
    data = dict(np.load(path))
    data["d"] = data["d"].copy()
    data["d"][::7] ^= np.uint32(1 << 9)  # rows no arithmetic of the space gives
    broken = tmp_path / "broken.npz"
    np.savez(broken, **data)
    code, out, err = _run_cli(["identify", str(broken), "--format", "json"])
    assert code == 1, err
    assert json.loads(out)["consistent"] == []


def test_probe_and_next_out_write_exactly_the_named_regular_file(tmp_path):
    """Issue 31: `probe --out /dev/null` made /dev/null.npz, `--out probes` wrote probes.npz."""
    code, _, err = _run_cli(["probe", "--out", "/dev/null", "--rows", "64"])
    assert code == 2 and "--out: '/dev/null' is not a regular file" in err
    assert not Path("/dev/null.npz").exists()
    plain = tmp_path / "probes"
    code, out, err = _run_cli(["probe", "--out", str(plain), "--rows", "64", "--emulate", "h100"])
    assert code == 0, err
    assert plain.is_file() and not (tmp_path / "probes.npz").exists() and str(plain) in out
    code, _, err = _run_cli(["identify", str(plain), "--next-out", str(tmp_path / "no" / "such")])
    assert code == 2 and "--next-out: the folder" in err
