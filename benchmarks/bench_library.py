"""Time the capture search (``fp16emu identify CAPTURE``) on every library capture at hand:
../shared/silicon (when present), tests/data/captures, and a synthetic capture of a million
outputs (1024×1024, K = 4096, three cuBLAS-like splits) made with emu.gemm.

Prints a markdown table (case, answer, outputs, schedule, candidates, seconds) and the totals;
``--only PATTERN`` restricts the cases. Run from the repository root:
``python benchmarks/bench_library.py``."""

from __future__ import annotations

import argparse
import glob
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import emu  # noqa: E402
import models  # noqa: E402
from validation.captures import Capture, load_capture  # noqa: E402
from validation.captures.search import search  # noqa: E402


def million() -> Capture:
    rng = np.random.default_rng(7)
    A = rng.uniform(-1, 1, (1024, 4096)).astype(np.float16)
    B = rng.uniform(-1, 1, (4096, 1024)).astype(np.float16)
    sched = emu.Schedule(k_tile=64, splits=3, split_rule="ceil", output="fp16")
    out = emu.gemm(A, B, None, models.unit("h100"), sched)
    return Capture(
        "synthetic_1024x4096x1024_3splits",
        "mm",
        {"A": A.view(np.uint16), "B": B.view(np.uint16)},
        out,
        gpu="NVIDIA H100",
    )


def cases(only: str | None):
    try:
        from tests import silicon

        if silicon.available():
            yield from ({**silicon.gemm_cases(), **silicon.conv_cases()}).values()
    except ImportError:
        pass
    for f in sorted(glob.glob(str(ROOT / "tests/data/captures/*/*.npz"))):
        if only and only not in f:
            continue
        try:
            yield load_capture(f)
        except ValueError as exc:
            probe = completed_probe(f)  # an order probe kept without its operands
            if probe is None:
                print(f"skip {os.path.basename(f)}: {exc}", file=sys.stderr)
            else:
                yield probe
    yield million()


def completed_probe(path) -> Capture | None:
    """An order probe kept without its operands (tests/data/captures/h200_probes), with them built
    again by its recipe (benchmarks/captures/probe_orders.py, checked by sha256); None for any
    other file."""
    import importlib.util
    import tempfile

    from validation.captures.format import save

    with np.load(path, allow_pickle=False) as z:
        fields = {k: z[k] for k in z.files}
    if "probe" not in fields:
        return None
    spec = importlib.util.spec_from_file_location("probe_orders", ROOT / "benchmarks" / "captures" / "probe_orders.py")
    po = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(po)
    try:
        fields = po.restore_operands(fields)
    except ValueError:
        return None
    out = Path(tempfile.mkdtemp(prefix="fp16emu_probe_")) / Path(path).parent.name / os.path.basename(path)
    out.parent.mkdir()
    return load_capture(save(out, fields))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", help="only cases whose path contains this")
    args = p.parse_args(argv)
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}"
    )
    print("| case | answer | identical / outputs | schedule | candidates | s |")
    print("|---|---|---|---|---|---|")
    total, n_same, n = 0.0, 0, 0
    for cap in cases(args.only):
        if args.only and args.only not in cap.path:
            continue
        t = time.perf_counter()
        try:
            r = search(cap)
        except ValueError as exc:
            print(f"| {Path(cap.path).stem} | not searched: {exc} | | | | |")
            continue
        dt = time.perf_counter() - t
        total += dt
        n += 1
        n_same += r.answer == "identical"
        best = r.best.describe() if r.best else "-"
        print(
            f"| {Path(cap.path).stem} | {r.answer} | {r.n_identical} / {r.n} | {best} | {r.searched} | {dt:.1f} |",
            flush=True,
        )
    print(f"\n{n_same} of {n} identical; {total:.0f} s in all, load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
