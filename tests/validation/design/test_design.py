"""fp16emu design (validation.design): rates and intervals, calibrated thresholds, detection of
obvious bugs, worker-count independence, validator files and the command line."""

import json

import numpy as np
import pytest

from models import bugs
from validation.cli import main
from validation.design import (
    InputGenerator,
    clopper_pearson,
    design,
    function,
    load_functions,
    parse_generator,
    resolve_targets,
    run_jobs,
    threshold_at,
)
from validation.design.sweep import K_SWEEP, SeedTask

SMALL = K_SWEEP[0]  # fwd, K = 72, 2048 outputs


@pytest.fixture(scope="module")
def target():
    return resolve_targets([SMALL], hw="mi200", kernel=None, validator="cpu")[0]


def test_clopper_pearson_matches_its_closed_forms_at_the_ends():
    # x = 0: upper = 1 - (α/2)^(1/n); x = n: lower = (α/2)^(1/n)
    for n in (1, 5, 20, 100):
        lo, hi = clopper_pearson(0, n)
        assert lo == 0 and hi == pytest.approx(1 - 0.025 ** (1 / n), rel=1e-9)
        lo, hi = clopper_pearson(n, n)
        assert hi == 1 and lo == pytest.approx(0.025 ** (1 / n), rel=1e-9)
    lo, hi = clopper_pearson(5, 10)
    assert lo < 0.5 < hi and lo == pytest.approx(1 - hi, rel=1e-9)  # symmetric at x = n/2
    assert clopper_pearson(0, 0) == (0.0, 1.0)


def test_threshold_at_is_the_empirical_quantile_with_its_estimated_rate():
    t, est = threshold_at(list(range(1, 101)), 0.05)
    assert t == 95 and (est.failed, est.runs) == (5, 100)
    t, est = threshold_at([3.0, 1.0, 2.0], 0.01)  # rate·n < 1: the maximum, no exceedance
    assert t == 3.0 and est.failed == 0


def test_generators_draw_what_they_say(target):
    from validation.run import plan

    problem = plan(SMALL)[0].problem
    away = InputGenerator("away", 1, 3).inputs(problem, 5, 72)
    for arr in away.values():
        a = np.abs(arr.astype(np.float64))
        assert a.min() >= 1 and a.max() <= 3 and (arr < 0).any() and (arr > 0).any()
    exact = parse_generator("exact").inputs(problem, 5, 72)
    for arr in exact.values():
        v = arr.astype(np.float64)
        assert np.array_equal(v, np.round(v)) and np.abs(v).max() <= 2 and (v == 0).mean() < 0.5
    with pytest.raises(ValueError, match="range"):
        parse_generator("gauss:0:1")


def test_sparse_generator_draws_cudnn_frontend_style_integers_and_gives_exact_outputs(target):
    from validation.run import plan

    problem = plan(SMALL)[0].problem
    gen = parse_generator("sparse")
    a, b, c = gen.inputs(problem, 5, 72), gen.inputs(problem, 5, 72), gen.inputs(problem, 6, 72)
    for name, arr in a.items():
        v = arr.astype(np.float64)
        assert set(np.unique(v)) <= {-2.0, -1.0, 0.0, 1.0, 2.0} and (v < 0).any() and (v > 0).any()
        # kept 1 time in 5, and 1 in 5 of the kept values is 0 itself: 84 % zeros expected
        assert 0.78 < (v == 0).mean() < 0.90, (name, (v == 0).mean())
        assert np.array_equal(arr.view(np.uint16), b[name].view(np.uint16))
        assert not np.array_equal(arr.view(np.uint16), c[name].view(np.uint16))
    with pytest.raises(ValueError, match="2\\^22"):
        gen.inputs(problem, 5, (1 << 22) + 1)
    with pytest.raises(ValueError, match="no bounds"):
        parse_generator("sparse:0:1")
    assert function("cudnn-sparse").label == "cudnn-sparse@sparse"
    for r in run_jobs([SeedTask(target, gen, 1 + i) for i in range(2)]):
        assert r["metrics"]["max_abs_diff"] == 0  # exact fp32 sums: kernel and validation agree


def test_recommended_threshold_is_calibrated_on_fresh_seeds(target):
    """Fit at a 1 % false-alarm target on 30 seeds; on 30 fresh seeds the threshold fails at a
    rate between 0 and the fit's Clopper-Pearson upper bound."""
    gen = parse_generator("float:-1:1")
    fit = run_jobs([SeedTask(target, gen, 1001 + i) for i in range(30)])
    fresh = run_jobs([SeedTask(target, gen, 1 + i) for i in range(30)])
    for metric in ("max_abs_diff", "rms", "max_rel_diff"):
        t, est = threshold_at([r["metrics"][metric] for r in fit], 0.01)
        assert est.failed == 0
        observed = np.mean([r["metrics"][metric] > t for r in fresh])
        assert 0 <= observed <= est.interval[1], (metric, t, observed)


def test_exact_inputs_give_exact_outputs_and_the_worst_case_bound_holds(target):
    rows = run_jobs(
        [SeedTask(target, parse_generator(g), 1 + i, bounds=True) for g in ("exact", "away:1:3") for i in range(3)]
    )
    for r in rows[:3]:
        assert r["metrics"]["max_abs_diff"] == 0
    for r in rows:
        for m in ("max_abs_diff", "max_rel_diff", "rms"):
            assert r["metrics"][m] <= r["bounds"]["worst"][m], (m, r["seed"])
            assert r["metrics"][m] <= r["bounds"]["unit"][m], (m, r["seed"])


def test_obvious_bugs_are_detected_and_results_do_not_depend_on_the_worker_count(target):
    fs = [function("rocmlir"), function("exact"), function("predicted-bound"), function("emulated")]
    muts = (bugs.ChannelSignFlip(1), bugs.UninitialisedTile(-1, "zeros"), bugs.SplitKPartialCount())
    one = design([target], fs, seeds=2, mutants=muts, jobs=1)
    two = design([target], fs, seeds=2, mutants=muts, jobs=2)
    assert json.dumps(one.to_dict(), default=str) == json.dumps(two.to_dict(), default=str)
    # the same sweep on the job engine's Dask LocalCluster (2 workers)
    dask = design([target], fs, seeds=2, mutants=muts, jobs=2, scheduler="local")
    assert json.dumps(one.to_dict(), default=str) == json.dumps(dask.to_dict(), default=str)
    rec = {(r["validator"], r["bug"]): r for r in one.records}
    for vf in ("rocmlir@float:-1:1", "exact@exact", "predicted-bound@float:-1:1", "emulated@float:-1:1"):
        assert rec[(vf, "none")]["failed"] == 0 and rec[(vf, "none")]["runs"] == 2
        for m in muts[:2]:
            assert rec[(vf, m.label)]["rate"] == 1.0
        assert rec[(vf, muts[2].label)]["runs"] == 0  # no split-K in a forward kernel: not applicable
    assert one.inputs["seeds_eval"] == [1, 2] and one.inputs["seeds_fit"][0] > 2


def test_validator_files_toml_and_json(tmp_path):
    (tmp_path / "a.toml").write_text(
        'name = "mine"\ngenerator = "away:1:5"\n[metrics]\nrms = 1e-4\nmax_rel_diff = 0.01\n'
    )
    (tmp_path / "b.json").write_text(
        json.dumps({"functions": [{"name": "j", "metrics": {"max_abs_diff": 0}, "generator": "exact"}]})
    )
    (f,) = load_functions(tmp_path / "a.toml")
    assert f.label == "mine@away:1:5" and [(c.metric, c.limit) for c in f.thresholds.checks] == [
        ("rms", 1e-4),
        ("max_rel_diff", 0.01),
    ]
    (g,) = load_functions(tmp_path / "b.json")
    assert g.label == "j@exact"
    (tmp_path / "c.json").write_text(json.dumps({"metrics": {"bogus": 1}}))
    with pytest.raises(ValueError, match="bogus"):
        load_functions(tmp_path / "c.json")


def test_cli_json_records_and_usage_errors(capsys, tmp_path):
    argv = ["design", SMALL, "--seeds", "1", "--validators", "exact", "--format", "json", "--no-progress"]
    # 'none' beside bug names is accepted (the false alarms are always measured)
    assert main(argv + ["--bugs", "none", "scaled-element", "channel-sign-flip"]) == 0
    out = json.loads(capsys.readouterr().out)
    recs = out["records"]
    assert {"validator", "bug", "runs", "failed", "rate", "ci_low", "ci_high"} <= set(recs[0])
    assert {r["bug"] for r in recs} == {
        "none",
        bugs.ScaledElement().label,
        bugs.ScaledElement(factor=1.125).label,
        bugs.ChannelSignFlip().label,
    }
    assert out["inputs"]["generators"] == ["exact"] and out["inputs"]["tests"][0]["hw"] == "mi200"
    for argv, field in (
        (["design", SMALL, "--seeds", "x"], "--seeds"),
        (["design", SMALL, "--validators", "nope"], "validators"),
        (["design", SMALL, "--hw", "h100"], "hw"),
        (["design", SMALL, "--format", "xml"], "--format"),
        (["design", "k-sweep:0"], "count"),
        (["design", SMALL, "--plot", "x.txt"], "--plot"),
        (["design", SMALL, "--bugs", "gremlin"], "--bugs"),
        (["design", SMALL, "--scheduler", "cluster"], "--scheduler"),
    ):
        assert main(argv) == 2
        assert field in capsys.readouterr().err


def test_without_a_terminal_design_progress_is_a_plain_line_now_and_then(monkeypatch, capsys):
    """A design sweep logged to a file (nohup, CI) is not silent: with stderr not a terminal, a
    plain line (no carriage return) counts the runs done out of all of them; --no-progress: none."""
    from validation.cli import design as cli

    monkeypatch.setattr(cli, "HEARTBEAT_S", 0.0)  # a line after every run
    argv = ["design", SMALL, "--seeds", "1", "--validators", "exact", "--bugs", "none", "--format", "json"]
    assert main(argv) == 0
    lines = capsys.readouterr().err.splitlines()
    n = len(lines)
    assert n >= 2 and "\r" not in "".join(lines)
    assert lines[0].startswith(f"fp16emu: 1/{n} runs done, ") and "elapsed, about" in lines[0]
    assert lines[-1].startswith(f"fp16emu: {n}/{n} runs done, ") and "left" not in lines[-1]
    assert main(argv + ["--no-progress"]) == 0
    assert capsys.readouterr().err == ""


def test_text_report_states_its_inputs(capsys):
    assert (
        main(["design", SMALL, "--seeds", "1", "--validators", "torch", "--ranges", "away:1:3", "--no-progress"]) == 0
    )
    text = capsys.readouterr().out
    for what in (
        "seeds:",
        "away:1:3",
        "hw mi200",
        "torch@away:1:3",
        "best of the functions compared:",
        "Clopper-Pearson",
    ):
        assert what in text
    # issue 30.8: a rule a harness can use, not "run this tool", and a warning that 1 seed cannot
    # support the 0.01 target (3/0.01 = 300 runs with no false alarm)
    assert "recommendation: emulated" not in text
    for what in ("-RMS_threshold=", "-absDiff_threshold=", "-relDiff_threshold=", "assert_close(actual, expected, rtol=0, atol=",
                 "MIOpen tolerance (rms_range):", "·√K", "runs needed: 300", "WARNING: the thresholds were fitted on 1 run per test"):  # fmt: skip
        assert what in text


def test_the_harness_rule_is_the_fitted_thresholds_in_each_tools_terms(capsys):
    from validation.design import runs_needed

    assert (runs_needed(0.01), runs_needed(0.05), runs_needed(0.001)) == (300, 60, 3000)
    code = main(["design", SMALL, "--seeds", "2", "--validators", "torch", "--bugs", "none", "--no-progress",
                 "--format", "json"])  # fmt: skip
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    rule = doc["harness_rule"]
    assert rule["runs_needed"] == 300 and rule["fit_runs"] == 2 and "--seeds 300" in rule["warning"]
    for t, n in zip(rule["per_test"], doc["noise"]):
        m = n["metrics"]
        assert t["K"] == n["K"] == 72
        assert t["rocmlir_flags"]["-RMS_threshold"] == m["rms"]["threshold"]
        assert t["rocmlir_flags"]["-absDiff_threshold"] == m["max_abs_diff"]["threshold"]
        assert t["assert_close"] == {"rtol": 0.0, "atol": m["max_abs_diff"]["threshold"]}
        assert t["miopen_rms_tolerance"] == m["miopen_rms"]["threshold"]
    best = max(n["metrics"]["max_abs_diff"]["threshold"] / 72**0.5 for n in doc["noise"])
    assert rule["of_k"]["c"]["max_abs_diff"] == pytest.approx(best)


def test_constant_inputs_are_reported_as_not_trustworthy(target):
    (row,) = run_jobs([SeedTask(target, InputGenerator("int", 1, 2), 3)])  # every value 1
    assert row["trust"]["constant_input"] and not row["trust"]["trustworthy"]
    (row,) = run_jobs([SeedTask(target, InputGenerator("float", -1, 1), 3)])
    assert row["trust"]["trustworthy"]


def test_element_bounds_cover_two_subnormal_fp16_roundings():
    """Where the validation is tiny, rounding to fp16 errs by up to half the subnormal spacing
    (2^-25) absolutely, for the kernel and for the rounded validation: B ≥ 2^-24 everywhere."""
    from validation.design.bounds import element_bounds
    from validation.run import plan

    config, kmodel, vmodel = plan(SMALL)
    problem = config.problem
    inputs = parse_generator("exact").inputs(problem, 2, 72)
    zeros = np.zeros(problem.tensor_size("output"), np.float32)
    for kind in ("worst", "probabilistic", "unit"):
        assert element_bounds(problem, kmodel, vmodel, inputs, zeros)[kind].min() >= 2.0**-24


def test_the_2022_verifier_needed_loosening_and_then_missed_bugs(capsys):
    # rocMLIR PR #694 (relDiff_old <= 1e-6) fails a correct kernel on rounding alone; PR #696's
    # 0.25 (rocmlir-2022) passes it, and with it a NaN tile and a 12.5 % error on one element
    from pathlib import Path

    pr694 = Path(__file__).resolve().parents[3] / "docs" / "validators" / "rocmlir-pr694.toml"
    argv = ["design", "conv2d_host_validation_f16_fwd_CHECK_KYXC_NHWC_NHWK5_f16", "--hw", "mi200",
            "--kernel", "xdlops", "--seeds", "2", "--validators", "rocmlir-2022", str(pr694),
            "--bugs", "scaled-element", "uninitialised-tile", "--format", "json", "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    recs = json.loads(capsys.readouterr().out)["records"]
    rate = {(r["validator"].split("@")[0], r["bug"]): r["failed"] / r["runs"] for r in recs}
    assert rate[("rocmlir-pr694", "none")] > 0.5 and rate[("rocmlir-2022", "none")] == 0
    assert rate[("rocmlir-2022", bugs.ScaledElement(factor=1.125).label)] == 0
    nan_tile = [b for (v, b) in rate if v == "rocmlir-2022" and "fill='nan'" in b]
    assert nan_tile and all(rate[("rocmlir-2022", b)] == 0 for b in nan_tile)
    assert rate[("rocmlir-2022", bugs.ScaledElement().label)] == 1  # x2 on one element is seen


def test_compare_cache_measures_diff4_pairs_only_for_verifiers_that_read_them():
    from validation.design.sweep import CompareCache, verdict_failed
    from validation.verify.presets import preset

    base = np.arange(1, 151, dtype=np.float32)
    up = (base + 0.5).astype(np.float16)
    cache = CompareCache(base)
    plain = preset("mlu-ops", dtype="fp16")
    assert verdict_failed(plain, up, cache)  # diff1 fails
    assert cache.computed == 1
    first = cache.result(up, **plain.compare_options())
    assert cache.computed == 1 and not first.diff4_measured  # no check reads diff4: no pair sort
    with_diff4 = preset("mlu-ops", dtype="fp16", diff4=True)
    assert verdict_failed(with_diff4, up, cache)
    assert cache.computed == 2  # a result without the pairs cannot serve diff4
    assert verdict_failed(plain, up, cache) and cache.computed == 2  # ... but one with them serves both
    assert cache.result(up, **plain.compare_options()).diff4_measured
