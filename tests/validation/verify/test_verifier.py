"""validation.verify: flags and presets, and the 2022 study's verifier line (format, parse, and
the round trip on every measured line of ``../shared/reference/fp16_study_raw_results``)."""

import json
import math

import numpy as np
import pytest

from validation.metrics import STABLE_KEYS, compare
from validation.verify import STUDY_RUN_SETS, resolve_study_quirks
from validation.verify.presets import (
    MLU_OP_CLASSES,
    PRESET_NAMES,
    Check,
    StudyLine,
    StudyTail,
    Thresholds,
    evaluate,
    format_flags,
    format_study_line,
    parse_study_line,
    preset,
    study_line,
    study_line_of,
    verdict,
    verify,
)

F16 = np.float16


from reference_data import require  # noqa: E402  (registered by conftest.py)


def f16(*xs):
    return np.array(xs, dtype=F16)


# ------------------------------------------------------------------------------------------------
# A small GEMM as test data: a correct fp16 kernel and broken ones


@pytest.fixture(scope="module")
def gemm():
    """fp16 inputs, an fp64 validation cast to float (the Aug-2022 CPU path), and kernels."""
    rng = np.random.default_rng(7)
    m, kdim, n = 48, 256, 40
    a = rng.uniform(-1, 1, (m, kdim)).astype(F16)
    b = rng.uniform(-1, 1, (kdim, n)).astype(F16)
    validation = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    correct = (a.astype(np.float32) @ b.astype(np.float32)).astype(F16)  # fp32 accumulate
    dropped = (a[:, 8:].astype(np.float32) @ b[8:].astype(np.float32)).astype(F16)  # lost K block
    fp16_acc = np.zeros((m, n), F16)
    for i in range(kdim):  # an fp16 accumulator: rounds after every term
        fp16_acc = (fp16_acc.astype(np.float32)
                    + np.outer(a[:, i], b[i]).astype(np.float32)).astype(F16)  # fmt: skip
    return {"validation": validation, "correct": correct, "dropped": dropped, "fp16_acc": fp16_acc}


def test_rocmlir_passes_a_correct_kernel_and_flags_broken_ones(gemm):
    v = gemm["validation"]
    ok = verify(v, gemm["correct"], "rocmlir")
    assert ok.format() == "[1 1 1]" and ok.passed and ok.exit_code == 0
    assert [c.label for c in ok.checks] == ["RMS", "absDiff", "relDiff"]
    assert [c.limit for c in ok.checks] == [3e-5, 100.0, 100.0]
    assert ok.result.round_validation == "fp16"
    dropped = verify(v, gemm["dropped"], "rocmlir")
    assert dropped.flags[0] == 0 and not dropped.passed and dropped.exit_code == 1
    assert verify(v, gemm["fp16_acc"], "rocmlir").flags[0] == 0


def test_rocmlir_fails_every_flag_on_nan(gemm):
    k = gemm["correct"].copy()
    k[3, 4] = np.nan
    r = verify(gemm["validation"], k, "rocmlir")
    assert r.format() == "[0 0 0]"
    assert "nonfinite mismatches: 1" in r.report()


def test_rocmlir_limits_per_type_and_overrides():
    th = preset("rocmlir", "fp32")
    assert [c.limit for c in th.checks] == [3e-5, 100.0, 1e-6]
    assert th.round_validation == "fp32"
    th = preset("rocmlir", "fp16", limits={"rms": 7e-4})  # the bwd regression tests (§3.2)
    assert th.checks[0].limit == 7e-4
    with pytest.raises(ValueError, match="has no check on"):
        preset("rocmlir", limits={"diff1": 1.0})


def test_rocmlir_2022_prints_one_flag(gemm):
    v = gemm["validation"]
    assert verify(v, gemm["correct"], "rocmlir-2022").format() == "[1]"
    assert verify(v, gemm["dropped"], "rocmlir-2022").format() == "[0]"
    # the magnitude rule: |v| <= fp16(0.001) never fails, however large the relative error
    assert verify(f16(0.001, 1.0), f16(0.5, 1.0), "rocmlir-2022").format() == "[1]"
    assert verify(f16(0.0011, 1.0), f16(0.5, 1.0), "rocmlir-2022").format() == "[0]"
    # 25 %: 4 → 3 is exactly 0.25 (passes), 4 → 2.998 is not
    assert verify(f16(4.0), f16(3.0), "rocmlir-2022").format() == "[1]"
    assert verify(f16(4.0), f16(2.998), "rocmlir-2022").format() == "[0]"
    # a NaN quotient does not fail the old verifier (C's `>` is false for NaN)
    assert verify(f16(np.inf), f16(65504.0), "rocmlir-2022").format() == "[1]"
    assert verify(f16(65504.0), f16(np.inf), "rocmlir-2022").format() == "[0]"
    th = preset("rocmlir-2022", "fp32")
    assert th.checks[0].limit == float(np.float32(1e-6))


def test_study_2022_prints_the_line():
    v = np.array([0.25, 1.0], np.float32)
    k = f16(0.25 + 2**-12, 1.0)
    verdict = verify(v, k, "study-2022", run_set="fair_1")
    # RMS = 2**-12 / (max magnitude 1.0 * sqrt(2)) = 1.73e-4
    assert verdict.format() == ("2          (1 0 1 0) 2.0 (0.2500000000 0.2502441406)  0.000244  "
                                "0.000122  9.8e-04  9.8e-04  4.9e-04  1.7e-04")  # fmt: skip
    assert verdict.format_flags() == "[1]"  # maxEpsilonDiff 2 <= 2, the study's pass rule
    verdict = verify(v, k, "study-2022")  # fair_3: the true ulp, format B
    assert verdict.format() == ("2          (1 1 0 0) 1.0 (0.2500000000 0.2502441406) 0.000244 "
                                "0.000122 9.8e-04 9.8e-04 (0.2500000000 0.2502441406) 4.9e-04 "
                                "1.7e-04")  # fmt: skip
    assert verdict.to_dict()["study_line"] == verdict.format()
    with pytest.raises(ValueError, match="fp16 only"):
        preset("study-2022", "fp32")
    with pytest.raises(ValueError, match="fair_1, fair_2, fair_3, fair_rand0"):
        preset("study-2022", run_set="fair_4")


def test_study_sign_bug_of_fair_1():
    v, k = f16(-0.5, 0.25), f16(-0.5 - 2**-10, 0.25)
    line1 = study_line(compare(v, k, study_quirks=STUDY_RUN_SETS["fair_1"]))
    line2 = study_line(compare(v, k, study_quirks=STUDY_RUN_SETS["fair_2"]))
    assert line1.max_rel_diff_old == 0.0  # fair_1: only v > 1.0004e-3 counts
    assert line2.max_rel_diff_old == 2**-10 / 0.5
    assert (line2.val_at_max_rel_old, line2.kern_at_max_rel_old) == (-0.5, -0.5 - 2**-10)
    assert line1.mismatches(line2) == ["max_rel_diff_old"]  # A has no pair to compare


def test_mlu_ops_classes():
    v = np.linspace(1, 2, 200).astype(F16)
    k = v.copy()
    k[::10] = (v[::10].astype(np.float32) * (1 + 2e-3)).astype(F16)  # diff1 ~ 2e-4
    assert verify(v, k, "mlu-ops").format() == "[1 1]"
    assert [c.metric for c in preset("mlu-ops").checks] == ["diff1", "diff2"]
    assert preset("mlu-ops", "fp32").checks[0].limit == 1e-5
    assert verify(v, k, "mlu-ops", dtype_hint="fp32").format() == "[0 0]"
    assert verify(v, k, "mlu-ops", op_class="arithmetic").format() == "[0]"
    assert verify(v, v, "mlu-ops", op_class="io").format() == "[1]"
    for cls in ("reduction", "activation", "composite", "atomic"):
        assert [c.limit for c in preset("mlu-ops", op_class=cls).checks] == [3e-3, 3e-3]
    with pytest.raises(ValueError, match="valid classes: " + ", ".join(MLU_OP_CLASSES)):
        preset("mlu-ops", op_class="pooling")


def test_mlu_ops_diff4_rule():
    base = np.arange(1, 151, dtype=np.float32).astype(F16)
    up = (base.astype(np.float32) + 0.5).astype(F16)
    # 150 distinct mismatches, all with k > v: one-sided, so diff4 fails (diff1 fails too)
    assert verify(base, up, "mlu-ops", diff4=True).flags[2] == 0
    mixed = up.copy()
    mixed[::2] = (base[::2].astype(np.float32) - 0.5).astype(F16)
    assert verify(base, mixed, "mlu-ops", diff4=True).flags[2] == 1
    assert verify(base[:99], up[:99], "mlu-ops", diff4=True).flags[2] == 1  # < 100: unused


def test_torch_preset():
    v = f16(1.0, 2.0, 100.0)
    k = f16(1.0, 2.0 + 2**-9, 100.0 + 2**-3)
    assert verify(v, k, "torch").format() == "[0]"  # 0.125 > 1e-5 + 1e-3 * 100
    assert verify(v, k, "torch", rtol=2e-3).format() == "[1]"
    assert preset("torch", "bf16").allclose == (1.6e-2, 1e-5)
    nan = f16(np.nan, 1.0)
    assert verify(nan, nan, "torch").format() == "[0]"
    assert verify(nan, nan, "torch", equal_nan=True).format() == "[1]"
    with pytest.raises(ValueError, match="torch preset only"):
        preset("rocmlir", rtol=1e-3)


def test_miopen_preset(gemm):
    assert [c.limit for c in preset("miopen").checks] == [8.2e-3]
    assert preset("miopen", "fp32").checks[0].limit == 1.5e-6
    assert preset("miopen", "bf16").checks[0].limit == pytest.approx(8.2e-3 * 8)
    assert verify(gemm["validation"], gemm["correct"], "miopen").format() == "[1]"
    z = np.zeros(10, F16)
    assert verify(z, z, "miopen").format() == "[1]"  # MIOpen's DBL_MIN guard: RMS 0, not NaN


def test_unknown_preset_lists_the_valid_names():
    with pytest.raises(ValueError) as err:
        preset("rocm")
    for name in PRESET_NAMES:
        assert name in str(err.value)


# ------------------------------------------------------------------------------------------------
# Custom thresholds, flags, JSON


def test_custom_thresholds_print_flags_in_order():
    r = compare(f16(1.0, 2.0, 0.5, -3.0), f16(1.0, 2.0 + 2**-9, 0.5, -3.0 - 2**-8))
    th = Thresholds.from_mapping({"max_epsilon_diff": 2, "max_abs_diff": 1e-3, "n_eps_ge2": 5})
    v = evaluate(r, th)
    assert v.format() == "[1 0 1]" and v.flags == (1, 0, 1)
    assert [c.value for c in v.checks] == [2.0, 2**-8, 1.0]
    th = Thresholds(checks=[("rms", 1.0, "RMS"), Check("diff3", 0.1)])
    assert evaluate(r, th).format() == "[1 1]"
    assert format_flags([True, False, 1]) == "[1 0 1]"
    with pytest.raises(ValueError, match="valid metrics"):
        Check("maxAbs", 1.0)
    with pytest.raises(ValueError, match="at least one check"):
        Thresholds(checks=())


def test_verdict_on_a_result_computed_beforehand():
    v = np.ones(10_000, np.float32)
    k = v.astype(F16)
    k[17] = 1.0 + 2**-10  # RMS = 2**-10 / (100 * (1 + 2**-10)) < 3e-5
    with pytest.raises(ValueError, match="validation rounding None"):
        verdict(compare(v, k), preset="rocmlir")  # rocMLIR rounds the validation first
    r = compare(v, k, **preset("rocmlir").compare_options())
    assert verdict(r, preset="rocmlir").format() == "[1 1 1]"
    both = verdict(r, preset="rocmlir", thresholds={"rms": 1e-6, "max_epsilon_diff": 0})
    assert both.format() == "[0 1 1 0]"  # limits replaced, then extra checks appended
    assert verdict(r, thresholds={"n_eps1": 1}).format() == "[1]"
    assert verdict(compare(f16(1.0), f16(1.0)), preset="rocmlir").format() == "[1 1 1]"
    with pytest.raises(ValueError, match="study run set None"):
        verdict(r, preset="study-2022")
    with pytest.raises(ValueError, match="preset, thresholds"):
        verdict(r)


def test_nonfinite_policy():
    r = compare(f16(1.0, np.inf), f16(1.0, 65504.0))
    strict = Thresholds.from_mapping({"max_abs_diff": 1.0})
    assert evaluate(r, strict).format() == "[0]"  # an unequal infinity fails every flag
    lenient = Thresholds.from_mapping({"max_abs_diff": 1.0}, nonfinite="metric")
    assert evaluate(r, lenient).format() == "[1]"  # the finite metric alone is 0
    with pytest.raises(ValueError, match="'fail' or 'metric'"):
        Thresholds.from_mapping({"rms": 1.0}, nonfinite="ignore")


def test_verdict_json_has_the_stable_keys(gemm):
    d = verify(gemm["validation"], gemm["dropped"], "rocmlir").to_dict()
    assert tuple(d)[: len(STABLE_KEYS)] == STABLE_KEYS
    assert d["flags"][0] == 0 and d["verdict"] == "fail" and d["preset"] == "rocmlir"
    assert [c["label"] for c in d["checks"]] == ["RMS", "absDiff", "relDiff"]
    json.dumps(d, allow_nan=False)
    text = verify(gemm["validation"], gemm["dropped"], "rocmlir").format_text()
    lines = text.splitlines()
    assert lines[0].startswith("rms (RMS): ") and "> 3e-05 FAIL  [" in lines[0] and "normalised by N" in lines[0]
    assert "rocmlir prints: [0 1 0] (one flag per check, 1 = pass)" in lines and lines[-1].startswith(
        "FAIL (rocmlir): rms "
    )


# ------------------------------------------------------------------------------------------------
# The study line: parse, format, round trip

_B_LINE = ("25690112   (25621205 62923 5984 0) 896.0 (-0.0000211000 -0.0000745058) 0.031250 "
           "0.000004 1.2e+01 7.7e-02 (0.0010471344 0.0011281967) 4.2e-06 4.3e-07 1 0 0 0 0 1 0 "
           "fwd conv2d_harness_cpu_verifier_kyxc_nhwc_nhwk_f16_E2E_f16 (1 of 107)")  # fmt: skip
_A_LINE = ("6422528    (6418006 4494 28 0) inf (65504.0000000000 inf)  inf  inf  inf  inf  -nan  "
           "-nan 0 0 0 0 1 0 1 fwd Resnet50_validation_nhwc_CHECK_NHWC_1_f16 "
           "(104 of 107)")  # fmt: skip


def test_parse_format_b():
    s = parse_study_line(_B_LINE + "\n")
    assert s.line_format == "B"
    assert (s.n, s.n_exact, s.n_eps1, s.n_eps_ge2, s.n_eps_other) == (25690112, 25621205, 62923,
                                                                      5984, 0)  # fmt: skip
    assert (s.max_epsilon_diff, s.val_at_max_eps, s.kern_at_max_eps) == (896.0, -0.0000211,
                                                                         -0.0000745058)  # fmt: skip
    assert (s.max_abs_diff, s.ave_abs_diff, s.max_rel_diff, s.max_rel_diff_old) == (0.03125, 0.000004, 12.0, 0.077)
    assert (s.val_at_max_rel_old, s.kern_at_max_rel_old) == (0.0010471344, 0.0011281967)
    assert (s.ave_rel_diff, s.rms) == (4.2e-06, 4.3e-07)
    assert s.tail == StudyTail(
        (1, 0, 0, 0, 0, 1, 0), "fwd", "conv2d_harness_cpu_verifier_kyxc_nhwc_nhwk_f16_E2E_f16", 1, 107
    )
    assert format_study_line(s) == _B_LINE


def test_parse_format_a_with_inf_and_negative_nan():
    s = parse_study_line(_A_LINE)
    assert s.line_format == "A" and s.val_at_max_rel_old is None
    assert math.isinf(s.max_epsilon_diff) and math.isinf(s.kern_at_max_eps)
    assert math.isnan(s.rms) and math.copysign(1.0, s.rms) == -1.0
    assert format_study_line(s) == _A_LINE
    assert format_study_line(s, tail=None).endswith("(104 of 107)")  # its own tail by default
    bare = StudyLine(**{**s.__dict__, "tail": None})
    assert format_study_line(bare) == _A_LINE[: _A_LINE.index("  -nan  -nan") + 12]


def test_parse_rejects_other_text():
    for bad in (
        "",
        "hello",
        _B_LINE.replace("(1 of 107)", "(1 of)"),
        _B_LINE.replace(" 896.0 ", " 896 "),
        _A_LINE.replace("  inf  inf", " inf inf", 1),
    ):
        with pytest.raises(ValueError):
            parse_study_line(bad)


def test_format_study_line_needs_study_mode():
    with pytest.raises(ValueError, match="study_quirks"):
        format_study_line(compare(f16(1.0), f16(1.0)))
    r = compare(f16(1.0), f16(1.0), study_quirks=STUDY_RUN_SETS["fair_3"])
    assert format_study_line(r, line_format="A").count("(") == 2
    tail = StudyTail((0, 1, 1, 0, 1, 0, 1), "fwd", "t", 3, 107)
    assert format_study_line(r, tail=tail).endswith(" 0 1 1 0 1 0 1 fwd t (3 of 107)")


def _raw_files():
    root = require("fp16_study_raw_results")
    files = sorted(root.glob("*/*.txt"))
    if not files:
        pytest.skip(f"no raw result files under {root}")
    return files


def test_round_trip_on_every_measured_line():
    """format(parse(line)) == line for all 13,268 lines of the 124 raw files (both formats)."""
    n_lines = 0
    formats = set()
    for path in _raw_files():
        run_set = path.parent.name.removeprefix("verify_results_").rsplit("_", 1)[0]
        expected_format = STUDY_RUN_SETS[run_set].line_format
        for line in path.read_text().splitlines():
            parsed = parse_study_line(line)
            assert parsed.line_format == expected_format, (path.name, line)
            assert format_study_line(parsed) == line, (path.name, line)
            n_lines += 1
            formats.add(parsed.line_format)
    assert n_lines == 13268 and formats == {"A", "B"}


def test_study_pass_rates_reproduce():
    """The study's Underflow/Overflow table (MI200, fair_1, three combinations): maxEpsilonDiff
    <= 2 in 89/321 (r0), 321/321 (r4), 314/321 (r5) pairs (study_results_2022.md §4)."""
    limit = preset("study-2022").checks[0].limit
    root = require("fp16_study_raw_results", "verify_results_fair_1_MI200")
    combos = ("nonxdlops_pv", "xdlops_pv", "xdlops_pv-with-gpu")
    for rng, expected in (("rand0", 89), ("rand4", 321), ("rand5", 314)):
        passed = 0
        for combo in combos:
            for line in (root / f"verify_f16_{combo}_{rng}.txt").read_text().splitlines():
                passed += parse_study_line(line).max_epsilon_diff <= limit
        assert passed == expected, rng


# --- the study line's fast path ------------------------------------------------------------------


def _adversarial_pair(rng, n, k_dtype):
    """A validation (fp32) and kernel pair mixing equal elements, one-ulp and far differences,
    NaN, ±inf, signed zeros, subnormals, fp16 overflow, rounding ties and values near the
    study's 1.0004e-3 relOld threshold."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _adversarial_values(rng, n, k_dtype)


def _adversarial_values(rng, n, k_dtype):
    v = rng.standard_normal(n).astype(np.float32) * np.float32(4.0) ** rng.integers(-6, 6, n).astype(np.float32)
    v16 = v.astype(np.float16)
    k = v16.copy()
    pick = rng.random(n)
    ulp = np.spacing(np.abs(v16)).astype(np.float16)
    k = np.where(pick < 0.15, k + ulp, k)
    k = np.where((pick >= 0.15) & (pick < 0.2), -k, k)
    k = np.where((pick >= 0.2) & (pick < 0.23), (k.astype(np.float32) * 3).astype(np.float16), k)
    specials32 = np.array(
        [
            np.nan,
            np.inf,
            -np.inf,
            0.0,
            -0.0,
            6e-8,
            -3e-8,
            1e-5,
            65504.0,
            65520.0,
            70000.0,
            1.0004e-3,
            -1.0004e-3,
            1.0e-3,
            1 + 2.0**-11,
            2048 + 1.0,
        ],
        np.float32,
    )
    for arr in (v, k):
        at = rng.random(n) < 0.05
        arr[at] = specials32[rng.integers(0, specials32.size, int(at.sum()))].astype(arr.dtype)
    return v, k.astype(k_dtype)


@pytest.mark.parametrize("run_set", ["fair_1", "fair_2", "fair_3", "fair_rand0"])
@pytest.mark.parametrize("k_dtype", [np.float16, np.float32])
@pytest.mark.parametrize("seed", range(6))
def test_study_line_of_equals_the_full_comparison(run_set, k_dtype, seed):
    from validation.verify.study2022 import compare_differing

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5000))
    v, k = _adversarial_pair(rng, n, k_dtype)
    if seed == 0:  # all equal but one
        with np.errstate(over="ignore"):
            k = v.astype(np.float16).astype(k_dtype)
        k[n // 2] = np.float16(1.5) if v[n // 2] != 1.5 else np.float16(2.0)
    if seed == 1:
        v = v.astype(np.float64)  # a float64 validation goes through (float) first
    if seed == 2:  # finite, and the largest magnitude (the RMS denominator) on an equal element
        v = rng.uniform(-2, 2, n).astype(np.float32)
        k = v.astype(np.float16)
        k[::7] += np.float16(2.0**-9)
        v[n // 3], k[n // 3] = 1000.0, 1000.0
        k = k.astype(k_dtype)
    want = study_line(compare(v, k, dtype_hint="fp16", study_quirks=resolve_study_quirks(run_set), chunk=257))
    got = study_line_of(v, k, run_set)
    assert format_study_line(got) == format_study_line(want)
    assert got.fields() == want.fields()
    # chunk boundaries of the fast path
    got_small = study_line(
        compare_differing(
            v.reshape(-1, 1) if n % 2 else v,
            k.reshape(-1, 1) if n % 2 else k,
            study_quirks=resolve_study_quirks(run_set),
            chunk=97,
        )
    )
    assert got_small.fields() == want.fields()


def test_a_diff4_verifier_refuses_a_comparison_without_distinct_pairs():
    base = np.arange(1, 151, dtype=np.float32).astype(F16)
    up = (base.astype(np.float32) + 0.5).astype(F16)
    with_diff4 = preset("mlu-ops", diff4=True)
    assert with_diff4.reads_diff4 and not preset("mlu-ops").reads_diff4
    fast = compare(base, up, **with_diff4.compare_options(), distinct_pairs=False)
    with pytest.raises(ValueError, match="distinct mismatch pairs"):
        with_diff4.check_result(fast)
    preset("mlu-ops").check_result(fast)  # diff1/diff2 only: the pairs are not needed
