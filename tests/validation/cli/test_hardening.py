"""Issue 13: every bad input, fault and resource limit ends in a clear answer (exit 2 and one line,
or a warning and a recomputation), checked before anything is computed. Tiny configs only; the
study tests copy a few of the study's raw files (skipped without ../shared/reference)."""

import dataclasses
import importlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import reference_data as ref  # noqa: E402  (registered by conftest.py)

import emu.conv as conv_mod
import validation.study as study
from emu.conv import ConvProblem, sub_gemms
from emu.gemm import GemmOrder, strided_k_order
from models.units import Family, unit
from validation.cli import main
from validation.configs import ConfigError, check_work, estimate_work, parse_config
from validation.configs.limits import physical_memory_gib
from validation.run import plan, run
from validation.study import cache as cache_mod
from validation.study.cache import CACHE_VERSION, Cache, entry_checksum
from validation.study.report import print_summary

ROOT = Path(__file__).resolve().parents[3]
reproduce_mod = importlib.import_module("validation.study.reproduction")

SIZES = "-batchsize=1 -in_channels=4 -out_channels=4 -in_h=6 -in_w=6 -fil_h=3 -fil_w=3"
F16 = f"--operation conv2d -t f16 {SIZES}"


def _cli(capsys, *argv):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the unknown -t values warn before they are refused
        code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(code, err, *words):
    assert code == 2, err
    assert re.match(r"fp16emu( [a-z]+)?: error: ", err) and err.count("\n") == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)


# --- 1. data types other than fp16 and bf16 are refused, in run, --check and explain ----------------


NOT_F16 = [
    (f"--operation conv2d {SIZES}", "-t: not given"),  # miopen-gen's default is f32
    (f"--operation conv2d -t fp8 {SIZES}", "-t: 'fp8' is not modelled (fp8 convolutions came with later"),
    (f"--operation conv2d -t i8 {SIZES}", "-t: 'i8'"),
    (f"--operation conv2d -t fp32 {SIZES}", "-t: 'fp32 (f32)'"),
    (f"--operation conv2d -t q7 {SIZES}", "-t: 'q7'"),
    ("MIOpenDriver conv -n 1 -c 4 -k 4 -H 6 -W 6 -y 3 -x 3 -F 1", "convfp16"),
    ("MIOpenDriver convint8 -n 1 -c 4 -k 4 -H 6 -W 6 -y 3 -x 3 -F 1", "convfp16"),
]


@pytest.mark.parametrize("config, named", NOT_F16)
@pytest.mark.parametrize("how", [("run", "--check"), ("run", "--no-progress"), ("explain", "--no-progress")])
def test_a_config_that_is_not_fp16_is_refused(capsys, config, named, how):
    code, out, err = _cli(capsys, how[0], config, *how[1:])
    _one_line_error(code, err, named)
    assert "fp16 and bf16 kernels" in err and not out
    assert "-t bf16" in err or "convbfp16" in err


def test_the_fp16_config_itself_passes_the_check(capsys):
    code, out, err = _cli(capsys, "run", F16, "--check")
    assert code == 0 and "G1 M4" in out, err
    with pytest.raises(ConfigError, match="-t"):
        plan(F16.replace("-t f16", "-t i8"))


def test_a_bf16_config_passes_the_check_with_bf16_units(capsys):
    """-t bf16 and MIOpenDriver convbfp16 are accepted: every model multiplies bf16 (the unit's
    parameters for it), the check names the units it would run."""
    code, out, err = _cli(
        capsys,
        "run",
        F16.replace("-t f16", "-t bf16"),
        "--check",
        "--format",
        "json",
        "--hw",
        "mi100",
        "--kernel",
        "xdlops",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["format"] == "bf16"
    assert {g["group_size"] for g in doc["models"][0]["gemms"]} == {2}  # MI100's bf16 mfma: groups of 2
    config, kmodel, vmodel = plan("MIOpenDriver convbfp16 -n 1 -c 4 -k 4 -H 6 -W 6 -y 3 -x 3 -F 1")
    assert config.dtype == "bf16" and kmodel.input == vmodel.input == "bf16"
    assert kmodel.unit.params.input_format == vmodel.unit.params.input_format == 1  # InputFormat.BF16


# --- 2. work estimated before anything runs, and not growing with a stride ------------------------


PROBLEMS = [
    ConvProblem("fwd", 2, 4, 7, 5, 6, 3, 2, groups=2, pad_h=(1, 0), stride=(2, 3), dilation=(1, 2)),
    ConvProblem("bwd_weight", 1, 6, 8, 8, 3, 3, 3, groups=3, pad_w=(2, 2), stride=(3, 1)),
    ConvProblem("bwd_data", 2, 4, 9, 9, 4, 3, 3, stride=(2, 2)),
    ConvProblem("bwd_data", 1, 2, 11, 7, 2, 5, 3, pad_h=(2, 1), stride=(3, 2), dilation=(2, 1)),
    ConvProblem("bwd_data", 1, 2, 8, 8, 2, 3, 3, stride=(1000, 7)),
]


@pytest.mark.parametrize("problem", PROBLEMS, ids=range(len(PROBLEMS)))
def test_the_work_estimate_counts_what_the_gemms_do(problem):
    subs = sub_gemms(problem)
    work = estimate_work(problem)
    assert work.macs == sum(s.g * s.m * s.n * s.k for s in subs)
    assert work.gemms == len(subs) * problem.groups


def test_a_stride_that_selects_nothing_adds_no_work(monkeypatch):
    """bwd_data runs yTilda·xTilda residues, but those at or past the filter size run nothing:
    listing them must visit O(Y·X) residues, not yTilda·xTilda (10^16 for a stride of 10^8)."""
    small = ConvProblem("bwd_data", 1, 4, 8, 8, 4, 3, 3, stride=(16, 16))
    wide = dataclasses.replace(small, stride=(1000, 1000))
    calls = []
    original = conv_mod._TildaAxis.dot_slice
    monkeypatch.setattr(conv_mod._TildaAxis, "dot_slice", lambda self, i, f: calls.append(i) or original(self, i, f))
    subs = sub_gemms(wide)
    assert len(calls) <= 2 * 3 * 3
    assert [(s.m, s.n, s.k, s.i_ytilda, s.i_xtilda) for s in subs] == [
        (s.m, s.n, s.k, s.i_ytilda, s.i_xtilda) for s in sub_gemms(small)
    ]
    assert (
        estimate_work(wide) == estimate_work(small) == estimate_work(dataclasses.replace(small, stride=(10**8, 10**8)))
    )


def test_a_huge_stride_runs_as_fast_as_a_small_one_and_gives_the_same_bits():
    base = "--operation conv2d_bwd_data -t f16 -batchsize=1 -in_channels=4 -out_channels=4 -in_h=8 -in_w=8 "
    base += "-fil_h=3 -fil_w=3 -rand 3 --rand_type float"
    a = run(base + " --conv_stride_h=16 --conv_stride_w=16", progress=False)
    t0 = time.perf_counter()
    b = run(base + " --conv_stride_h=1000 --conv_stride_w=1000", progress=False)
    assert time.perf_counter() - t0 < 30
    assert np.array_equal(a.kernel_output.view(np.uint16), b.kernel_output.view(np.uint16))
    assert np.array_equal(a.validation_output.view(np.uint32), b.validation_output.view(np.uint32))


@pytest.mark.parametrize(
    "config",
    [
        "--operation conv2d_bwd_data -t f16 -batchsize=1 -in_channels=4 -out_channels=4 -in_h=8 -in_w=8 "
        "-fil_h=3 -fil_w=3 --conv_stride_w=100000000",
        "MIOpenDriver convfp16 -n 1 -c 4 -k 4 -H 8 -W 8 -y 3 -x 3 -u 100000000 -v 100000000 -F 2",
    ],
)
def test_check_with_a_huge_stride_answers_at_once(config):
    """In a child process with a time limit: the stride of 10^8 made even --check run for minutes."""
    argv = [sys.executable, "-m", "validation.cli", "run", config, "--check"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"--check still running after 60 s: {config}")
    assert done.returncode == 0 and "bwd_data" in done.stdout, done.stderr


@pytest.mark.parametrize("how", ["--check", "--no-progress"])
def test_huge_sizes_are_refused_with_the_estimate(capsys, how):
    config = "-t f16 -batchsize=1000000 -in_channels=1000000 -out_channels=4 -in_h=4 -in_w=4 -fil_h=3 -fil_w=3"
    code, out, err = _cli(capsys, "run", config, how)
    _one_line_error(code, err, "1.19e+05 GiB", "FP16EMU_MAX_MEMORY_GIB")
    physical = physical_memory_gib()
    if physical is not None and physical < 64:
        assert f"limit of {physical:.3g} GiB (this machine's memory)" in err
    else:
        assert "limit of 64 GiB;" in err


def test_the_memory_limit_is_set_by_its_variable(monkeypatch, capsys):
    monkeypatch.setenv("FP16EMU_MAX_MEMORY_GIB", "1e-6")  # 1 KiB: the tiny config needs more
    _one_line_error(*_cli(capsys, "run", F16, "--check")[::2], "over the limit of 1e-06 GiB;", "FP16EMU_MAX_MEMORY_GIB")
    monkeypatch.setenv("FP16EMU_MAX_MEMORY_GIB", "1")
    assert _cli(capsys, "run", F16, "--check")[0] == 0


def test_the_limits_are_raised_and_lowered_by_environment_variables(monkeypatch, capsys):
    p = parse_config(F16).problem
    assert check_work(p).macs == 4 * 4 * 9 * 16
    monkeypatch.setenv("FP16EMU_MAX_MACS", "100")
    code, _, err = _cli(capsys, "run", F16, "--check")
    _one_line_error(code, err, "2.3 k multiply-adds", "limit of 100", "FP16EMU_MAX_MACS")
    monkeypatch.setenv("FP16EMU_MAX_MACS", "1e4")
    assert _cli(capsys, "run", F16, "--check")[0] == 0
    monkeypatch.setenv("FP16EMU_MAX_GEMMS", "0.5")
    _one_line_error(*_cli(capsys, "run", F16, "--check")[::2], "FP16EMU_MAX_GEMMS")
    monkeypatch.setenv("FP16EMU_MAX_GEMMS", "lots")
    _one_line_error(*_cli(capsys, "run", F16, "--check")[::2], "FP16EMU_MAX_GEMMS", "not a number")


def test_a_huge_pad_k_is_refused_where_the_order_is_made():
    with pytest.raises(ValueError, match="pad_k"):
        GemmOrder(pad_k=10**9)


# --- 3. the results cache: schema, checksum, atomic writes ------------------------------------------


KEY = "ab" + "0" * 62
VALUE = {"mode": "exact", "fields": {"rms": "0.5", "verdict": "PASS"}, "line": "RMS = 0.5 PASS", "recipe": "r"}


def _entry_path(tmp_path):
    return tmp_path / KEY[:2] / f"{KEY}.json"


def test_a_cache_entry_round_trips_with_its_checksum(tmp_path):
    c = Cache(tmp_path)
    c.put(KEY, VALUE)
    doc = json.loads(_entry_path(tmp_path).read_text())
    assert doc == {"schema": CACHE_VERSION, "key": KEY, "sha256": entry_checksum(VALUE), "value": VALUE}
    assert c.get(KEY) == VALUE and c.rejected == 0
    assert [p.name for p in _entry_path(tmp_path).parent.iterdir()] == [f"{KEY}.json"]  # no temporary left


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero", "link to a good entry", "too large"])
def test_a_cache_entry_that_is_not_a_small_regular_file_is_not_read(tmp_path, capsys, kind):
    """Issue 31: an entry that was a FIFO hung reproduce; one linked to /dev/zero was read without a
    size limit (24 GB resident, killed by the kernel). Links are not followed, FIFOs not waited
    on, sizes capped; each is recomputed with one warning."""
    c = Cache(tmp_path)
    path = _entry_path(tmp_path)
    path.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "link to a good entry":
        Cache(tmp_path / "other").put(KEY, VALUE)
        path.symlink_to(_entry_path(tmp_path / "other"))
    else:
        with open(path, "wb") as fh:
            fh.truncate(cache_mod.MAX_ENTRY_BYTES + 1)  # sparse: no disk used
    t0 = time.monotonic()
    assert c.get(KEY) is None
    assert time.monotonic() - t0 < 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and "recomputing" in err, err


def _tampered(doc):
    doc["value"]["fields"]["verdict"] = "FAIL"
    return doc


BAD_CONTENTS = {
    "empty object": lambda doc: {},
    "a list": lambda doc: [1, 2],
    "fields null": lambda doc: {**doc, "value": {**doc["value"], "fields": None}},
    "fields null, checksum redone": lambda doc: {
        **doc,
        "value": {**doc["value"], "fields": None},
        "sha256": entry_checksum({**doc["value"], "fields": None}),
    },
    "a number changed": _tampered,
    "another key": lambda doc: {**doc, "key": "cd" + "0" * 62},
    "old schema": lambda doc: {**doc, "schema": 3},
    "a bare value (the old format)": lambda doc: doc["value"],
    "a string": lambda doc: "x",
}


@pytest.mark.parametrize("name", list(BAD_CONTENTS))
def test_a_bad_cache_entry_is_recomputed_with_one_warning(tmp_path, capsys, name):
    c = Cache(tmp_path)
    c.put(KEY, VALUE)
    path = _entry_path(tmp_path)
    path.write_text(json.dumps(BAD_CONTENTS[name](json.loads(path.read_text()))))
    assert c.get(KEY) is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and "recomputing" in err, err
    c.put(KEY, VALUE)  # the recomputed line replaces it
    assert c.get(KEY) == VALUE


@pytest.mark.parametrize("raw", [b"", b"{", b"\xff\xfe", b"[" * 100000])
def test_undecodable_cache_bytes_are_recomputed(tmp_path, capsys, raw):
    c = Cache(tmp_path)
    path = _entry_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(raw)
    assert c.get(KEY) is None
    assert capsys.readouterr().err.count("\n") == 1


def test_a_directory_at_the_cache_path(tmp_path, capsys):
    c = Cache(tmp_path)
    path = _entry_path(tmp_path)
    path.mkdir(parents=True)
    assert c.get(KEY) is None and "cannot be read" in capsys.readouterr().err
    c.put(KEY, VALUE)  # an empty folder is replaced
    assert c.get(KEY) == VALUE
    path.unlink()
    (path / "inside").mkdir(parents=True)
    c.put(KEY, VALUE)  # a folder with files: not cached, one warning, no crash
    err = capsys.readouterr().err
    assert "cannot be written" in err and err.count("\n") == 1
    assert path.is_dir()


def test_a_write_killed_midway_leaves_the_old_entry_whole(tmp_path, monkeypatch, capsys):
    c = Cache(tmp_path)
    c.put(KEY, VALUE)

    def dies(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache_mod.json, "dump", dies)
    c.put(KEY, {**VALUE, "line": "new"})
    monkeypatch.undo()
    assert "No space left" in capsys.readouterr().err
    assert c.get(KEY) == VALUE
    assert [p.name for p in _entry_path(tmp_path).parent.iterdir()] == [f"{KEY}.json"]


@pytest.fixture(scope="module")
def raw_dir():
    return ref.require_study_raw_results()


def _selection(**kw):
    from validation.study.selection import smallest_tests

    base = dict(
        run_sets=("fair_1",),
        gpus=("mi100",),
        kernels=("xdlops",),
        validators=("cpu",),
        ranges=("r1",),
        tests=tuple(smallest_tests(1)),
        diagnose=False,
    )
    base.update(kw)
    return study.Selection(**base)


def _copy_files(raw_dir, dst, names):
    folder = dst / "verify_results_fair_1_MI100"
    folder.mkdir(parents=True)
    for n in names:
        shutil.copy(raw_dir / "verify_results_fair_1_MI100" / n, folder / n)
    return folder


def test_a_tampered_entry_is_planned_again(raw_dir, tmp_path, capsys):
    sel = _selection()
    lines = sel.select(study.read_measured(raw_dir))
    cache = Cache(tmp_path)
    jobs, keys, cached = reproduce_mod.plan_jobs(lines, sel, cache)
    ((key, mode),) = keys[0]
    assert jobs and not cached and mode == "exact"
    cache.put(key, VALUE)
    jobs, _, cached = reproduce_mod.plan_jobs(lines, sel, cache)
    assert not jobs and cached == {key: VALUE}
    path = tmp_path / key[:2] / f"{key}.json"
    path.write_text(json.dumps(_tampered(json.loads(path.read_text()))))
    jobs, _, cached = reproduce_mod.plan_jobs(lines, sel, cache)
    assert jobs and not cached and str(path) in capsys.readouterr().err


# --- 4. missing, empty and undecodable measured files --------------------------------------------


def _study(capsys, measured, out, *extra):
    return _cli(capsys, "study", "reproduce", "--measured", str(measured), "--out", str(out), "--no-progress", *extra)


@pytest.mark.parametrize("fault", ["missing", "empty"])
def test_a_missing_or_empty_measured_file_is_an_error(raw_dir, tmp_path, capsys, fault):
    folder = _copy_files(
        raw_dir, tmp_path / "raw", ["verify_f16_xdlops_pv_rand1.txt", "verify_f16_xdlops_pv_rand4.txt"]
    )
    bad = folder / "verify_f16_xdlops_pv_rand4.txt"
    if fault == "missing":
        bad.unlink()
    else:
        bad.write_text("\n\n")
    sel = ("--gpu", "mi100", "--kernel", "xdlops", "--validator", "cpu", "--range", "r1,r4", "--smallest", "1")
    code, out, err = _study(capsys, tmp_path / "raw", tmp_path / "out", *sel)
    _one_line_error(code, err, str(bad), fault, "--allow-missing")
    assert not (tmp_path / "out" / "report.md").exists()


def test_allow_missing_flags_the_gap_everywhere(raw_dir, tmp_path, capsys):
    _copy_files(raw_dir, tmp_path / "raw", ["verify_f16_xdlops_pv_rand1.txt"])
    sel = _selection(ranges=("r1", "r4"))
    lines = sel.select(study.read_measured(tmp_path / "raw"))
    (m,) = lines
    out = tmp_path / "out"
    cache = Cache(out / ".cache")
    _, keys, _ = reproduce_mod.plan_jobs(lines, sel, cache)
    ((key, _),) = keys[0]
    cache.put(key, {"mode": "exact", "fields": dict(m.line.fields()), "line": "measured", "recipe": "test"})
    report = study.reproduce(sel, tmp_path / "raw", out=out, allow_missing=True)
    missing = tmp_path / "raw" / "verify_results_fair_1_MI100" / "verify_f16_xdlops_pv_rand4.txt"
    assert report.emulated == 0 and len(report.lines) == 1
    assert report.missing == (f"{missing} (missing)",)
    assert str(missing) in capsys.readouterr().err
    summary = io.StringIO()
    print_summary(report, summary)
    assert "INCOMPLETE: 1 selected measured files" in summary.getvalue()
    assert str(missing) in (out / "report.md").read_text()


def test_undecodable_bytes_in_a_measured_file_name_the_file_and_line(tmp_path, capsys):
    folder = tmp_path / "raw" / "verify_results_fair_1_MI100"
    folder.mkdir(parents=True)
    bad = folder / "verify_f16_xdlops_pv_rand1.txt"
    bad.write_bytes(b"\n\nRMS = \xff\xfe 0\n")
    with pytest.raises(ValueError, match=rf"{bad}:3: not UTF-8 text \(byte 0xff at column 7\)"):
        study.read_measured(tmp_path / "raw")
    code, _, err = _study(capsys, tmp_path / "raw", tmp_path / "out")
    _one_line_error(code, err, f"{bad}:3")


# --- 5. --out checked before any compute -------------------------------------------------------------


def test_out_that_is_a_file_or_under_a_file(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    # --measured does not exist: the --out check comes first, before anything is read or computed
    code, _, err = _study(capsys, tmp_path / "nowhere", f)
    _one_line_error(code, err, "--out", "is a file")
    code, _, err = _study(capsys, tmp_path / "nowhere", f / "sub" / "dir")
    _one_line_error(code, err, "--out", "lies under", str(f))


def test_a_cache_folder_that_is_a_file_is_refused_first(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / ".cache").write_text("x")
    code, _, err = _study(capsys, tmp_path / "nowhere", out)
    _one_line_error(code, err, "cache folder", ".cache", "is a file")


def test_a_read_only_out_is_refused_first(tmp_path, capsys, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    if os.geteuid() == 0:  # root writes anywhere: stand in for the refusal the kernel would give

        def refused(*a, **k):
            raise PermissionError(13, "Permission denied")

        monkeypatch.setattr(reproduce_mod.tempfile, "mkstemp", refused)
    try:
        code, _, err = _study(capsys, tmp_path / "nowhere", ro)
    finally:
        ro.chmod(0o755)
    _one_line_error(code, err, "--out", "not writable", "Permission denied")


# --- 6. a unit or order no hardware can be is refused where it is made ---------------------------------


@pytest.mark.parametrize(
    "field, value",
    [
        ("output_rounding", 9),
        ("alignment_rounding", -1),
        ("output_format", 7),
        ("group_size", 10**9),
        ("group_size", 0),
        ("fraction_bits", -1),
        ("fraction_bits", 49),
        ("sum_fraction_bits", 1000),
        ("zero_exponent", 10**6),
        ("name", 5),
        ("name", ""),
        ("flush_inputs", 2),
        ("group_size", 2.0),
    ],
)
def test_a_unit_variant_out_of_range_is_refused(field, value):
    u = unit("mi200")
    with pytest.raises(ValueError, match=field):
        dataclasses.replace(u, **{field: value})
    assert dataclasses.replace(u, **{field: getattr(u, field)}) == u


def test_a_pairwise_unit_needs_a_power_of_two():
    u = next(unit(n) for n in ("mi100", "mi200", "mi300", "v100", "a100") if unit(n).family == Family.PAIRWISE)
    with pytest.raises(ValueError, match="power of two"):
        dataclasses.replace(u, group_size=6)


@pytest.mark.parametrize("k_order", [(0, 0, 1), (0, -1), (1, 2), (0, 1, 7.5)])
def test_a_k_order_that_is_not_a_permutation_is_refused(k_order):
    with pytest.raises(ValueError, match="k_order"):
        GemmOrder(k_order=k_order)
    assert GemmOrder(k_order=(2, 0, 1)).sequence(3).tolist() == [2, 0, 1]


@pytest.mark.parametrize("args", [(16, 0, 4), (16, -16, 4), (-1, 16, 4), (16, 16, 0)])
def test_strided_k_order_refuses_a_bad_tile(args):
    with pytest.raises(ValueError):
        strided_k_order(*args)


# --- 8. --seed as the config's -rand; one config --------------------------------------------------------


@pytest.mark.parametrize("seed", [str(2**32 + 1), str(2**31), "-1"])
@pytest.mark.parametrize("how", ["--check", "--no-progress"])
def test_a_seed_the_config_would_refuse_is_refused(capsys, seed, how):
    code, _, err = _cli(capsys, "run", F16, "--seed", seed, how)
    _one_line_error(code, err, "--seed", "0..2147483647")
    if not seed.startswith("-"):  # the config's own -rand: the same bound
        _one_line_error(*_cli(capsys, "run", F16 + f" -rand {seed}", "--check")[::2], "rand", str(2**31 - 1))


def test_the_largest_seed_is_accepted(capsys):
    assert _cli(capsys, "run", F16, "--seed", str(2**31 - 1), "--check")[0] == 0
    with pytest.raises(ValueError, match="^rand_max: 40000"):  # Python's run() names its argument (issue 30.9)
        run(F16, rand_max=40000, progress=False)


@pytest.mark.parametrize("command", ["run", "explain"])
def test_a_positional_config_and_config_option_together_are_refused(capsys, command):
    code, _, err = _cli(capsys, command, "conv2d_host_validation_f16_fwd_CHECK_PADDING3_f16", "--config", F16)
    _one_line_error(code, err, "given 2 times", "give it once")
    code, _, err = _cli(capsys, command, F16, "--config", F16)  # the first is turned into --config=
    _one_line_error(code, err, "given 2 times")


def test_a_report_that_cannot_be_written_exits_2_after_the_summary(raw_dir, tmp_path, capsys, monkeypatch):
    out, sel_args = _cached_one_line(raw_dir, tmp_path)

    def full(self, out_dir):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(study.Report, "write", full)
    code, stdout, err = _study(capsys, tmp_path / "raw", out, *sel_args, "--no-diagnose")
    _one_line_error(code, err, "--out: cannot write the report", "No space left")
    assert "1 lines: " in stdout  # the summary came first


def _cached_one_line(raw_dir, tmp_path):
    _copy_files(raw_dir, tmp_path / "raw", ["verify_f16_xdlops_pv_rand1.txt"])
    sel = _selection()
    lines = sel.select(study.read_measured(tmp_path / "raw"))
    out = tmp_path / "out"
    cache = Cache(out / ".cache")
    _, keys, _ = reproduce_mod.plan_jobs(lines, sel, cache)
    ((key, _),) = keys[0]
    cache.put(key, {"mode": "exact", "fields": dict(lines[0].line.fields()), "line": "measured", "recipe": "test"})
    return out, ("--gpu", "mi100", "--kernel", "xdlops", "--validator", "cpu", "--range", "r1", "--smallest", "1")


def test_a_failed_report_write_leaves_the_previous_complete_csv(raw_dir, tmp_path, capsys, monkeypatch):
    """Issue 31: reproduce.csv was truncated before anything was written, so a full disk destroyed the
    complete file of the last run and left one cut mid-row."""
    out, sel_args = _cached_one_line(raw_dir, tmp_path)
    assert _study(capsys, tmp_path / "raw", out, *sel_args, "--no-diagnose")[0] == 0
    before = (out / "reproduce.csv").read_bytes()
    assert before.count(b"\n") >= 2
    real = study.Report.csv_rows

    def full_midway(self):
        rows = real(self)
        yield rows[0]
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(study.Report, "csv_rows", full_midway)
    code, stdout, err = _study(capsys, tmp_path / "raw", out, *sel_args, "--no-diagnose")
    _one_line_error(code, err, "--out: cannot write the report", "No space left", "left whole")
    assert "1 lines: " in stdout
    assert (out / "reproduce.csv").read_bytes() == before
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


def test_a_job_log_that_cannot_be_appended_is_exit_2_after_the_summary(tmp_path, capsys, monkeypatch):
    """Issue 31: with ``ulimit -f 0`` appending to jobs.tsv raised out of the run, with no summary.
    The log stops, the jobs go on, and the command line ends with one line, exit 2."""
    import resource

    from validation.study import execution

    job = dataclasses.make_dataclass("J", ["test", "range", "seed", "rand_type", "requests", "weight"])
    jobs = [job(f"t{i}", "r1", 1, "int", ("k",), 1.0) for i in range(3)]
    monkeypatch.setattr(execution, "run_job", lambda j, cache: {j.test: {}})
    log, errors = tmp_path / "jobs.tsv", []
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, hard))  # ulimit -f 0 (Python ignores SIGXFSZ)
    try:
        got = execution.execute(jobs, 1, None, False, log_path=log, log_errors=errors)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert set(got) == {"t0", "t1", "t2"}  # every job ran
    assert len(errors) == 1 and "jobs.tsv" in errors[0] and "File too large" in errors[0], errors

    def no_log(*args, **kwargs):
        kwargs["log_errors"].append("--out: cannot append to 'jobs.tsv' (File too large); the job log stopped there")
        return {}

    out, sel_args = _cached_one_line(ref.require_study_raw_results(), tmp_path)
    monkeypatch.setattr(reproduce_mod, "execute", lambda *a: no_log(log_errors=a[-1]))
    code, stdout, err = _study(capsys, tmp_path / "raw", out, *sel_args, "--no-diagnose")
    _one_line_error(code, err, "jobs.tsv", "File too large")
    assert "1 lines: " in stdout


BF16 = F16.replace("-t f16", "-t bf16")


def test_a_bf16_run_end_to_end_judges_a_bf16_gpu_output(capsys, tmp_path):
    """run on -t bf16: the header names the format, the metrics are in bf16 ulps, the kernel output
    is bf16; the saved output given back as --gpu-output (.npy of ml_dtypes.bfloat16) is identical,
    one bf16 ulp changed in a raw dump (--gpu-output-format bf16) differs: exit 1."""
    import ml_dtypes

    code, out, err = _cli(capsys, "run", BF16, "--no-progress", "--save", str(tmp_path), "--format", "json")
    assert code in (0, 1), err
    doc = json.loads(out)
    assert "bf16 tensors" in doc["format"] and doc["epsilon_format"] == "bf16", doc
    saved = np.load(tmp_path / "kernel.npy").view(ml_dtypes.bfloat16)
    code, out, err = _cli(capsys, "run", BF16, "--no-progress", "--gpu-output", str(tmp_path / "kernel.npy"))
    assert "elements identical to the emulated kernel, bit for bit" in out, out
    bits = saved.view(np.uint16).copy()
    bits.reshape(-1)[3] ^= 1
    bits.tofile(tmp_path / "gpu.bf16")
    code, out, err = _cli(
        capsys, "run", BF16, "--no-progress", "--gpu-output", str(tmp_path / "gpu.bf16"), "--gpu-output-format", "bf16"
    )
    assert code == 1 and "1 element differs" in out, out

    # the search for what the differing bf16 array matches runs (bf16 models, bf16 ulps)
    assert "search: " in out and "bf16 ulps apart" in out, out
