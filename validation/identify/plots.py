"""Figures of an identification and of the study-line identification (``fp16emu identify --plot``).

Shared parts (titles, saving, the common panels): :mod:`validation.plots`.
"""

from __future__ import annotations

import textwrap

import numpy as np

from models import space

from ..plots import new_figure
from .study import ORDERS, UNITS, KBlocksVerdict

_GREEN, _RED, _ORANGE, _GREY = (0.70, 0.90, 0.70), (0.97, 0.70, 0.70), (0.99, 0.85, 0.60), (0.9, 0.9, 0.9)

__all__ = ["identify_figure", "identify_study_figure"]


def identify_figure(result, rows=None, fields: dict | None = None):
    """Rows reproduced bit for bit per candidate point of a :class:`validation.identify.Identification`
    (the consistent points, then the nearest ones)."""
    labels, explained = [], []
    for p in result.consistent[:12]:
        labels.append(space.describe(p))
        explained.append(result.rows)
    for n in result.nearest[:12]:
        labels.append(space.describe(n.point))
        explained.append(n.explained)
    f = {
        "config": f"probe rows from {getattr(rows, 'source', '') or '-'}",
        "hardware": result.named or " or ".join(result.named_among) or "unknown (not a named unit)",
        "kernel": f"matrix unit, K = {result.k}, {getattr(result.output_format, 'name', result.output_format)} output",
        "validator": "bit-exact match per row against each model-space point",
        "inputs": f"{result.rows} rows, {result.points_searched} points searched",
    }
    f.update(fields or {})
    # whole labels, wrapped (a cut one read "k=ascendin")
    wrapped = ["\n".join(textwrap.wrap(lb, 60, break_long_words=False)) or lb for lb in labels]
    lines = sum(w.count("\n") + 1 for w in wrapped)
    fig, ax = new_figure(f, width=9, height=max(3.0, 0.17 * lines + 0.12 * len(labels) + 1))
    a = ax[0, 0]
    if labels:
        y = np.arange(len(labels))
        colors = ["tab:green" if e == result.rows else "tab:orange" for e in explained]
        a.barh(y, explained, color=colors)
        a.set_yticks(y, wrapped, fontsize=6)
        a.invert_yaxis()
        a.axvline(result.rows, color="black", linewidth=0.6)
    a.set_xlabel(f"rows reproduced bit for bit (of {result.rows})")
    if result.named:
        named = f"named unit: {result.named}"
    elif result.named_among:
        named = f"named units among them: {', '.join(result.named_among)}"
    else:
        named = "no named unit among them" if result.consistent else "no point reproduces every row"
    a.set_title(f"{len(result.consistent)} consistent points; {named}", fontsize=9)
    return fig


def _study_fields(test: str, gpus, kernel: str, validator: str, ranges, run_set: str) -> dict:
    return {
        "config": f"2022 study test {test}",
        "hardware": f"{','.join(gpus)} (measured lines)",
        "kernel": kernel,
        "validator": validator,
        "inputs": f"run set {run_set}, ranges {','.join(ranges) or '-'}, seed 1",
    }


def _cell_grid(a, colors, texts, row_labels, col_labels, good_rows):
    """A table of coloured cells (rows × columns) with text; ``good_rows`` labelled in bold green."""
    n_rows, n_cols = len(row_labels), len(col_labels)
    if not n_rows or not n_cols:
        a.axis("off")
        return
    a.imshow(np.asarray(colors, dtype=np.float64).reshape(n_rows, n_cols, 3), aspect="auto")
    for i in range(n_rows):
        for j in range(n_cols):
            a.text(j, i, texts[i][j], ha="center", va="center", fontsize=6)
    a.set_xticks(np.arange(n_cols), col_labels, fontsize=7)
    a.set_yticks(np.arange(n_rows), row_labels, fontsize=7)
    for i, tick in enumerate(a.get_yticklabels()):
        if i in good_rows:
            tick.set_color("tab:green")
            tick.set_fontweight("bold")


def identify_study_figure(test: str, found: dict, lines: dict | None = None, *, gpus=("mi100", "mi200"),
                          run_set: str = "fair_1", fields: dict | None = None):  # fmt: skip
    """The study-line identification of one suite test (``fp16emu identify RAW_RESULTS --test``),
    one panel per GPU. Forward (``found``: {(test, gpu): [consistent StudyCandidate]}, ``lines``
    from ``identify_forward(..., lines_out=)``): a cell per candidate × range, green when the
    emulated line equals the measured one in every printed field, red with the number of fields
    that differ otherwise; n_exact emulated / measured in each cell; consistent candidates in bold
    green. Backward weight (``found``: {(test, gpu): [KBlocksVerdict]}): a cell per KBlocks ×
    (range, validator) with the measured n_exact against the emulated value or range; green
    inside, red outside (excluded), orange outside sampled orders (not shown)."""
    gpus = [g for g in gpus if (test, g) in found]
    kblocks = any(isinstance(v, KBlocksVerdict) for g in gpus for v in found[(test, g)])
    if kblocks:
        cols = sorted({(c.range, c.validator) for g in gpus for v in found[(test, g)] for c in v.checks})
        ranges = sorted({r for r, _ in cols})
        f = _study_fields(
            test,
            gpus,
            "xdlops, split-K atomics; KBlocks " + ", ".join(str(v.kblocks) for v in found[(test, gpus[0])]),
            "-pv, -pv_with_gpu: n_exact (KBlocks ≤ 2: every field)",
            ranges,
            run_set,
        )
    else:
        lines = lines or {}
        ranges = sorted({r for g in gpus for r in lines.get((test, g), {}).get("measured", {})})
        f = _study_fields(
            test,
            gpus,
            f"xdlops; units {', '.join(UNITS)} × gemmK {', '.join(ORDERS)}",
            "-pv_with_gpu, every printed field",
            ranges,
            run_set,
        )
    f.update(fields or {})
    fig, ax = new_figure(f, ncols=max(1, len(gpus)), width=11.0 if len(gpus) < 2 else 6.5, height=4.5)
    for a, g in zip(ax[0], gpus):
        if kblocks:
            verdicts = found[(test, g)]
            colors, texts = [], []
            for v in verdicts:
                by = {(c.range, c.validator): c for c in v.checks}
                row_c, row_t = [], []
                for key in cols:
                    c = by.get(key)
                    if c is None:
                        row_c.append(_GREY)
                        row_t.append("-")
                        continue
                    row_c.append(_GREEN if c.ok else (_RED if c.exhaustive else _ORANGE))
                    emu_text = str(c.lo) if c.lo == c.hi else f"[{c.lo},{c.hi}]"
                    row_t.append(f"{c.measured}\n{emu_text}" + ("\nline differs" if c.whole_line and not c.ok else ""))
                colors.append(row_c)
                texts.append(row_t)
            labels = [f"KBlocks {v.kblocks}: {v.verdict}" for v in verdicts]
            good = {i for i, v in enumerate(verdicts) if v.verdict == "consistent"}
            col_labels = [f"{r}/{'gpu' if v == 'gpu' else 'cpu'}" for r, v in cols]
            _cell_grid(a, colors, texts, labels, col_labels, good)
            a.set_title(f"{g}: n_exact measured / emulated (range over add orders); consistent in bold", fontsize=8)
        else:
            doc = lines.get((test, g), {"measured": {}, "emulated": {}})
            cands = sorted({c for c, _ in doc["emulated"]}, key=lambda c: (c.unit, ORDERS.index(c.order)))
            consistent = set(found[(test, g)])
            colors, texts = [], []
            for c in cands:
                row_c, row_t = [], []
                for r in ranges:
                    want, got = doc["measured"].get(r), doc["emulated"].get((c, r))
                    if want is None or got is None:
                        row_c.append(_GREY)
                        row_t.append("-")
                        continue
                    bad = [k for k in want if got.get(k) != want[k]]
                    row_c.append(_RED if bad else _GREEN)
                    row_t.append(
                        f"{got.get('n_exact')}/{want.get('n_exact')}" + (f"\n{len(bad)} differ" if bad else "")
                    )
                colors.append(row_c)
                texts.append(row_t)
            labels = [c.label() for c in cands]
            _cell_grid(a, colors, texts, labels, list(ranges), {i for i, c in enumerate(cands) if c in consistent})
            a.set_title(f"{g}: {len(consistent)} consistent (bold); n_exact emulated/measured", fontsize=8)
        a.set_xlabel("range/validator" if kblocks else "input range")
    if not gpus:
        ax[0, 0].axis("off")
    return fig
