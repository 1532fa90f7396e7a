"""The rule a harness can use, from a design sweep: thresholds per test and as a function of K, in
the terms of rocMLIR's verifier flags, ``torch.testing.assert_close`` and MIOpen's tolerance; and
the number of runs a false-alarm target needs.

Per test (and input generator), the sweep fitted thresholds on the correct kernel's metrics over its
fit seeds (:func:`validation.design.sweep.design`): RMS, maxAbsDiff and maxRelDiff, each at the target
false-alarm rate shared among the three. They are written as

* rocMLIR's verifier flags: ``-RMS_threshold``, ``-absDiff_threshold``, ``-relDiff_threshold``
  (the ``rocmlir`` preset's three checks, :mod:`validation.verify.presets`);
* ``torch.testing.assert_close(actual, expected, rtol=0, atol=T)``: T the maxAbsDiff threshold
  (an element passes when ``|actual − expected| ≤ atol``; a relative threshold fitted on the maximum
  quotient is no per-element ``rtol``, which assert_close adds to ``atol``, so rtol is 0);
* MIOpen's tolerance: its ``rms_range`` (RMS normalised by the largest magnitude) against the
  fitted ``miopen_rms`` threshold (MIOpenDriver's ``GetTolerance`` gives fp16 8.2e-3).

As a function of K: the rounding noise of a sum of K products grows about as √K, so each threshold
is written ``c · √K`` with c the largest ``threshold / √K`` over the sweep's tests (a rule that
covers every test swept; extrapolating beyond the K swept is a guess).

Runs needed: with zero false alarms in n runs, the 95 % upper bound on the false-alarm rate is
about 3/n (the rule of three; Clopper–Pearson gives 1 − 0.05^(1/n)). A target rate r therefore
needs n ≥ 3/r runs per test without a false alarm; a sweep with fewer fit seeds cannot support its
thresholds at r, and the rule says so.
"""

from __future__ import annotations

import math

__all__ = ["RULE_METRICS", "runs_needed", "harness_rule", "format_rule"]

#: sweep metric → (rocMLIR flag, MIOpen/torch role)
RULE_METRICS = {
    "rms": "-RMS_threshold",
    "max_abs_diff": "-absDiff_threshold",
    "max_rel_diff": "-relDiff_threshold",
}


def runs_needed(rate: float) -> int:
    """Runs with no false alarm that bound the false-alarm rate by ``rate`` at 95 %: the rule of
    three, n = ⌈3 / rate⌉ (the exact one-sided bound, (1 − rate)^n ≤ 0.05, needs a run or two fewer)."""
    if not 0 < rate < 1:
        raise ValueError(f"rate: {rate!r} is not in (0, 1)")
    return math.ceil(3.0 / rate - 1e-9)


def _finite(x) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def harness_rule(result) -> dict:
    """The rule (module docstring) of a :class:`validation.design.sweep.DesignResult`:
    ``per_test`` (one entry per test and generator: K, the rocMLIR flags, assert_close's rtol and
    atol, MIOpen's RMS tolerance), ``of_k`` (the coefficients c of ``c · √K``), ``runs_needed``,
    ``fit_runs`` and ``warning`` (None when the sweep had enough runs)."""
    inp = result.inputs
    rate = float(inp["target_false_alarm_rate"])
    need = runs_needed(rate)
    fit_runs = min((len(n.get("seeds", ())) for n in result.noise), default=0)
    per_test = []
    coeff: dict[str, float] = {}
    for n in result.noise:
        m = n["metrics"]
        th = {k: _finite(m[k]["threshold"]) for k in (*RULE_METRICS, "miopen_rms") if k in m}
        per_test.append(
            {
                "test": n["target"],
                "generator": n["generator"],
                "K": n["K"],
                "rocmlir_flags": {RULE_METRICS[k]: th.get(k) for k in RULE_METRICS},
                "assert_close": {"rtol": 0.0, "atol": th.get("max_abs_diff")},
                "miopen_rms_tolerance": th.get("miopen_rms"),
            }
        )
        for k, v in th.items():
            if v is not None and n["K"]:
                coeff[k] = max(coeff.get(k, 0.0), v / math.sqrt(n["K"]))
    warning = None
    if fit_runs < need:
        warning = (
            f"the thresholds were fitted on {fit_runs} run{'s' if fit_runs != 1 else ''} per test; supporting a "
            f"false-alarm rate of {rate:g} at 95 % needs at least {need} runs without a false alarm (zero "
            f"failures in n runs bound the rate at about 3/n): rerun with --seeds {need}, or read these "
            f"thresholds as a sketch"
        )
    return {
        "target_false_alarm_rate": rate,
        "runs_needed": need,
        "fit_runs": fit_runs,
        "warning": warning,
        "per_test": per_test,
        "of_k": {
            "form": "c * sqrt(K)",
            "c": coeff,
            "K_swept": sorted({n["K"] for n in result.noise}),
        },
    }


def _g(x) -> str:
    return "-" if x is None else f"{x:.3g}"


def format_rule(rule: dict) -> list[str]:
    """The rule's text lines (the end of ``fp16emu design``'s report)."""
    lines = [
        f"harness rule (thresholds at a false-alarm rate of {rule['target_false_alarm_rate']:g}, fitted per test "
        f"on {rule['fit_runs']} run{'s' if rule['fit_runs'] != 1 else ''}):"
    ]
    for t in rule["per_test"]:
        flags = " ".join(f"{f}={_g(v)}" for f, v in t["rocmlir_flags"].items())
        lines.append(f"  {t['test']} (K={t['K']}, inputs {t['generator']}):")
        lines.append(f"    rocMLIR verifier: {flags}")
        lines.append(f"    torch.testing.assert_close(actual, expected, rtol=0, atol={_g(t['assert_close']['atol'])})")
        lines.append(f"    MIOpen tolerance (rms_range): {_g(t['miopen_rms_tolerance'])}")
    c = rule["of_k"]["c"]
    if c:
        ks = ", ".join(map(str, rule["of_k"]["K_swept"]))
        lines.append(f"  as a function of K (covers every test swept, K = {ks}; beyond them a guess):")
        parts = [f"{RULE_METRICS.get(k, 'MIOpen rms_range')} = {v:.3g}·√K" for k, v in c.items()]
        lines.append("    " + ", ".join(parts))
        if "max_abs_diff" in c:
            lines.append(f"    assert_close(rtol=0, atol={c['max_abs_diff']:.3g}·√K)")
    lines.append(
        f"  runs needed: {rule['runs_needed']} per test without a false alarm support a rate of "
        f"{rule['target_false_alarm_rate']:g} at 95 % (3/n)"
    )
    if rule["warning"]:
        lines.append(f"  WARNING: {rule['warning']}")
    return lines
