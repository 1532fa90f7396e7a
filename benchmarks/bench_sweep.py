"""Identify a folder of library captures (the random-shape sweep of issue 37) and record, per
capture, the answer and the search time; then the fraction reproduced bit for bit, per op and
dtype. The captures come from ``benchmarks/captures/gpu_session.py`` (plan ``plan_sweep.json``).

    python benchmarks/bench_sweep.py CAPTURE_DIR [--sample N] [--seed S] [--jobs 2] [--out sweep.csv]

Each capture is loaded with :func:`validation.captures.load_capture` (a capture the search does
not take is counted as ``refused`` with the loader's reason) and searched with
:func:`validation.captures.search_capture` on this machine's unit for the capture's ``gpu``. Prints a
summary table (op × dtype: captures, identical, ensemble, differs, refused, median and worst
seconds) and writes one CSV row per capture."""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np


def kind_of(path: Path) -> tuple[str, str]:
    """(op, dtype) from a sweep capture's name: ``s0001_mm_3607x29x3_f32`` → (mm, f32)."""
    parts = path.stem.split("_")
    op = "conv2d" + ("_" + parts[3] if parts[2] == "bwd" else "") if parts[1] == "conv2d" else parts[1]
    return op, parts[-1]


def identify_one(path: str) -> dict:
    from validation.captures import CaptureError, load_capture, search_capture

    t0 = time.perf_counter()
    row = {"capture": Path(path).name}
    try:
        cap = load_capture(path)
        res = search_capture(cap)
        row["answer"] = res.answer
        row["schedule"] = (res.best.describe() if res.best else "")[:300]
        row["unit"] = res.unit
    except CaptureError as exc:
        row["answer"] = "refused"
        row["schedule"] = str(exc)[:300]
    except Exception as exc:  # noqa: BLE001 - a crash is a result of the benchmark too
        row["answer"] = "error"
        row["schedule"] = f"{type(exc).__name__}: {exc}"[:300]
    row["seconds"] = round(time.perf_counter() - t0, 2)
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder")
    p.add_argument("--sample", type=int, default=0, help="a random sample of this many captures (0: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--out", default="out/sweep.csv")
    p.add_argument("--only", default="", help="comma-separated dtypes to keep (f16,bf16,f32,tf32)")
    args = p.parse_args(argv)
    paths = sorted(Path(args.folder).glob("*.npz"))
    if args.only:
        keep = set(args.only.split(","))
        paths = [q for q in paths if kind_of(q)[1] in keep]
    if args.sample and args.sample < len(paths):
        rng = np.random.default_rng(args.seed)
        paths = [paths[i] for i in sorted(rng.choice(len(paths), args.sample, replace=False))]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rows = []
    with ProcessPoolExecutor(args.jobs) as pool, open(out, "w", newline="") as f:
        w = csv.DictWriter(
            f, ["capture", "op", "dtype", "answer", "seconds", "unit", "schedule"], extrasaction="ignore", restval=""
        )
        w.writeheader()
        for i, row in enumerate(pool.map(identify_one, [str(q) for q in paths])):
            row["op"], row["dtype"] = kind_of(Path(row["capture"]))
            rows.append(row)
            w.writerow(row)
            f.flush()
            print(f"[{i + 1}/{len(paths)}] {row['capture']}: {row['answer']} ({row['seconds']} s)", flush=True)
    table = defaultdict(lambda: defaultdict(list))
    for r in rows:
        table[(r["op"], r["dtype"])][r["answer"]].append(r["seconds"])
    print(f"\n{len(rows)} captures from {args.folder} in {time.perf_counter() - t0:.0f} s on {args.jobs} processes")
    print(
        "| op | dtype | captures | identical | ensemble | not modelled | differs | refused/error | median s | worst s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    totals = defaultdict(int)
    for (op, dt), by in sorted(table.items()):
        secs = [s for v in by.values() for s in v]
        n = {a: len(by.get(a, [])) for a in ("identical", "inside-ensemble", "not-modelled", "differs")}
        bad = len(by.get("refused", [])) + len(by.get("error", []))
        print(
            f"| {op} | {dt} | {len(secs)} | {n['identical']} | {n['inside-ensemble']} | {n['not-modelled']} |"
            f" {n['differs']} | {bad} |"
            f" {np.median(secs):.1f} | {max(secs):.1f} |"
        )
        totals["all"] += len(secs)
        totals["identical"] += n["identical"]
    print(f"identical: {totals['identical']} of {totals['all']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
