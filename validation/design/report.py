"""Text and JSON views of a :class:`~validation.design.sweep.DesignResult`."""

from __future__ import annotations

import json
import math

from ..metrics import json_float
from .stats import Rate

__all__ = ["format_text", "format_json", "short_bug"]


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
    ``exact``, ``smallest``, ``ranking``."""
    return json.dumps(_clean(result.to_dict()), indent=1, allow_nan=False)


def format_text(result) -> str:
    inp = result.inputs
    lines = ["fp16emu design: false alarms on correct kernels vs detection of injected bugs", ""]
    lines.append("computed from:")
    for t in inp["tests"]:
        lines.append(f"  test {t['label']}  (hw {t['hw']}, kernel {t['kernel']}, validation {t['validator']})")
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
            cells.append(f"K={k}: {d} (fa {fa['failed'] if fa else 0}/{fa['runs'] if fa else 0})")
        lines.append(f"  {vf:<30} " + "  ".join(cells))
    lines.append("")
    lines.append("smallest bug detected (fraction of fp16 outputs changed; relative change of an element):")
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
        lines.append(f"recommendation: {result.ranking[0]['validator']}")
    return "\n".join(lines)
