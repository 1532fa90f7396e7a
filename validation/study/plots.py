"""The figure of a study reproduction (``fp16emu study reproduce --plot``).

Shared parts (titles, saving, the common panels): :mod:`validation.plots`.
"""

from __future__ import annotations

import numpy as np

from ..plots import new_figure
from .judge import num

__all__ = ["study_figure"]


_STUDY_FIELDS = ("max_epsilon_diff", "max_abs_diff", "max_rel_diff", "rms")


def study_figure(report, fields: dict | None = None):
    """Emulated against measured for each line of a :class:`validation.study.Report`: one scatter
    per field (log-log), split-K ensembles drawn as ranges (vertical bars), the diagonal y = x."""
    lines = report.lines
    combos = sorted({r.measured.combo for r in lines})

    def join(i):
        return ",".join(sorted({c[i] for c in combos})) or "-"

    tests = sorted({r.measured.test_name for r in lines})
    f = {
        "config": f"2022 study, {len(lines)} lines of {len(tests)} tests"
        + (f" ({tests[0]})" if len(tests) == 1 else ""),
        "hardware": join(1),
        "kernel": join(2),
        "validator": join(3) + " (cpu = -pv, gpu = -pv_with_gpu)",
        "inputs": f"run sets {join(0)}, ranges {join(4)}, seed 1",
    }
    f.update(fields or {})
    fig, ax = new_figure(f, ncols=len(_STUDY_FIELDS), width=3.8, height=3.8)
    for a, name in zip(ax[0], _STUDY_FIELDS):
        xs, lo, hi, ok = [], [], [], []
        for r in lines:
            if name not in r.fields:
                continue
            xs.append(num(r.fields[name]))
            b = r.bound(name)
            lo.append(b[0])
            hi.append(b[1])
            ok.append(r.ok)
        xs, lo, hi, ok = map(np.asarray, (xs, lo, hi, ok))
        if xs.size == 0:
            a.axis("off")
            continue
        mid = (lo + hi) / 2
        for good, color, label in ((True, "tab:green", "reproduced / inside"), (False, "tab:red", "differs")):
            s = ok == good
            if s.any():
                a.errorbar(xs[s], mid[s], yerr=[mid[s] - lo[s], hi[s] - mid[s]], fmt="o", ms=3, color=color,
                           elinewidth=1, label=f"{label} ({int(s.sum())})")  # fmt: skip
        pos = np.concatenate([xs, lo, hi])
        pos = pos[np.isfinite(pos) & (pos > 0)]
        if pos.size:
            span = [pos.min() / 1.5, pos.max() * 1.5]
            a.plot(span, span, color="black", linewidth=0.6)
            a.set_xscale("log")
            a.set_yscale("log")
        a.set_xlabel(f"measured {name}")
        a.set_ylabel(f"emulated {name} (range: ensemble)")
        a.legend(fontsize=7)
    return fig
