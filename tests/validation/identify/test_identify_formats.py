"""Identification in the operand formats bf16, tf32, fp8 (OCP) and fp8 (fnuz): probe sets of each
format, a stand-in device (a named unit's own emulation, whose parameters come from MMA-Sim and
the vendors' ISA, not from the search), the command line, the GPU script's CPU path, and the
measured bf16 rows of NVIDIA GPUs.

Small on purpose: 1,536 rows per format, one unit per family, the kernels' specialisations the
format tests already compile.
"""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
import reference_data as ref

import emu
import models
from models import space
from validation import cli
from validation.identify import probe_gpu
from validation.identify import probes as probe
from validation.identify import search as ident

ROWS = 1536
# (format, unit): one pair per format family; the answer is the unit's point in that format's space
CASES = [("bf16", "mi200"), ("tf32", "mi300"), ("e4m3", "h100"), ("e4m3fnuz", "mi300")]


def _run_cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


def _named(name, fmt):
    return space.Point(space.canonical(models.unit(name, input=fmt).params))


@pytest.fixture(scope="module")
def stand_in_rows():
    out = {}
    for fmt, name in CASES:
        p = probe.probe_set(ROWS, probe.INSTRUCTION_K[fmt], seed=5, input=fmt)
        d = emu.dot_add(p.a, p.b, p.c_values(), models.unit(name, input=fmt)).view(np.uint32)
        out[fmt] = ident.Rows(p.a, p.b, p.c, d, input_format=fmt)
    return out


def test_probe_sets_hold_the_formats_patterns():
    expect = {"bf16": np.uint16, "tf32": np.uint32, "e4m3": np.uint8, "e4m3fnuz": np.uint8}
    for fmt, _ in CASES:
        p = probe.probe_set(256, probe.INSTRUCTION_K[fmt], seed=1, input=fmt)
        assert p.a.dtype == expect[fmt] and p.a.shape == (256, probe.INSTRUCTION_K[fmt]) and p.input == fmt
        assert "special" in set(p.category) and "subnormal" in set(p.category)
        if fmt == "tf32":
            assert not np.any(p.a & np.uint32(0x1FFF))  # exact tf32 values: the 13 low bits clear
    # fnuz has no −0 and one NaN (0x80); the OCP e4m3 NaN is 0x7f/0xff: both appear in 'special'
    nan = probe.probe_set(512, 32, seed=2, input="e4m3fnuz", categories=["special"]).a
    assert np.any(nan == 0x80)
    ocp = probe.probe_set(512, 32, seed=2, input="e4m3", categories=["special"]).a
    assert np.any((ocp & 0x7F) == 0x7F) and np.any((ocp & 0x7F) == 0x7E)  # NaN and 448, the largest


@pytest.mark.parametrize("fmt,name", CASES, ids=[f"{f}-{n}" for f, n in CASES])
def test_stand_in_device_is_identified(stand_in_rows, fmt, name):
    rows = stand_in_rows[fmt]
    result = ident.identify(rows, next_count=0)
    assert result.input_format == fmt and result.explained == len(rows)
    assert _named(name, fmt) in result.consistent
    assert name in result.named_among
    # every point of the answer multiplies the format, and the answer is small
    assert all(p.unit.input_format == models.unit(name, input=fmt).input_format for p in result.consistent)
    assert len(result.consistent) <= 2, [space.describe(p) for p in result.consistent]
    assert f"{fmt} operands" in result.format_text()


def test_corrupted_d_is_not_identified(stand_in_rows):
    rows = stand_in_rows["e4m3"]
    d = rows.d.copy()
    finite = np.flatnonzero(np.isfinite(d.view(np.float32)))[::7]  # a NaN stays a NaN when a bit flips
    d[finite] ^= np.uint32(1 << 10)  # a bit the E8M13 accumulator keeps
    result = ident.identify(ident.Rows(rows.a, rows.b, rows.c, d, input_format="e4m3"), next_count=0)
    assert result.consistent == [] and result.named is None
    assert result.nearest[0].point == _named("h100", "e4m3")
    assert result.nearest[0].failed == finite.size


def test_cli_probe_identify_round_trip_and_next_out(tmp_path):
    path = tmp_path / "b.npz"
    code, out, err = _run_cli(["probe", "--out", str(path), "--input", "bf16", "--rows", "512", "--emulate", "h200"])
    assert code == 0, err
    assert "bf16 operands" in out and "K = 16" in out
    data = np.load(path)
    assert str(data["input"]) == "bf16" and data["a"].dtype == np.uint16 and data["a"].shape == (512, 16)
    nxt = tmp_path / "next.npz"
    code, out, err = _run_cli(["identify", str(path), "--format", "json", "--next", "2", "--next-out", str(nxt)])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["input_format"] == "bf16" and "h100" in doc["named_among"]
    assert all(p["input"] == "bf16" for p in doc["consistent"])
    if doc["next_probes"]:
        again = probe.load_inputs(nxt)
        assert again.input == "bf16" and again.a.dtype == np.uint16
    # the same bf16 rows read as fp16 would be other numbers: refused, naming both (issue 38.5)
    code, out, err = _run_cli(["identify", str(path), "--input", "fp16"])
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "--input: fp16, but" in err and "records bf16 operands" in err, err
    assert _run_cli(["identify", str(path), "--input", "bf16", "--format", "json"])[0] == 0  # what it records


def test_cli_default_k_is_the_instruction_k(tmp_path):
    for fmt, k in (("tf32", 8), ("e5m2", 32)):
        path = tmp_path / f"{fmt}.npz"
        assert _run_cli(["probe", "--out", str(path), "--input", fmt, "--rows", "64"])[0] == 0
        data = np.load(path)
        assert data["a"].shape == (64, k) and str(data["input"]) == fmt


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["probe", "--input", "fp7"], "--input: 'fp7' is not one of fp16, bf16, tf32"),
        (["probe", "--input", "e4m3", "--emulate", "mi300"], "mi300 has no e4m3 instruction; its input formats"),
        (["probe", "--input", "bf16", "--emulate", "v100"], "its input formats: fp16"),
        (["probe", "--input", "tf32", "--accumulator", "fp16"], "--accumulator: no unit accumulates tf32"),
        (["identify", "RESULTS", "--input", "int8"], "--input: 'int8' is not one of"),
    ],
)
def test_bad_inputs_exit_2_naming_the_field(tmp_path, argv, needle):
    argv = [str(tmp_path / "r.npz") if a == "RESULTS" else a for a in argv]
    if argv[0] == "probe":
        argv += ["--out", str(tmp_path / "p.npz")]
    code, out, err = _run_cli(argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err and needle in err, err


def test_a_file_whose_patterns_do_not_fit_its_format_exit_2(tmp_path):
    path = tmp_path / "x.npz"
    a = np.zeros((4, 32), np.uint16)
    np.savez(path, a=a, b=a, c=np.zeros(4, np.uint32), d=np.zeros(4, np.uint32), input=np.array("e4m3"))
    code, _, err = _run_cli(["identify", str(path)])
    assert code == 2 and "uint8 array of e4m3 bit patterns" in err and err.count("\n") == 1


def test_probe_gpu_cpu_path_per_format(tmp_path, stand_in_rows):
    """The GPU script with the unit's emulation as the device: the format travels in the file,
    the tiles hold its patterns (fp8: 64-row tiles as the Triton path packs them)."""
    for fmt, name in CASES:
        rows = stand_in_rows[fmt].take(np.arange(300))
        p = probe.ProbeSet(rows.a, rows.b, rows.c, np.full(len(rows), "x"), fmt)
        probe.save(tmp_path / f"{fmt}.npz", p)
        u = models.unit(name, input=fmt)

        def backend(A, B, C, u=u):
            b = np.ascontiguousarray(B.transpose(0, 2, 1))[:, None, :, :]
            return np.asarray(emu.dot_add(A[:, :, None, :], b, C, u))

        tile = probe_gpu.FP8_TILE if fmt in probe_gpu.FP8 else probe_gpu.TILE
        d, differing = probe_gpu.measure(p.a, p.b, p.c, backend, tile=tile, input=fmt)
        assert differing.size == 0 and np.array_equal(d, rows.d), fmt
        out = tmp_path / f"{fmt}.out.npz"
        probe_gpu.run_file(str(tmp_path / f"{fmt}.npz"), str(out), "emulation", backend=backend)
        assert str(np.load(out)["input"]) == fmt
        assert ident.load_rows(out).input_format == fmt


def test_probe_gpu_refuses_unknown_formats_in_one_line(tmp_path, capsys):
    path = tmp_path / "p.npz"
    p = probe.probe_set(16, 32, seed=1, input="e4m3")
    np.savez(path, a=p.a, b=p.b, c=p.c, input=np.array("e3m4"))
    assert probe_gpu.main([str(path), "--backend", "torch"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "input: 'e3m4' is not one of" in err


def test_probe_gpu_support_table_without_a_gpu():
    """check_support against stand-ins for torch and the device (no GPU here)."""

    class Props:
        def __init__(self, name, major, minor, arch=""):
            self.name, self.major, self.minor, self.gcnArchName = name, major, minor, arch

    class FakeTorch:
        __version__ = "stand-in"
        float16 = bfloat16 = float32 = float8_e4m3fn = float8_e5m2 = float8_e4m3fnuz = float8_e5m2fnuz = object()

        def __init__(self, props, hip=None):
            self._props = props
            self.version = type("V", (), {"hip": hip})
            self.cuda = type("C", (), {"get_device_properties": staticmethod(lambda _d: props)})

        @staticmethod
        def device(d):
            return d

    a100 = FakeTorch(Props("A100", 8, 0))
    probe_gpu.check_support(a100, "bf16")
    with pytest.raises(probe_gpu.ProbeError, match="e4m3 needs an NVIDIA GPU of sm_89"):
        probe_gpu.check_support(a100, "e4m3")
    with pytest.raises(probe_gpu.ProbeError, match="e4m3fnuz is AMD MI300's fp8"):
        probe_gpu.check_support(FakeTorch(Props("H100", 9, 0)), "e4m3fnuz")
    mi300 = FakeTorch(Props("MI300X", 9, 4, "gfx942:sramecc+:xnack-"), hip="6.2")
    probe_gpu.check_support(mi300, "e4m3fnuz")
    with pytest.raises(probe_gpu.ProbeError, match="e4m3 has no matrix instruction on MI300X"):
        probe_gpu.check_support(mi300, "e4m3")
    old = FakeTorch(Props("A100", 8, 0))
    old.__class__ = type("OldTorch", (), {"__version__": "1.x", "float16": object()})
    with pytest.raises(probe_gpu.ProbeError, match="no torch.float8_e5m2"):
        probe_gpu.check_support(old, "e5m2")


@pytest.mark.parametrize("gpu", ["H100", "A100"])
def test_measured_bf16_rows_fit_the_named_unit(gpu):
    """The MATLAB-tensor-core bf16 measurements (random rows): the folder names its format, and
    the named unit's bf16 point reproduces every measured row."""
    folder = ref.require("nvidia_tensor_core_hw", gpu, "bf16")
    rows = ident.load_rows(folder)
    assert rows.input_format == "bf16"
    hw = ref.load_nvidia_hw(gpu, "bf16")
    assert np.array_equal(rows.a, hw.a) and np.array_equal(rows.d, hw.d_fp32)
    result = ident.identify(rows, next_count=0)
    assert _named(ref.NVIDIA_HW_UNIT[gpu], "bf16") in result.consistent
