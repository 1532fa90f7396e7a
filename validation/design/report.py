"""Text and JSON views of a :class:`~validation.design.sweep.DesignResult`."""

from __future__ import annotations

import json
import math

from ..metrics import json_float
from .rule import format_rule, harness_rule
from .stats import Rate

__all__ = ["format_text", "format_json", "short_bug", "plot"]


def short_bug(label: str) -> str:
    """A mutant label without its default-looking parameters, for table columns."""
    return label.replace("(", " ").replace(")", "").replace("'", "").replace("=None", "").replace(", ", ",")


def _rate(rec: dict) -> str:
    return Rate(rec["failed"], rec["runs"]).format()


def _clean(x):
    if isinstance(x, float):
        return json_float(x)
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def format_json(result) -> str:
    """One JSON document: ``inputs``, ``records`` (one per validator and bug or ``none``, with
    ``validator, bug, runs, failed, rate`` and the interval), ``noise``, ``per_target``,
    ``exact``, ``smallest``, ``ranking``, ``harness_rule`` (:func:`validation.design.rule.harness_rule`)."""
    return json.dumps(_clean({**result.to_dict(), "harness_rule": harness_rule(result)}), indent=1, allow_nan=False)


def format_text(result) -> str:
    inp = result.inputs
    fmt = inp.get("format", "fp16")
    lines = ["fp16emu design: false alarms on correct kernels vs detection of injected bugs", ""]
    lines.append("computed from:")
    for t in inp["tests"]:
        lines.append(f"  test {t['label']}  (hw {t['hw']}, kernel {t['kernel']}, validation {t['validator']})")
        if t.get("gemm"):
            lines.append(f"    {t['gemm']}, {fmt} (run as the 1x1 forward convolution that computes it)")
    if fmt != "fp16":  # fp16 is what every earlier report assumed without saying
        lines.append(
            f"  format: {fmt} tensors and {fmt} outputs; the validation rounded to {fmt}, epsilonDiff in {fmt} ulps, "
            f"the functions' {fmt} limits"
        )
    lines.append(f"  seeds: noise model / fitted thresholds {inp['seeds_fit'][0]}..{inp['seeds_fit'][1]}, "
                 f"evaluation {inp['seeds_eval'][0]}..{inp['seeds_eval'][1]} (disjoint)")  # fmt: skip
    lines.append(f"  input generators: {', '.join(inp['generators'])}")
    lines.append(f"  rates: failed/runs [{inp['confidence']:.0%} {inp['interval']} interval]; "
                 f"recommended thresholds at false-alarm rate {inp['target_false_alarm_rate']:g}")  # fmt: skip
    if inp.get("untrustworthy_runs"):
        bad = ", ".join(f"{t}: {n}" for t, n in inp["untrustworthy_runs"].items())
        lines.append(f"  NOT TRUSTWORTHY (validation mostly zeros or constant inputs) in runs of: {bad}")
    lines.append("  validation functions:")
    lines += [f"    {d}" for d in inp["validators"]]
    lines.append("")
    lines.append("noise model (correct kernel; metric over seeds; analytic bounds max over seeds):")
    for n in result.noise:
        lines.append(f"  {n['target']}  K={n['K']}  inputs {n['generator']}")
        if "chains" in n:
            kd, ku = n["chains"]["kernel"]
            vd, vu = n["chains"]["validator"]
            lines.append(f"    kernel chain {kd} roundings of u={ku:.3g}; validator {vd} of u={vu:.3g}")
        lines.append(f"    {'metric':<17}{'min':>10}{'median':>10}{'max':>10}{'worst':>10}{'prob.':>10}{'unit':>10}"
                     f"{'threshold':>11}  est. false alarm")  # fmt: skip
        for m, v in n["metrics"].items():
            b = v.get("bounds", {})
            cells = [v["min"], v["median"], v["max"], b.get("worst"), b.get("probabilistic"), b.get("unit")]
            txt = "".join(f"{'-' if c is None else f'{c:.3g}':>10}" for c in cells)
            e = v["estimated"]
            lines.append(f"    {m:<17}{txt}{v['threshold']:>11.3g}  {e['failed']}/{e['runs']} "
                         f"[0,{e['ci_high']:.2f}] (target {v['target_rate']:.2g})")  # fmt: skip
    lines.append("")
    bugs = [b for b in dict.fromkeys(r["bug"] for r in result.records) if b != "none"]
    lines.append("false alarms (bug 'none') and detection per bug, over all tests and evaluation seeds:")
    for b in bugs:
        ex = next(e for e in result.exact if e["bug"] == b)
        lines.append(f"  {short_bug(b):<52} exact comparison detects {_rate(ex)}")
    for na in result.not_applicable:
        lines.append(f"  not applicable in {na['runs']} of {na['of']} runs: {short_bug(na['bug'])}: {na['why']}")
    lines.append("")
    for vf in dict.fromkeys(r["validator"] for r in result.records):
        recs = {r["bug"]: r for r in result.records if r["validator"] == vf}
        lines.append(f"  {vf}: false alarms {_rate(recs['none'])}")
        for b in bugs:
            if recs[b]["runs"]:
                lines.append(f"      {short_bug(b):<52} {_rate(recs[b])}")
    lines.append("")
    lines.append("detection by reduction length K (mean over bugs; false alarms):")
    ks = sorted({(p["K"], p["target"]) for p in result.per_target})
    for vf in dict.fromkeys(r["validator"] for r in result.records):
        cells = []
        for k, tgt in ks:
            rows = [p for p in result.per_target if p["validator"] == vf and p["target"] == tgt]
            det = [p["rate"] for p in rows if p["bug"] != "none" and p["runs"]]
            fa = next((p for p in rows if p["bug"] == "none"), None)
            d = f"{sum(det) / len(det):.2f}" if det else "-"
            name = tgt.split("CHECK_")[-1][:16]
            cells.append(f"{name} K={k}: {d} (fa {fa['failed'] if fa else 0}/{fa['runs'] if fa else 0})")
        lines.append(f"  {vf:<30} " + "  ".join(cells))
    lines.append("")
    lines.append(f"smallest bug detected (fraction of {fmt} outputs changed; relative change of an element):")
    for s in result.smallest:
        f, m = s["smallest_fraction"], s["smallest_rel_change"]
        ftxt = "none detected" if math.isinf(f) else f"{f:.3g}"
        mtxt = "" if math.isinf(m) else f", {m:.3g}"
        lines.append(f"  {s['validator']:<30} {ftxt}{mtxt}")
    lines.append("")
    lines.append("ranking (false-alarm rate above 5x the target ranks last; then mean detection):")
    for i, r in enumerate(result.ranking, 1):
        fa = "n/a" if r["false_alarm"] is None else f"{r['false_alarm']:.2f} (≤{r['false_alarm_ci_high']:.2f})"
        det = "n/a" if r["mean_detection"] is None or math.isnan(r["mean_detection"]) else f"{r['mean_detection']:.2f}"
        lines.append(f"  {i}. {r['validator']:<30} false alarms {fa}, mean detection {det} over {r['bugs']} bugs")
    if result.ranking:
        lines.append(f"best of the functions compared: {result.ranking[0]['validator']}")
    lines.append("")
    lines += format_rule(harness_rule(result))
    return "\n".join(lines)


def plot(result, path) -> None:
    """Two panels saved to ``path``: false-alarm rate vs mean detection per validation function
    (ROC-style, with the false-alarm interval as an error bar; labels of coinciding points
    stacked, not overlapping), and each test's maxRelDiff of the correct kernel over fit seeds per
    generator, with the recommended threshold. The title names the tests, hardware, kernels,
    validation functions and seeds."""
    from ..plots import new_figure, save

    inp = result.inputs
    tests = inp["tests"]
    fields = {
        "config": f"{len(tests)} tests: " + ", ".join(t["label"] for t in tests[:4]) + (" …" if len(tests) > 4 else ""),
        "hardware": ", ".join(dict.fromkeys(t["hw"] for t in tests)) or "-",
        "kernel": ", ".join(dict.fromkeys(str(t["kernel"]) for t in tests)) or "-",
        "validator": f"{len(inp['validators'])} validation functions compared (panel 1)",
        "inputs": (
            f"seeds fit {inp['seeds_fit'][0]}..{inp['seeds_fit'][1]}, eval {inp['seeds_eval'][0]}..{inp['seeds_eval'][1]}; "
            f"generators {', '.join(inp['generators'])}"
        ),
    }
    fig, axes = new_figure(fields, ncols=2, width=6.5, height=4.6)
    ax1, ax2 = axes[0]
    placed: list[tuple[float, float]] = []
    for r in sorted(result.ranking, key=lambda r: (r["false_alarm"] or 0.0, -(r["mean_detection"] or 0.0))):
        fa = r["false_alarm"] or 0.0
        det = r["mean_detection"]
        if det is None or math.isnan(det):
            continue
        ax1.errorbar(fa, det, xerr=[[0], [max(0.0, r["false_alarm_ci_high"] - fa)]], fmt="o", capsize=3)
        near = sum(1 for x, y in placed if abs(x - fa) < 0.06 and abs(y - det) < 0.05)
        placed.append((fa, det))
        ax1.annotate(r["validator"], (fa, det), fontsize=6, xytext=(5, 2 - 8 * near), textcoords="offset points")
    ax1.set_xlabel("false-alarm rate on correct kernels (bar: 95% upper bound)")
    ax1.set_ylabel("mean detection rate over bug mutants")
    ax1.set_xlim(-0.02, 1.0)
    ax1.set_ylim(0, 1.05)
    ax1.set_title("validation functions", fontsize=9)
    for i, n in enumerate(result.noise):
        m = n["metrics"]["max_rel_diff"]
        ax2.plot([i, i], [max(m["min"], 1e-9), max(m["max"], 1e-9)], "-", color="C0")
        ax2.plot(i, max(m["threshold"], 1e-9), "_", color="C3", markersize=14)
        if "bounds" in m:
            ax2.plot(i, max(m["bounds"]["unit"], 1e-9), "v", color="C2")
    ax2.set_yscale("log")
    step = max(1, -(-len(result.noise) // 24))  # at most 24 tick labels: more would overlap
    ticks = list(range(0, len(result.noise), step))
    ax2.set_xticks(ticks)
    ax2.set_xticklabels(
        [f"K={result.noise[i]['K']}\n{result.noise[i]['generator']}" for i in ticks], fontsize=6, rotation=90
    )
    ax2.set_ylabel("maxRelDiff of the correct kernel (0 drawn at 1e-9)")
    ax2.set_title("noise: fit-seed range (blue), threshold (red), unit bound (green)", fontsize=9)
    save(fig, path)
