"""The reproduction's report: tallies, the study's aggregated tables, ``report.md`` and ``reproduce.csv``."""

from __future__ import annotations

import csv
import io
import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from models.kernels import ATOMIC_ORDERS

from ..files import write_atomically, write_files_atomically
from .cache import fp16emu_version
from .judge import LineResult, num, seed_position
from .measured import RUN_SETS
from .selection import Selection

__all__ = ["Report", "print_line", "print_summary", "side_by_side", "aggregate_cell", "seed_expected_share"]

#: The three combinations the study averaged in its summary tables.
STUDY_COMBOS = (("xdlops", "cpu"), ("xdlops", "gpu"), ("nonxdlops", "cpu"))
AGG_METRICS = (
    "max_epsilon_diff",
    "max_abs_diff",
    "ave_abs_diff",
    "max_rel_diff",
    "max_rel_diff_old",
    "ave_rel_diff",
    "rms",
)


@dataclass
class Report:
    """Everything a reproduction found; :meth:`markdown` and :meth:`write` give the files."""

    selection: Selection
    lines: list[LineResult]
    wall_s: float = 0.0
    cache_hits: int = 0
    emulated: int = 0
    measured_dir: str = ""
    command: str = ""
    not_cached: int = 0  # selected lines left out by cached_only
    missing: tuple[str, ...] = ()  # selected measured files missing or empty (allow_missing)
    write_error: str = ""  # why report.md / reproduce.csv could not be written

    @property
    def ok(self) -> bool:
        return not any(r.counts_as_failure for r in self.lines)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    # --- tallies ----------------------------------------------------------------------------

    def tallies(self) -> list[dict]:
        groups: dict[tuple, list[LineResult]] = defaultdict(list)
        for r in self.lines:
            groups[r.measured.combo].append(r)
        order = {k: i for i, k in enumerate(RUN_SETS)}
        rows = []
        for combo in sorted(groups, key=lambda c: (order.get(c[0], 9), c[1], c[2], c[3], c[4])):
            rs = groups[combo]
            c = Counter(r.status for r in rs)
            fields = Counter(f for r in rs if not r.ok for f in r.differing)
            rows.append(
                {
                    "run_set": combo[0],
                    "gpu": combo[1],
                    "kernel": combo[2],
                    "validator": combo[3],
                    "range": combo[4],
                    "tests": len(rs),
                    "reproduced": c["reproduced"],
                    "in_ensemble": c["in_ensemble"] + c["in_distribution"],
                    "differs": c["differs"],
                    "outside": c["outside_ensemble"] + c["outside_distribution"],
                    "ensemble_tests": sum(r.mode == "ensemble" for r in rs),
                    "fields": dict(fields),
                }
            )
        return rows

    def per_run_set(self) -> dict[str, Counter]:
        out: dict[str, Counter] = defaultdict(Counter)
        for r in self.lines:
            out[r.measured.run_set][r.status] += 1
        return out

    # --- the study's aggregated tables ------------------------------------------------------

    def aggregate(self) -> list[dict]:
        """The study's rule per (run set, GPU, range): per combination the mean and max over the
        tests of each metric (non-numeric values skipped), then the mean of the three
        combinations xdlops/cpu, xdlops/gpu, nonxdlops/cpu; pass rate = share of (combination,
        test) pairs with maxEpsilonDiff ≤ 2. The emulated value is an interval (``emulated_lo``,
        ``emulated_hi``): each ensemble or seed-set line enters with its members' lowest and
        highest value (the rule is monotone in every line), an exact-mode line with its value."""
        by: dict[tuple, dict[tuple, list[LineResult]]] = defaultdict(lambda: defaultdict(list))
        for r in self.lines:
            m = r.measured
            by[(m.run_set, m.gpu, m.range)][(m.kernel, m.validator)].append(r)
        rows = []
        for key in sorted(by, key=lambda k: (RUN_SETS.index(k[0]) if k[0] in RUN_SETS else 9, k[1], k[2])):
            combos = by[key]
            use = [c for c in STUDY_COMBOS if c in combos]
            if not use:
                continue
            for metric in AGG_METRICS:
                for stat in ("ave", "max"):
                    row = {"run_set": key[0], "gpu": key[1], "range": key[2], "metric": metric, "stat": stat}
                    row.update(aggregate_cell([combos[c] for c in use], metric, stat))
                    rows.append(row)
            row = {"run_set": key[0], "gpu": key[1], "range": key[2], "metric": "pass_rate", "stat": "maxEps<=2"}
            pairs = [r for c in use for r in combos[c]]
            row["measured"] = sum(num(r.fields["max_epsilon_diff"]) <= 2 for r in pairs) / len(pairs)
            row["emulated_lo"] = sum(r.bound("max_epsilon_diff")[1] <= 2 for r in pairs) / len(pairs)
            row["emulated_hi"] = sum(r.bound("max_epsilon_diff")[0] <= 2 for r in pairs) / len(pairs)
            rows.append(row)
        return rows

    def seed_positions(self) -> dict:
        """Where fair_rand0's measured values lie against the spread of the stand-in seeds, per field.

        Only lines whose spread is one line per seed (non-atomic kernels) are placed: an atomic
        line's spread pools every seed's ensemble members, which are not independent draws. A
        field whose seeds gave pairwise distinct values counts as "below", "inside" or "above";
        one where some seeds tie counts as "tie_inside" or "tie_outside". Returns ``{"seeds": n,
        "lines": placed lines, "atomic_lines": lines left out, "fields": {field: Counter},
        "total": Counter}``. If the GPU's runs were draws
        from the distribution the emulation gives over seeds, the measured value is at most as
        likely to lie below all n distinct seed values, or above all, as 1 / (n + 1)
        (:func:`seed_expected_share`)."""
        n = len(self.selection.rand0_seeds)
        seeds = [r for r in self.lines if r.mode == "seeds"]
        placed = [r for r in seeds if r.n_members == n]
        fields: dict[str, Counter] = defaultdict(Counter)
        total: Counter = Counter()
        for r in placed:
            for f in r.fields:
                pos = seed_position(r, f)
                if pos is None:
                    continue
                if not (r.distinct or {}).get(f, False):
                    pos = "tie_inside" if pos == "inside" else "tie_outside"
                fields[f][pos] += 1
                total[pos] += 1
        return {
            "seeds": n,
            "lines": len(placed),
            "atomic_lines": len(seeds) - len(placed),
            "fields": dict(fields),
            "total": total,
        }

    def validation_methods(self) -> list[dict]:
        """Per (run set, GPU, kernel, validator): the mean over the ranges of the per-range mean
        or max over tests (the study's 'validation methods' table)."""
        by: dict[tuple, dict[str, list[LineResult]]] = defaultdict(lambda: defaultdict(list))
        for r in self.lines:
            m = r.measured
            by[(m.run_set, m.gpu, m.kernel, m.validator)][m.range].append(r)
        rows = []
        for key in sorted(by):
            for metric in ("max_epsilon_diff", "max_abs_diff", "max_rel_diff", "rms"):
                for stat in ("ave", "max"):
                    row = {
                        "run_set": key[0],
                        "gpu": key[1],
                        "kernel": key[2],
                        "validator": key[3],
                        "metric": metric,
                        "stat": stat,
                    }
                    row.update(aggregate_cell(list(by[key].values()), metric, stat))
                    rows.append(row)
        return rows

    # --- output ----------------------------------------------------------------------------

    def csv_rows(self) -> list[list]:
        rows = []
        for r in self.lines:
            m = r.measured
            for f, v in r.fields.items():
                rows.append(
                    [
                        m.run_set,
                        m.gpu,
                        m.kernel,
                        m.validator,
                        m.range,
                        m.test_name,
                        f,
                        v,
                        r.emulated.get(f, ""),
                        int(r.equal.get(f, False)),
                        r.mode,
                        r.exact_members if r.mode != "exact" else "",
                        r.n_members if r.mode != "exact" else "",
                    ]
                )
        return rows

    def write_csv(self, path) -> None:
        """``reproduce.csv`` at ``path``, atomically (a temporary file beside it, then a rename): a
        failed write (a full disk) leaves the previous complete file as it was."""
        write_atomically(path, self._write_csv, "--out")

    def _write_csv(self, binary) -> None:
        fh = io.TextIOWrapper(binary, encoding="utf-8", newline="")
        try:
            self._csv_to(fh)
            fh.flush()
        finally:
            fh.detach()

    def _csv_to(self, fh) -> None:
        w = csv.writer(fh)
        w.writerow(
            [
                "run_set",
                "gpu",
                "kernel",
                "validator",
                "range",
                "test_name",
                "field",
                "measured",
                "emulated",
                "equal",
                "compare",
                "exact_members",
                "members",
            ]
        )
        w.writerows(self.csv_rows())

    def markdown(self) -> str:
        s = self.selection
        out = io.StringIO()
        p = lambda *a: print(*a, file=out)  # noqa: E731
        n_fail = sum(r.counts_as_failure for r in self.lines)
        p("# fp16emu study reproduce: the 2022 fp16 study's measured lines, emulated\n")
        p(f"* command: `{self.command}`" if self.command else "* command: (library call)")
        p(f"* measured: `{self.measured_dir}`; fp16emu {fp16emu_version()}")
        p(
            f"* selection: run sets {','.join(s.run_sets)}; GPUs {','.join(s.gpus)}; kernels {','.join(s.kernels)}; "
            f"validators {','.join(s.validators)}; ranges {','.join(s.ranges)}; "
            f"tests {'all' if s.tests is None else len(s.tests)}"
        )
        orders = ATOMIC_ORDERS
        p(
            f"* atomic ensembles: {s.members} add orders per line, random per output {s.granularity}, plus the "
            f"per-element envelope (closest and farthest outcome of each element over up to {orders.envelope_orders} orders and "
            f"the 4 sorted ones), and its deep search ({orders.deep_orders} more orders for the {orders.deep_elements} farthest elements "
            f"by absolute, relative and ulp distance); "
            f"fair_rand0 stand-in seeds {','.join(map(str, s.rand0_seeds))}"
        )
        p(
            f"* {len(self.lines)} lines, {len({r.measured.test_name for r in self.lines})} tests; "
            f"{self.emulated} lines emulated, {self.cache_hits} from the cache; wall time {self.wall_s:.1f} s"
        )
        if self.not_cached:
            p(f"* **partial**: {self.not_cached} selected lines are not in the cache yet and are left out")
        if self.missing:
            p(
                f"* **incomplete**: {len(self.missing)} selected measured files are missing or empty; their lines are not compared:"
            )
            for m in self.missing:
                p(f"  * `{m}`")
        p(
            f"* **verdict: {'every selected line reproduced or inside its ensemble' if self.ok else f'{n_fail} lines differ'}**\n"
        )
        p("## Per run set\n")
        p(
            "| run set | lines | reproduced exactly | inside ensemble / seed spread | differ | outside ensemble / seed spread |"
        )
        p("|---|---|---|---|---|---|")
        for rs, c in sorted(
            self.per_run_set().items(), key=lambda kv: RUN_SETS.index(kv[0]) if kv[0] in RUN_SETS else 9
        ):
            p(
                f"| {rs} | {sum(c.values())} | {c['reproduced']} | {c['in_ensemble'] + c['in_distribution']} | "
                f"{c['differs']} | {c['outside_ensemble'] + c['outside_distribution']} |"
            )
        p("\n## Tally per combination\n")
        p(
            "`exact`: every printed field equal; `ensemble`: atomic-order tests (or fair_rand0 lines) whose every "
            "field lies inside the emulated spread; `differ`/`outside`: the others, with the fields that differ.\n"
        )
        p(
            "| run set | gpu | kernel | validator | range | tests | exact | ensemble | differ | outside | fields that differ (lines) |"
        )
        p("|---|---|---|---|---|---|---|---|---|---|---|")
        for t in self.tallies():
            fields = ", ".join(f"{k} ({v})" for k, v in sorted(t["fields"].items(), key=lambda kv: -kv[1])) or "–"
            p(
                f"| {t['run_set']} | {t['gpu']} | {t['kernel']} | {t['validator']} | {t['range']} | {t['tests']} | "
                f"{t['reproduced']} | {t['in_ensemble']} | {t['differs']} | {t['outside']} | {fields} |"
            )
        bad = [r for r in self.lines if r.counts_as_failure]
        p("\n## Lines that differ\n")
        if not bad:
            p("None.\n")
        for r in bad:
            m = r.measured
            p(f"### {m.run_set} {m.gpu} {m.kernel}/{m.validator} {m.range} {m.test_name}\n")
            p(
                f"* {r.status}: fields {', '.join(r.differing)}"
                + (f"; {r.exact_members}/{r.n_members} members exact" if r.n_members else "")
            )
            p(f"* recipe: {r.recipe}")
            if r.diagnosis:
                p(f"* diagnosis: {r.diagnosis}")
            p("")
            p("```")
            p(side_by_side(r))
            p("```\n")
        ens = [r for r in self.lines if r.mode == "ensemble"]
        if ens:
            p("## Atomic-order (split-K) ensembles\n")
            p(
                "`inside range`: every field lies within the range of the sampled members and the two envelope "
                "members; `members exact`: sampled members whose line equals the measured one in every field.\n"
            )
            p("| run set | gpu | kernel/validator | range | test | inside range | members exact | fields outside |")
            p("|---|---|---|---|---|---|---|---|")
            for r in ens:
                m = r.measured
                p(
                    f"| {m.run_set} | {m.gpu} | {m.kernel}/{m.validator} | {m.range} | {m.test_name} | "
                    f"{'yes' if r.ok else 'no'} | {r.exact_members}/{r.n_members} | {', '.join(r.differing) or '–'} |"
                )
            p("")
        seeds = [r for r in self.lines if r.mode == "seeds"]
        if seeds:
            p("## fair_rand0: distributions only\n")
            p(
                "fair_rand0 ran with `-rand 0` (time seed, unrecorded): no line can be reproduced. Each measured line "
                f"is set against the lines of seeds {','.join(map(str, s.rand0_seeds))}: a field on which every seed "
                "agrees is compared for equality, the others with the seeds' spread (ends included); the (val, kern) "
                "pairs at the maxima are compared only where every seed gives the same pair. A few seeds agreeing is "
                "weak evidence that a field cannot move, so a measured value that differs from them may be one more "
                "draw. These lines never count as failures.\n"
            )
            c = Counter(r.status for r in seeds)
            inv = sum(all(("..") not in v for v in r.emulated.values()) for r in seeds)
            p(
                f"* {len(seeds)} lines: {c['in_distribution']} inside the seeds' spread in every field, "
                f"{c['outside_distribution']} outside in some field; every seed agrees in every field of {inv} lines; "
                f"{sum(r.exact_members > 0 for r in seeds)} equal a seed's line exactly.\n"
            )
            fields = Counter(f for r in seeds for f in r.differing)
            if fields:
                p(
                    "* fields outside the spread (lines): "
                    + ", ".join(f"{k} ({v})" for k, v in fields.most_common())
                    + "\n"
                )
            inv_bad = [r for r in seeds if any(not r.equal[f] and ".." not in r.emulated[f] for f in r.fields)]
            p(
                f"* lines where a field on which every seed agrees differs: {len(inv_bad)}"
                + (
                    ""
                    if not inv_bad
                    else " — "
                    + "; ".join(
                        f"{r.measured.gpu} {r.measured.kernel}/{r.measured.validator} {r.measured.range} {r.measured.test_name}"
                        for r in inv_bad[:20]
                    )
                    + (" …" if len(inv_bad) > 20 else "")
                )
                + "\n"
            )
            sp = self.seed_positions()
            if sp["total"]:
                n, share = sp["seeds"], seed_expected_share(sp["seeds"])
                p("### Where the measured values lie against the seeds' spread\n")
                p(
                    f"Each numeric field of each of the {sp['lines']} non-atomic fair_rand0 lines, placed against the "
                    f"values of the {n} stand-in seeds: below them all, inside their range (ends included) or above "
                    f"them all. Were the GPU's clock-seeded runs draws from the distribution the emulation gives over "
                    f"seeds, then where the {n} seeds' values are distinct the measured value would lie below them "
                    f"all with probability at most {100 * share:.0f} % (one of {n + 1} equally likely places; less "
                    f"where it can tie a seed), above them all as much. A clear surplus on one side says the "
                    "hardware's values run lower or higher than the emulation's; fields of one line are not "
                    "independent. Fields where some seeds tie (integer counts, values set by the range) are "
                    f"counted apart. {sp['atomic_lines']} atomic lines are left out: their spread pools every seed's "
                    "ensemble members, which are not independent draws.\n"
                )
                p("| field | distinct seeds: placed | below | inside | above | seeds tie: inside | outside |")
                p("|---|---|---|---|---|---|---|")
                rows = sorted(sp["fields"].items()) + [("**all fields**", sp["total"])]
                for f, c in rows:
                    k = c["below"] + c["inside"] + c["above"]
                    p(
                        f"| {f} | {k} | {c['below']} ({percent(c['below'], k)}) | {c['inside']} "
                        f"({percent(c['inside'], k)}) | {c['above']} ({percent(c['above'], k)}) | "
                        f"{c['tie_inside']} | {c['tie_outside']} |"
                    )
                p(f"| draws from the emulated distribution | | ≤ {100 * share:.0f} % | | ≤ {100 * share:.0f} % | | |")
                p("")
        agg = self.aggregate()
        if agg:
            p("## The study's aggregated tables, emulated next to measured\n")
            p(
                "Rule (the study's summary tables): per combination the mean (`ave`) or max over the "
                "selected tests, non-numeric values skipped, then the mean of xdlops/cpu, xdlops/gpu and "
                "nonxdlops/cpu; pass rate = share of (combination, test) pairs with maxEpsilonDiff ≤ 2. Raw values "
                "(the study's r4/r5 'max 1' correction is not applied). Where atomic-order ensembles or fair_rand0 "
                "seeds enter, the emulated value is the interval their members span (`inside`: the measured "
                "value lies in it).\n"
            )
            p("| run set | gpu | range | metric | stat | measured | emulated | equal |")
            p("|---|---|---|---|---|---|---|---|")
            for row in agg:
                em, eq = cell(row)
                p(
                    f"| {row['run_set']} | {row['gpu']} | {row['range']} | {row['metric']} | {row['stat']} | "
                    f"{fmt_g(row['measured'])} | {em} | {eq} |"
                )
            p("\n### Validation methods (mean over the selected ranges)\n")
            p("| run set | gpu | kernel | validator | metric | stat | measured | emulated | equal |")
            p("|---|---|---|---|---|---|---|---|---|")
            for row in self.validation_methods():
                em, eq = cell(row)
                p(
                    f"| {row['run_set']} | {row['gpu']} | {row['kernel']} | {row['validator']} | {row['metric']} | "
                    f"{row['stat']} | {fmt_g(row['measured'])} | {em} | {eq} |"
                )
        return out.getvalue()

    def write(self, out_dir) -> tuple[Path, Path]:
        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        md, cs = d / "report.md", d / "reproduce.csv"
        text = self.markdown().encode("utf-8")
        write_files_atomically({md: lambda fh: fh.write(text), cs: self._write_csv}, "--out")  # both or neither
        return md, cs


def seed_expected_share(n_seeds: int) -> float:
    """The chance that one more independent draw lies below all of ``n_seeds`` distinct draws of
    the same continuous distribution (and, as much, above all): 1 / (n + 1). Ties between the
    seeds' values (integer counts, equal maxima) move share into "inside"."""
    return 1.0 / (n_seeds + 1)


def percent(k: int, n: int) -> str:
    """k of n as a whole percentage ("25 %"), or "–" when n is 0."""
    return f"{100.0 * k / n:.0f} %" if n else "–"


def aggregate_cell(groups: list[list[LineResult]], metric: str, stat: str) -> dict:
    """Mean over ``groups`` of each group's mean (``ave``) or max over its lines, non-numeric values
    skipped: measured, and the emulated interval."""
    out = {}
    for side, pick in (
        ("measured", lambda r: num(r.fields.get(metric, "nan"))),
        ("emulated_lo", lambda r: r.bound(metric)[0]),
        ("emulated_hi", lambda r: r.bound(metric)[1]),
    ):
        per = []
        for rs in groups:
            vals = [v for v in (pick(r) for r in rs) if math.isfinite(v)]
            if vals:
                per.append(sum(vals) / len(vals) if stat == "ave" else max(vals))
        out[side] = sum(per) / len(per) if per else math.nan
    return out


def cell(row: dict) -> tuple[str, str]:
    """(emulated text, equal text) of an aggregated row: yes, inside (the interval holds the
    measured value), no."""
    lo, hi, m = row["emulated_lo"], row["emulated_hi"], row["measured"]
    if same(lo, hi) == "yes":
        return fmt_g(lo), same(m, lo)
    inside = math.isfinite(m) and lo - 1e-12 * abs(lo) <= m <= hi + 1e-12 * abs(hi)
    return f"{fmt_g(lo)}..{fmt_g(hi)}", ("inside" if inside else "no")


def fmt_g(x: float) -> str:
    return "–" if isinstance(x, float) and math.isnan(x) else f"{x:.6g}"


def same(a: float, b: float) -> str:
    if math.isnan(a) and math.isnan(b):
        return "yes"
    return (
        "yes"
        if a == b or (math.isfinite(a) and math.isfinite(b) and abs(a - b) <= 1e-12 * max(abs(a), abs(b)))
        else "no"
    )


def side_by_side(r: LineResult) -> str:
    """Measured and emulated fields in aligned columns, with a row marking each field:
    ``=`` equal (or inside the ensemble), ``X`` different."""
    names = list(r.fields)
    short = {
        "n": "N",
        "n_exact": "exact",
        "n_eps1": "eps1",
        "n_eps_ge2": "eps>=2",
        "n_eps_other": "other",
        "max_epsilon_diff": "maxEps",
        "val_at_max_eps": "val@eps",
        "kern_at_max_eps": "kern@eps",
        "max_abs_diff": "maxAbs",
        "ave_abs_diff": "aveAbs",
        "max_rel_diff": "maxRel",
        "max_rel_diff_old": "maxRelOld",
        "val_at_max_rel_old": "val@old",
        "kern_at_max_rel_old": "kern@old",
        "ave_rel_diff": "aveRel",
        "rms": "RMS",
    }
    em_label = "emulated" if r.mode == "exact" else ("ensemble" if r.mode == "ensemble" else "seeds")
    cols = []
    for f in names:
        vals = [short.get(f, f), r.fields[f], r.emulated.get(f, ""), "=" if r.equal[f] else "X"]
        w = max(len(v) for v in vals)
        cols.append([v.ljust(w) for v in vals])
    rows = ["field   ", "measured", em_label.ljust(8), "equal   "]
    return "\n".join(rows[i] + " " + " ".join(c[i] for c in cols) for i in range(4))


def print_line(r: LineResult, file) -> None:
    m = r.measured
    mark = {
        "reproduced": "OK",
        "in_ensemble": "OK (ensemble)",
        "in_distribution": "OK (seed spread)",
        "differs": "DIFFERS",
        "outside_ensemble": "OUTSIDE ENSEMBLE",
        "outside_distribution": "outside seed spread",
    }[r.status]
    n_eq = sum(r.equal.values())
    extra = f", {r.exact_members}/{r.n_members} members exact" if r.n_members else ""
    print(
        f"[{m.run_set} {m.gpu.upper()} {m.kernel}/{m.validator} {m.range}] {m.test_name}: {mark} "
        f"({n_eq}/{len(r.equal)} fields{extra})",
        file=file,
    )
    print(side_by_side(r), file=file)


def print_summary(report: Report, file) -> None:
    print(
        "\nTally per combination (exact = every printed field equal; ensemble = inside the atomic-order or "
        "seed spread):",
        file=file,
    )
    hdr = f"{'run set':<11}{'gpu':<6}{'kernel':<10}{'valid.':<7}{'range':<6}{'tests':>6}{'exact':>6}{'ens.':>6}{'differ':>7}{'outside':>8}  fields that differ"
    print(hdr, file=file)
    for t in report.tallies():
        fields = ", ".join(f"{k}({v})" for k, v in sorted(t["fields"].items(), key=lambda kv: -kv[1]))
        print(
            f"{t['run_set']:<11}{t['gpu']:<6}{t['kernel']:<10}{t['validator']:<7}{t['range']:<6}{t['tests']:>6}"
            f"{t['reproduced']:>6}{t['in_ensemble']:>6}{t['differs']:>7}{t['outside']:>8}  {fields}",
            file=file,
        )
    bad = [r for r in report.lines if r.counts_as_failure]
    if bad:
        print(f"\n{len(bad)} lines differ:", file=file)
        for r in bad:
            m = r.measured
            print(
                f"  {m.run_set} {m.gpu} {m.kernel}/{m.validator} {m.range} {m.test_name}: {', '.join(r.differing)}"
                + (f"\n    diagnosis: {r.diagnosis}" if r.diagnosis else ""),
                file=file,
            )
    agg = report.aggregate()
    if agg:
        cells = [(row, *cell(row)) for row in agg]
        bad_cells = [c for c in cells if c[2] == "no"]
        print(
            f"\nThe study's aggregated tables: {len(cells)} cells, {sum(c[2] == 'yes' for c in cells)} equal, "
            f"{sum(c[2] == 'inside' for c in cells)} inside the ensemble/seed interval, {len(bad_cells)} differ"
            + (" (measured | emulated):" if bad_cells else " (tables in the report)."),
            file=file,
        )
        for row, em, _ in bad_cells:
            print(
                f"  {row['run_set']:<11}{row['gpu']:<6}{row['range']:<4}{row['metric']:<18}{row['stat']:<10}"
                f"{fmt_g(row['measured']):>14} | {em}",
                file=file,
            )
    s = Counter(r.status for r in report.lines)
    print(
        f"\n{len(report.lines)} lines: {s['reproduced']} reproduced exactly, {s['in_ensemble']} inside their "
        f"atomic-order ensemble, {s['in_distribution']} fair_rand0 lines inside the seed spread; "
        f"{s['differs']} differ, {s['outside_ensemble']} outside the ensemble, {s['outside_distribution']} "
        f"fair_rand0 lines outside the seed spread. Wall time {report.wall_s:.1f} s."
        + (f" Partial: {report.not_cached} selected lines not in the cache yet." if report.not_cached else ""),
        file=file,
    )
    sp = report.seed_positions()
    c = sp["total"]
    k = c["below"] + c["inside"] + c["above"]
    if k:
        share = seed_expected_share(sp["seeds"])
        print(
            f"fair_rand0, {k} numeric fields of {sp['lines']} non-atomic lines where the {sp['seeds']} seeds' values "
            f"are distinct: measured below them all {percent(c['below'], k)}, inside {percent(c['inside'], k)}, above "
            f"them all {percent(c['above'], k)} (draws from the emulated distribution: at most {100 * share:.0f} % "
            "below, as much above).",
            file=file,
        )
    if report.missing:
        print(
            f"INCOMPLETE: {len(report.missing)} selected measured files are missing or empty, their lines "
            f"not compared: {', '.join(report.missing)}",
            file=file,
        )
