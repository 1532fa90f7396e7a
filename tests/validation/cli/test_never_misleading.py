"""Issue 14: never a misleading answer. Each command the issue quotes now says what it did (inputs,
verifier, run set, units, the failing check's own metric) or does the right thing; options without
effect are warnings; user tensors in (--inputs), results out (--save); short reprs."""

import json
import sys

import numpy as np

from validation.cli import main
from validation.metrics import compare
from validation.progress import auto_progress, progress_bar
from validation.run import run
from validation.verify.presets import resolve_metric, verify

PAD = "padding_kernel_all_fwd_CHECK_RESNET50_CONFIG4_f16"
SMALL = (
    "--operation conv2d -t f16 -fil_layout=kcyx -in_layout=nchw -out_layout=nkhw -batchsize=2 "
    "-in_channels=4 -out_channels=8 -in_h=6 -in_w=6 -fil_h=3 -fil_w=3 --rand_type float"
)
DRIVER = "MIOpenDriver convfp16 -n 2 -c 4 -H 6 -W 6 -k 8 -y 3 -x 3 -p 1 -q 1 -F 1"


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_quoted_integer_inputs_command_says_integers_and_warns(capsys):
    argv = ["run", PAD, "--kernel", "xdlops", "--rand-min", "-1", "--rand-max", "1", "--seed", "1"]
    code, out, err = _run(capsys, *argv, "--verifier", "study-2022", "--no-progress")
    assert code == 0
    assert "inputs: random integers in [-1, 1) (-1, 0): int generator (default: the config has no -rand_type)" in out
    assert "seed 1 (option --seed)" in out and "range [-1, 1) (option --rand-min/--rand-max)" in out
    assert "study-2022, run set fair_3" in out  # which run set the preset uses
    assert "fp16emu: warning: --rand-min/--rand-max set the int generator's range" in err
    assert "add --rand-type float" in err
    code, out, err = _run(capsys, *argv, "--verifier", "study-2022", "--no-progress", "--format", "json")
    doc = json.loads(out)
    assert doc["inputs"]["distribution"] == "int" and doc["inputs"]["interval"] == "[-1, 1)"
    assert doc["inputs"]["source"] == {
        "distribution": "default: the config has no -rand_type",
        "range": "option --rand-min/--rand-max",
        "seed": "option --seed",
    }
    assert doc["warnings"] and doc["verifier"] == {
        "name": "study-2022",
        "source": "option --verifier",
        "run_set": "fair_3",
    }
    # with --rand-type float the same command draws reals in [-1, 1] and no longer warns
    code, out, err = _run(capsys, *argv, "--rand-type", "float", "--no-progress")
    assert "random reals in [-1, 1]: float generator (option --rand-type)" in out and "warning" not in err


def test_without_verifier_the_harness_verifier_judges_and_says_so(capsys):
    code, out, err = _run(capsys, "run", PAD, "--no-progress")
    assert "verifier: rocmlir-2022 (default: the 2022 suite's harness verifier" in out
    assert "validation rounded to fp16" in out  # measured as the harness measures, not unrounded
    assert "seed 1 (config -rand 1 (the suite test's %random_data))" in out
    last = out.rstrip().splitlines()
    assert any(line.startswith("PASS (rocmlir-2022") for line in last[-3:])
    assert "note: rocmlir-2022 lets NaN and unequal infinities through" in out
    code, out, _ = _run(capsys, "run", SMALL, "--no-progress", "--format", "json")
    doc = json.loads(out)
    assert doc["verifier"]["name"] == "rocmlir" and doc["verdict"] == "pass" and doc["preset"] == "rocmlir"
    assert doc["nonfinite_check"]["metric"] == "n_nonfinite"


def test_options_without_effect_are_warnings(capsys):
    # SMALL has no -rand: its inputs are the fixed pattern
    code, out, err = _run(capsys, "run", SMALL, "--rand-min", "-3", "--rand-max", "3", "--no-progress")
    assert code == 0 and "--rand-min/--rand-max have no effect: the inputs are the fixed pattern" in err
    assert "inputs: the fixed pattern 0.5, -1, 0.75" in out
    code, out, err = _run(capsys, "run", SMALL, "--seed", "7", "--no-progress")
    assert "--seed 7: the config has no -rand seed" in err and "switches them to the harness's random float" in err
    assert "seed 7 (option --seed)" in out
    code, out, err = _run(capsys, "run", SMALL, "--rand-type", "int", "--no-progress")
    assert "--rand-type int has no effect" in err


def test_nan_inf_and_a_large_error_get_a_verdict_from_compare(tmp_path, capsys):
    rng = np.random.default_rng(1)
    v = rng.uniform(-1, 1, 64).astype(np.float32)
    k = v.astype(np.float16)
    np.save(tmp_path / "v.npy", v)
    nan = k.copy()
    nan[5] = np.nan
    np.save(tmp_path / "nan.npy", nan)
    code, out, _ = _run(capsys, "compare", str(tmp_path / "v.npy"), str(tmp_path / "nan.npy"))
    assert code == 1
    assert "verifier: rocmlir (default for compare: rocMLIR's limits for fp16)" in out
    assert "nonfinite mismatches: 1 (NaN 1, unequal inf 0) > 0 FAIL" in out
    # each check line reflects its own metric: the finite maxAbsDiff is within its limit
    line = next(ln for ln in out.splitlines() if ln.startswith("max_abs_diff (absDiff):"))
    assert "<= 100 pass" in line and "[absolute" in line
    assert out.rstrip().splitlines()[-1].startswith("FAIL (rocmlir): n_nonfinite 1 > 0")
    inf = k.copy()
    inf[3] = np.float16(np.inf)
    np.save(tmp_path / "inf.npy", inf)
    assert _run(capsys, "compare", str(tmp_path / "v.npy"), str(tmp_path / "inf.npy"))[0] == 1
    big = (v * 35).astype(np.float16)
    np.save(tmp_path / "big.npy", big)
    code, out, _ = _run(capsys, "compare", str(tmp_path / "v.npy"), str(tmp_path / "big.npy"))
    assert code == 1 and "FAIL (rocmlir): rms" in out
    # rocmlir-2022 passes the NaN, faithfully, and says so
    code, out, _ = _run(
        capsys, "compare", str(tmp_path / "v.npy"), str(tmp_path / "nan.npy"), "--verifier", "rocmlir-2022"
    )
    assert code == 0 and "note: rocmlir-2022 lets NaN" in out and "1 NaN/inf mismatches here do not fail it" in out


def test_compare_dtype_shape_and_npz_keys(tmp_path, capsys):
    rng = np.random.default_rng(2)
    v = rng.uniform(-4, 4, (4, 6)).astype(np.float32)
    k16 = v.astype(np.float16)
    k16[1, 2] = np.nextafter(k16[1, 2], np.float16(9))  # 1 fp16 ulp off
    np.save(tmp_path / "v.npy", v.reshape(-1))
    np.savez(tmp_path / "k.npz", out=k16.astype(np.float32), other=np.zeros(3))
    argv = ["compare", str(tmp_path / "v.npy"), f"{tmp_path / 'k.npz'}:out", "--shape", "4,6", "--format", "json"]
    code, out, err = _run(capsys, *argv, "--dtype", "fp16")
    doc = json.loads(out)
    assert doc["shape"] == [4, 6] and doc["epsilon_format"] == "fp16" and doc["max_epsilon_diff"] == 1.0
    assert doc["worst"][0]["coords"] == [1, 2]
    code, out, err = _run(capsys, *argv)  # an fp16 result saved as fp32, judged in fp32 ulps: a hint
    assert json.loads(out)["epsilon_format"] == "fp32" and "give --dtype fp16" in err
    np.save(tmp_path / "k32.npy", v + np.float32(1e-3))
    code, _, err = _run(capsys, "compare", str(tmp_path / "v.npy"), str(tmp_path / "k32.npy"), "--dtype", "fp16")
    assert code == 2 and "is not a fp16 value" in err
    code, _, err = _run(capsys, "compare", str(tmp_path / "v.npy"), f"{tmp_path / 'k.npz'}:out", "--shape", "5,5")
    assert code == 2 and "--shape 5,5" in err


def test_threshold_names_are_the_check_and_json_names_with_aliases(tmp_path, capsys):
    assert resolve_metric("absDiff") == "max_abs_diff" and resolve_metric("maxEpsilonDiff") == "max_epsilon_diff"
    assert resolve_metric("RMS") == "rms" and resolve_metric("relDiff_old") == "max_rel_diff_old"
    v = np.linspace(-1, 1, 50).astype(np.float32)
    k = v.astype(np.float16)
    np.save(tmp_path / "v.npy", v)
    np.save(tmp_path / "k.npy", k)
    for name in ("max_epsilon_diff", "epsilonDiff", "maxEpsilonDiff"):
        code, out, _ = _run(
            capsys, "compare", str(tmp_path / "v.npy"), str(tmp_path / "k.npy"), "--threshold", f"{name}=0"
        )
        assert (
            "max_epsilon_diff (max_epsilon_diff): 0 <= 0 pass  [fp16 ulps" in out
            or "max_epsilon_diff: 0 <= 0 pass" in out
        )
    code, _, err = _run(capsys, "compare", str(tmp_path / "v.npy"), str(tmp_path / "k.npy"), "--threshold", "bogus=1")
    assert code == 2 and "unknown metric 'bogus'" in err


def test_miopen_driver_needs_inputs_and_runs_on_them_save_round_trips(tmp_path, capsys):
    code, _, err = _run(capsys, "run", DRIVER, "--no-progress")
    assert code == 2 and "--inputs DIR or --inputs x.npy,w.npy" in err
    # the inputs of a harness run, saved, then given back: the same kernel output bit for bit
    code, out, err = _run(capsys, "run", SMALL, "--seed", "3", "--no-progress", "--save", str(tmp_path / "a"))
    meta = json.loads((tmp_path / "a" / "run.json").read_text())
    assert set(meta["files"]) == {"kernel.npy", "validation.npy", "x.npy", "w.npy"}
    assert meta["inputs"]["seed"] == 3 and meta["config"] == " ".join(SMALL.split())
    kern = np.load(tmp_path / "a" / "kernel.npy")
    assert kern.shape == (2, 1, 8, 4, 4) and kern.dtype == np.float16  # ngkhw, the kernel's format
    assert np.load(tmp_path / "a" / "validation.npy").dtype == np.float32
    code, out, err = _run(
        capsys, "run", SMALL, "--inputs", str(tmp_path / "a"), "--no-progress", "--save", str(tmp_path / "b")
    )
    assert "the user's tensors: x " in out and np.array_equal(
        np.load(tmp_path / "b" / "kernel.npy").view(np.uint16), kern.view(np.uint16)
    )
    # an MIOpenDriver command of the same convolution runs on them (files in the order x, w)
    x, w = tmp_path / "a" / "x.npy", tmp_path / "a" / "w.npy"
    code, out, err = _run(
        capsys,
        "run",
        DRIVER.replace("-p 1 -q 1 ", ""),
        "--inputs",
        f"{x},{w}",
        "--seed",
        "1",
        "--no-progress",
        "--format",
        "json",
    )
    doc = json.loads(out)
    assert doc["inputs"]["distribution"] == "user" and doc["verifier"]["name"] == "miopen"
    assert "--seed has no effect: the inputs are your files" in err
    code, _, err = _run(capsys, "run", SMALL, "--inputs", str(x), "--no-progress")
    assert code == 2 and "a fwd run reads x and w" in err


def test_config_is_never_truncated_and_unknown_names_get_a_did_you_mean(capsys):
    long_cfg = SMALL + " --dilation_h=1 --dilation_w=1 --padding_h=0 --padding_w=0 --conv_stride_h=1 --conv_stride_w=1"
    code, out, _ = _run(capsys, "run", long_cfg, "--no-progress", "--format", "json")
    assert json.loads(out)["config"] == " ".join(long_cfg.split()) and len(long_cfg) > 150
    code, out, _ = _run(capsys, "run", long_cfg, "--check", "--format", "json")
    assert json.loads(out)["config"] == " ".join(long_cfg.split())
    assert json.loads(out)["inputs"]["distribution"] == "fixed"  # --check says what a run would use too
    code, out, _ = _run(capsys, "run", DRIVER, "--check")
    assert code == 0 and "inputs: MIOpenDriver fills its tensors with MIOpen's own generator" in out
    code, _, err = _run(capsys, "run", "padding_kernel_all_fwd_CHECK_RESNET50_CONFIG_f16")
    assert code == 2 and "did you mean padding_kernel_all_fwd_CHECK_RESNET50_CONFIG4_f16" in err


def test_split_k_atomic_test_says_the_result_varies(capsys):
    code, out, _ = _run(
        capsys, "run", "conv2d_host_validation_f16_bwd_CHECK_ISSUE_71_2", "--members", "4", "--no-progress"
    )
    assert "varies run to run" in out and "ensemble over 4 atomic add orders" in out
    assert "add orders pass rocmlir-2022" in out


def test_results_have_short_reprs_and_notebook_html(tmp_path):
    r = run(SMALL, seed=1, progress=False)
    assert r.kernel_array.shape == r.shape == (2, 1, 8, 4, 4) and r.axes == tuple("ngkhw")
    c = compare(r.validation_array, r.kernel_array)
    v = verify(r.validation_array, r.kernel_array, "rocmlir")
    g = r.against(r.kernel_array)
    for obj in (r, c, v, g):
        text = repr(obj)
        assert len(text) < 400 and "\n" not in text and "array(" not in text, text
        assert obj._repr_html_().startswith("<")
    written = r.save(tmp_path)
    assert set(written) == {"kernel.npy", "validation.npy", "x.npy", "w.npy", "run.json"}
    assert np.array_equal(np.load(tmp_path / "kernel.npy"), r.kernel_array)
    assert "ngkhw" in repr(r) and "identical" in repr(g) and "PASS" in repr(v)


def test_progress_bar_only_on_a_terminal_and_closed(monkeypatch):
    class Tty:
        def __init__(self, tty):
            self.tty, self.text = tty, []

        def isatty(self):
            return self.tty

        def write(self, s):
            self.text.append(s)

        def flush(self):
            pass

    monkeypatch.setattr(sys, "stderr", Tty(False))
    assert auto_progress() is False
    monkeypatch.setattr(sys, "stderr", Tty(True))
    assert auto_progress() is True
    bar = progress_bar(10, True, "t")
    bar.update(10)
    bar.close()
    assert bar.disable or bar.n == 10
    assert progress_bar(10, False, "t") is None


def test_study_progress_counts_small_jobs(monkeypatch):
    """The study's bar used to count work in rounded tenths of G: jobs under 0.05 G added 0 and the
    bar stayed at 0 %. Every job's work now counts."""
    import tqdm as tqdm_mod

    from validation.study import execution

    seen = {}

    class Bar:
        def __init__(self, total, **kw):
            seen["total"], seen["n"] = total, 0

        def update(self, n):
            seen["n"] += n

        def set_postfix_str(self, *a, **k):
            pass

        def close(self):
            seen["closed"] = True

    class Job:
        def __init__(self, w):
            self.weight, self.test, self.range, self.seed, self.rand_type, self.requests = w, "t", "r0", 1, "float", ()

    monkeypatch.setattr(tqdm_mod, "tqdm", Bar)
    monkeypatch.setattr(execution, "run_job", lambda job, cache: {})
    execution.execute([Job(3e6), Job(4e7), Job(1.5e6)], 1, None, True)
    assert seen["total"] == seen["n"] == int(3e6) + int(4e7) + int(1.5e6) and seen["closed"]


def test_without_a_terminal_study_progress_is_a_plain_line_now_and_then(monkeypatch, capsys):
    """A long run logged to a file (nohup, CI) is not silent: without a bar, ``heartbeat_s`` gives
    a plain line (no carriage return) with jobs and the share of the work done, and time left."""
    from validation.study import execution

    class Job:
        def __init__(self, w):
            self.weight, self.test, self.range, self.seed, self.rand_type, self.requests = w, "t", "r0", 1, "float", ()

    monkeypatch.setattr(execution, "run_job", lambda job, cache: {})
    jobs = [Job(1.0), Job(1.0), Job(2.0)]
    execution.execute(jobs, 1, None, False, heartbeat_s=0.0)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3 and "\r" not in "".join(lines)
    assert lines[0].startswith("fp16emu: 1/3 jobs done, 25 % of the work") and "left" in lines[0]
    assert lines[2].startswith("fp16emu: 3/3 jobs done, 100 % of the work") and "left" not in lines[2]
    execution.execute(jobs, 1, None, False, heartbeat_s=3600.0)  # none due within the hour
    execution.execute(jobs, 1, None, False)  # off by default
    assert capsys.readouterr().err == ""


def test_explain_states_its_inputs_and_warns(capsys):
    code, out, err = _run(
        capsys, "explain", SMALL, "--rand-min", "-2", "--no-progress", "--top", "0", "--metric", "rms"
    )
    assert code == 0 and "inputs: the fixed pattern 0.5, -1, 0.75" in out
    assert "--rand-min/--rand-max have no effect" in err
    code, out, err = _run(
        capsys, "explain", SMALL, "--seed", "2", "--rand-type", "int", "--no-progress", "--top", "0", "--metric", "rms",
        "--format", "json",
    )  # fmt: skip
    doc = json.loads(out)
    assert doc["inputs"]["distribution"] == "int" and doc["inputs"]["interval"] == "[-5, 5)"
    assert doc["inputs"]["source"]["seed"] == "option --seed" and doc["config"] == " ".join(SMALL.split())


def test_the_quoted_test_with_float_inputs_gives_the_measured_432_with_named_coordinates(capsys):
    # the issue: the real MI200 measured maxEpsilonDiff 432 on this test (float inputs in [-1, 1])
    code, out, _ = _run(capsys, "run", PAD, "--kernel", "xdlops", "--rand-type", "float", "--report", "--no-progress")
    assert "maxEpsilonDiff 432 (fp16 ulps)" in out
    worst = out.split("worst 10 by epsilonDiff:")[1].splitlines()[1]
    assert worst.lstrip().startswith("n=") and " h=" in worst and " k=" in worst and "eps 432" in worst
    code, out, _ = _run(
        capsys, "run", PAD, "--kernel", "xdlops", "--rand-type", "float", "--no-progress", "--format", "json"
    )
    doc = json.loads(out)
    assert doc["axes"] == list("nhwgk") and set(doc["worst"][0]["where"]) == set("nhwgk")
    assert list(doc["worst"][0]["where"].values()) == doc["worst"][0]["coords"]


def test_explain_runs_an_miopen_driver_command_on_the_users_inputs(capsys, tmp_path):
    code, _, err = _run(capsys, "explain", DRIVER, "--no-progress")
    assert code == 2 and "--inputs" in err
    run(SMALL, seed=5, progress=False).save(tmp_path)
    code, out, err = _run(
        capsys, "explain", DRIVER.replace("-p 1 -q 1 ", ""), "--inputs", str(tmp_path), "--no-progress", "--top", "0",
        "--metric", "rms",
    )  # fmt: skip
    assert code == 0 and "inputs: the user's tensors: x " in out


def _recording_bars(bars: list):
    """A stand-in for ``progress_bar`` (same arguments) whose bars record their total, progress
    and closing in ``bars``."""

    class Bar:
        def __init__(self, total):
            self.total, self.n, self.closed = total, 0, False
            bars.append(self)

        def update(self, n):
            self.n += n

        def close(self):
            self.closed = True

    return lambda total, enabled, desc, unit="col": Bar(total) if enabled else None


def test_explain_progress_bars_complete_and_close(monkeypatch):
    from validation.explain import explain, variants
    from validation.explain import explainer as design

    bars = []
    make = _recording_bars(bars)
    monkeypatch.setattr(design, "progress_bar", make)
    monkeypatch.setattr(variants, "progress_bar", make)
    explain(SMALL, seed=1, progress=True, top=0, metrics="rms")
    assert len(bars) == 2 and all(b.closed and b.n == b.total for b in bars)


def test_run_progress_bar_completes_and_closes(monkeypatch):
    from validation.run import runner as run_mod

    bars = []
    make = _recording_bars(bars)
    monkeypatch.setattr(run_mod, "progress_bar", make)
    run(SMALL, seed=1, progress=True)
    assert len(bars) == 1 and bars[0].closed and bars[0].n == bars[0].total > 0
    monkeypatch.setattr(sys, "stderr", type("NoTty", (), {"isatty": lambda self: False, "write": print})())
    run(SMALL, seed=1)  # not a terminal: no bar
    assert len(bars) == 1
