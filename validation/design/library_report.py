"""The reports of a library tolerance design (:func:`validation.design.tolerance.design_library`):
text, JSON (``rule``, ``schedules``, ``mutants``, ``rules``, ``check``) and a plot of every run's
error against each rule's threshold."""

from __future__ import annotations

import numpy as np

from .library import problem_json
from .mutants import LIBRARY_MUTANTS
from .tolerance import LibraryDesign

__all__ = ["design_json", "design_text", "design_plot"]


def _max_err(d: LibraryDesign, run) -> float:
    e = run.error(d.refs[run.operands])
    return float(e.max()) if e.size else 0.0


def design_json(d: LibraryDesign, check: dict | None = None) -> dict:
    rtol, atol = d.recommended
    rec = next(r for r in d.rules if r.name == "recommended")
    mutants = []
    for m in d.mutant_names():
        rate = d.detection(rec, m)
        runs = [r for r in d.mutant_runs if r.mutant == m]
        mutants.append(
            {
                "name": m,
                "bug": LIBRARY_MUTANTS[m].bug,
                "source": LIBRARY_MUTANTS[m].source,
                "detected": rate.failed == rate.runs,
                "detection": rate.to_dict(),
                "max_abs_error": max(_max_err(d, r) for r in runs),
            }
        )
    rules = []
    for rule in d.rules:
        rules.append(
            {
                "name": rule.name,
                "text": rule.text,
                "rtol": rule.rtol,
                "atol": rule.atol,
                "note": rule.note or None,
                "false_alarms": d.false_alarms(rule).to_dict(),
                "detection": {m: d.detection(rule, m).to_dict() for m in d.mutant_names()},
            }
        )
    errs = [_max_err(d, r) for r in d.legal]
    out = {
        **problem_json(d.problem),
        "rule": {"rtol": rtol, "atol": atol},
        "rule_form": "torch.testing.assert_close(out, ref, rtol=rtol, atol=atol), ref the exact fp64 result",
        "identified": d.identified,
        "schedules": {
            "count": len(d.schedules),
            "total": d.total_schedules,
            "sampled": d.total_schedules > len(d.schedules),
            "which": [c.describe() for c in d.schedules],
        },
        "operand_sets": d.operand_labels,
        "legal_max_abs_error": {"min": min(errs), "max": max(errs), "median": float(np.median(errs))},
        "mutants": mutants,
        "not_applicable": [{"name": k, "why": v} for k, v in d.not_applicable.items()],
        "rules": rules,
        "notes": d.notes,
        "seconds": round(d.seconds, 3),
    }
    if check is not None:
        out["check"] = check
    return out


def design_text(d: LibraryDesign, check: dict | None = None) -> str:
    p = d.problem
    rtol, atol = d.recommended
    errs = [_max_err(d, r) for r in d.legal]
    lines = [
        f"design {p.cap.path}: {p.describe()}",
        f"  GPUs {', '.join(p.gpus)} (units {', '.join(p.units)}); K = {p.K}; "
        f"{len(d.schedules)} legal schedules of {d.total_schedules} on {len(d.refs)} operand sets; "
        f"errors against the exact fp64 result; {d.seconds:.1f} s",
    ]
    if d.identified:
        lines.append(f"  the capture's own schedule (pinned): {d.identified}")
    lines.extend(f"  note: {n}" for n in d.notes)
    lines.append(
        f"legal schedules: max|out − ref| from {min(errs):.3g} to {max(errs):.3g} (median {np.median(errs):.3g})"
    )
    for c in d.schedules[:6]:
        lines.append(f"  - {c.describe()}")
    if len(d.schedules) > 6:
        lines.append(f"  … and {len(d.schedules) - 6} more (--format json lists them)")
    lines.append("recommended rule:")
    lines.append(
        f"  torch.testing.assert_close(out, ref, rtol={rtol:.3g}, atol={atol:.3g})  # ref: the exact (fp64) result"
    )
    names = d.mutant_names()
    lines.append("mutants (planted in legal schedules, each on every operand set):")
    rec = next(r for r in d.rules if r.name == "recommended")
    for m in names:
        runs = [r for r in d.mutant_runs if r.mutant == m]
        rate = d.detection(rec, m)
        lines.append(
            f"  {m:<19} {LIBRARY_MUTANTS[m].bug} ({LIBRARY_MUTANTS[m].source}); max|out − ref| "
            f"{max(_max_err(d, r) for r in runs):.3g}; recommended rule detects {rate.format()}"
        )
    for m, why in d.not_applicable.items():
        lines.append(f"  {m:<19} not applicable: {why}")
    lines.append("rules: false alarms over the legal runs; detected per mutant (failed/runs [95% Clopper–Pearson])")
    for rule in d.rules:
        lines.append(f"  {rule.name}: {rule.text}" + (f" ({rule.note})" if rule.note else ""))
        det = ", ".join(f"{m} {d.detection(rule, m).format()}" for m in names)
        lines.append(f"    false alarms {d.false_alarms(rule).format()}; detects {det}")
    through = {
        rule.name: [m for m in names if d.detection(rule, m).failed < d.detection(rule, m).runs] for rule in d.rules
    }
    lines.append("let through (some run passes):")
    for k, v in through.items():
        lines.append(f"  {k}: {', '.join(v) or 'none'}")
    lines.append(
        "  bit-exact holds only where the schedule is pinned (same GPU, library and shape): its false alarms are "
        "the other legal schedules"
    )
    if check is not None:
        lines.append(_check_text(check))
    return "\n".join(lines)


def _check_text(c: dict) -> str:
    head = f"check rtol={c['rtol']:g}, atol={c['atol']:g}: "
    if c["ok"]:
        return head + "passes every legal schedule and detects every mutant in every run"
    parts = []
    if c["fails_legal"]:
        worst = max(c["fails_legal"], key=lambda x: x["ratio"])
        parts.append(
            f"FAILS {len(c['fails_legal'])} legal run(s), e.g. {worst['schedule']} on {worst['operands']} "
            f"(error {worst['ratio']:.3g}× the tolerance)"
        )
    if c["misses_mutants"]:
        parts.append(
            "MISSES " + ", ".join(f"{m['mutant']} ({m['missed']} of {m['trials']} runs)" for m in c["misses_mutants"])
        )
    return head + "; ".join(parts)


def design_plot(d: LibraryDesign, path: str) -> None:
    """One panel per rule: each run's worst error over what the rule allows (log scale; 1 is the
    threshold), the legal schedules' runs and each mutant's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rules = [r for r in d.rules if r.name != "bit-exact (pinned)"]
    names = d.mutant_names()
    fig, axes = plt.subplots(1, len(rules), figsize=(3.2 * len(rules), 3.6), sharey=True)
    for ax, rule in zip(np.atleast_1d(axes), rules):
        legal = np.asarray(d.ratios(rule, d.legal), float)
        xs = np.zeros(len(legal))
        ax.scatter(xs + np.linspace(-0.2, 0.2, len(legal)), np.clip(legal, 1e-6, 1e6), s=8, label="legal")
        for i, m in enumerate(names, 1):
            runs = [r for r in d.mutant_runs if r.mutant == m]
            v = np.clip(np.asarray(d.ratios(rule, runs), float), 1e-6, 1e6)
            ax.scatter(np.full(len(v), i) + np.linspace(-0.2, 0.2, len(v)), v, s=8, marker="x", color="C3")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_yscale("log")
        ax.set_xticks(range(len(names) + 1), ["legal"] + names, rotation=70, fontsize=7)
        ax.set_title(rule.name, fontsize=9)
    np.atleast_1d(axes)[0].set_ylabel("worst |out − ref| / allowed (1: threshold)")
    fig.suptitle(f"{d.problem.describe()}", fontsize=8)
    fig.tight_layout()
    from ..plots import save

    save(fig, path)
    plt.close(fig)
