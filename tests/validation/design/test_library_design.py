"""``fp16emu design`` for library ops: the legal schedules, the mutants, the rules and --check."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from emu.schedule import Schedule
from validation.captures.format import complete, save
from validation.captures.gemms import Candidate, Variant, bits
from validation.cli import main
from validation.design import LIBRARY_MUTANTS, design_json, design_library, problem_from_capture, problem_from_op
from validation.design.library import reference, run_schedule
from validation.design.mutants import NotApplicable, run_mutant
from validation.design.tolerance import ASSERT_CLOSE_DEFAULTS, parse_tolerance
from validation.diff import diff_captures

ARGS = ["--max-schedules", "6", "--operand-sets", "2", "--mutant-bases", "1", "--no-progress"]


@pytest.fixture(scope="module")
def linear():
    p = problem_from_op("linear", (16, 32, 512), "bf16", ["h100", "h200"])
    return design_library(p, max_schedules=6, n_operands=2, mutant_bases=1)


def test_reference_is_the_exact_product(linear):
    cap = linear.problem.cap
    x = cap.operands["input"].view(np.uint16).astype(np.uint32) << 16
    w = cap.operands["weight"].view(np.uint16).astype(np.uint32) << 16
    b = cap.operands["bias"].view(np.uint16).astype(np.uint32) << 16
    want = x.view(np.float32).astype(np.float64) @ w.view(np.float32).astype(np.float64).T + b.view(np.float32)
    assert np.array_equal(reference(cap), want)


def test_the_recommended_rule_passes_every_legal_schedule_and_is_never_zero(linear):
    rtol, atol = linear.recommended
    assert rtol > 0 and atol > 0
    rec = next(r for r in linear.rules if r.name == "recommended")
    assert linear.false_alarms(rec).failed == 0 and linear.false_alarms(rec).runs == len(linear.legal)
    j = design_json(linear)
    assert j["rule"] == {"rtol": rtol, "atol": atol}
    assert j["schedules"]["count"] == 6 and j["schedules"]["sampled"] and len(j["schedules"]["which"]) == 6
    assert {"name", "detected"} <= set(j["mutants"][0])
    assert {r["name"] for r in j["rules"]} >= {"assert_close defaults", "FlashAttention 2x", "rocBLAS K·tol"}
    assert j["units"] == ["h100"] and j["gpus"] == ["h100", "h200"]


def test_split_mutants_are_caught_by_the_recommended_rule(linear):
    j = {m["name"]: m for m in design_json(linear)["mutants"]}
    for name in ("k-tile-dropped", "split-lost", "operand-transposed", "stale-tile", "bias-twice"):
        assert j[name]["detected"], name
    assert "scale-twice" in linear.not_applicable  # a linear has no scale


def test_rocblas_k_rule_is_far_looser_than_the_legal_errors(linear):
    rule = next(r for r in linear.rules if r.name == "rocBLAS K·tol")
    assert rule.atol == pytest.approx(512 / 100)
    assert rule.atol > 10 * linear.recommended[1]
    assert linear.false_alarms(rule).failed == 0


def test_check_names_what_a_tolerance_fails_and_misses(linear):
    loose = linear.check(0.0, 100.0)
    assert not loose["ok"] and not loose["fails_legal"]
    assert {m["mutant"] for m in loose["misses_mutants"]} >= {"k-tile-dropped", "split-lost"}
    tight = linear.check(0.0, 0.0)
    assert tight["fails_legal"] and not tight["ok"]
    rtol, atol = linear.recommended
    assert linear.check(rtol, atol)["fails_legal"] == []


def test_a_mutant_without_its_target_says_why(linear):
    cap = linear.problem.cap
    plain = next(c for c in linear.schedules if c.schedule.splits == 1)
    with pytest.raises(NotApplicable, match="one split"):
        run_mutant("split-lost", cap, plain, np.zeros_like(cap.out))
    assert set(LIBRARY_MUTANTS) >= {"k-tile-dropped", "partials-rounded", "fast-accumulation", "stale-tile"}


def test_assert_close_defaults_are_torchs():
    assert ASSERT_CLOSE_DEFAULTS == {"fp16": (1e-3, 1e-5), "bf16": (1.6e-2, 1e-5), "fp32": (1.3e-6, 1e-5)}


@pytest.mark.parametrize(
    "text, want", [("rtol=1e-2,atol=1e-3", (1e-2, 1e-3)), ("atol=0.5", (0.0, 0.5)), (" rtol=0 , atol=2 ", (0, 2))]
)
def test_parse_tolerance(text, want):
    assert parse_tolerance(text) == want


@pytest.mark.parametrize("bad", ["rtol", "tol=1", "rtol=x", "atol=-1", ""])
def test_parse_tolerance_refuses(bad):
    with pytest.raises(ValueError, match="--check"):
        parse_tolerance(bad)


def test_cli_json_and_check_exit_codes(capsys, tmp_path):
    base = ["design", "--op", "mm", "--shape", "8", "16", "256", "--dtype", "fp16", "--gpus", "h100,a100"] + ARGS
    assert main(base + ["--format", "json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert j["units"] == ["h100", "a100"] and j["rule"]["atol"] > 0
    rtol, atol = j["rule"]["rtol"], j["rule"]["atol"]
    assert main(base + ["--check", f"rtol={rtol},atol={atol}"]) in (0, 1)
    out = capsys.readouterr().out
    assert "check rtol=" in out
    assert main(base + ["--check", "rtol=0,atol=1000", "--plot", str(tmp_path / "tol.png")]) == 1
    out = capsys.readouterr().out
    assert "MISSES" in out and f"plot: {tmp_path / 'tol.png'}" in out
    assert (tmp_path / "tol.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "argv, field",
    [
        (["--op", "conv9", "--shape", "1", "2", "3", "--dtype", "fp16"], "--op"),
        (["--op", "mm", "--shape", "1", "2", "--dtype", "fp16"], "--shape"),
        (["--op", "mm", "--shape", "1", "2", "3", "--dtype", "fp64"], "--dtype"),
        (["--op", "mm", "--shape", "1", "2", "3", "--dtype", "fp16", "--gpus", "h900"], "--gpus"),
        (["--op", "mm", "--shape", "1", "2", "3", "--dtype", "fp16", "--check", "rtol"], "--check"),
        (["--op", "mm", "--dtype", "fp16"], "--op needs --shape"),
    ],
)
def test_cli_errors_name_the_field(argv, field, capsys):
    assert main(["design", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fp16emu design: error:") and field in err and err.count("\n") == 1


H200 = Path(__file__).resolve().parents[2] / "data" / "captures" / "h200_s16"


def test_an_h200_captures_rule_passes_another_split_count_and_fails_planted_bugs(tmp_path):
    """Issue 40's acceptance on a kept H200 capture (3 splits of 64-wide k tiles): the rule designed
    for H100 and H200 passes the same mm with 2 splits (what an H100 may pick; emulated here) and
    fails the H200 output with the last k tile of one output tile dropped or one split lost; and
    diff reads the two outputs as rounding, naming both schedules."""
    path = H200 / "t_mm_128x4096x64_bf16.npz"
    p = problem_from_capture(path, ["h100", "h200"])
    d = design_library(p, max_schedules=3, n_operands=1, mutant_bases=1, mutants=["split-lost"])
    assert d.identified is not None and "3 splits of 64-wide k tiles" in d.identified
    rtol, atol = d.recommended
    ref = d.refs[0]

    def passes(out):
        return bool(np.all(np.abs(out.astype(np.float64) - ref) <= atol + rtol * np.abs(ref)))

    assert passes(p.cap.out)
    two = Schedule(k_tile=64, splits=2, split_rule="ceil", output="bf16")
    other = run_schedule(p.cap, Candidate("h100", Variant(), two))
    assert not np.array_equal(bits(other), bits(p.cap.out))  # another split count: other bits
    assert passes(other)
    pinned = d.schedules[0]
    for name in ("k-tile-dropped", "split-lost"):
        assert not passes(run_mutant(name, p.cap, pinned, p.cap.out)), name
    fields = complete(dict(np.load(path)))
    save(tmp_path / "h100.npz", {**fields, "out": other, "gpu": "NVIDIA H100 80GB HBM3"})
    pair = diff_captures(path, tmp_path / "h100.npz")
    assert pair.reading == "rounding" and pair.n_differ > 0
    assert "3 splits" in pair.json()["schedules"]["a"] and "2 splits" in pair.json()["schedules"]["b"]


def test_a_bf16_convolution_never_gets_a_zero_tolerance():
    p = problem_from_capture(H200 / "t_conv2d_n2c16k16h12r5s1p2_conti_bf16.npz", ["h100"])
    d = design_library(p, max_schedules=2, n_operands=1, mutant_bases=1, mutants=["stale-tile"], identify=False)
    rtol, atol = d.recommended
    assert rtol > 0 and atol > 0
    assert d.false_alarms(next(r for r in d.rules if r.name == "recommended")).failed == 0


def test_a_large_op_keeps_its_first_rows_and_says_so():
    from validation.design.library import bounded, legal_schedules

    p = problem_from_op("linear", (64, 16, 96), "fp16", ["h100"])
    cut, note = bounded(p, 128)
    assert cut.cap.out.shape == (8, 16) and cut.cap.operands["input"].shape == (8, 96) and "first 8 of 64 rows" in note
    assert bounded(p, 64 * 16) == (p, None)
    (cand,) = [c for c in legal_schedules(p, 3)[0] if c.schedule.splits > 1][:1]
    whole = run_schedule(p.cap, cand)
    assert np.array_equal(bits(run_schedule(cut.cap, cand)), bits(whole[:8]))  # rows are independent
    d = design_library(p, max_schedules=2, n_operands=1, mutant_bases=1, mutants=["split-lost"], max_outputs=128)
    assert any("first 8 of 64 rows" in n for n in d.notes) and d.refs[0].shape == (8, 16)


def test_a_described_conv2d_is_a_capture_of_its_shape_and_its_reference_is_the_convolution():
    p = problem_from_op("conv2d", (2, 3, 5, 6, 4, 3, 2), "fp16", ["h100"])
    cap = p.cap
    assert cap.out.shape == (2, 4, 3, 5) and p.K == 3 * 3 * 2
    x = cap.operands["input"].view(np.float16).astype(np.float64)
    w = cap.operands["weight"].view(np.float16).astype(np.float64)
    b = cap.operands["bias"].view(np.float16).astype(np.float64)
    want = np.zeros((2, 4, 3, 5))
    for i in range(3):
        for j in range(5):
            want[:, :, i, j] = np.einsum("ncrs,kcrs->nk", x[:, :, i : i + 3, j : j + 2], w)
    want += b[None, :, None, None]
    np.testing.assert_allclose(reference(cap), want, rtol=1e-12, atol=1e-12)  # fp64 sums in another order
    with pytest.raises(ValueError, match="--shape: a 7×2 filter does not fit"):
        problem_from_op("conv2d", (1, 3, 5, 6, 4, 7, 2), "fp16", ["h100"])
