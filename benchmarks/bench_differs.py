"""Time the capture search on captures that nothing in the schedule space reproduces (a
``differs`` answer searches the whole space; issue 37's target: under a minute on two cores).

    python benchmarks/bench_differs.py [--only NAME,...] [--json out.json]

The captures, made deterministically here:

- ``baddbmm-sign``: the synthetic baddbmm of ``tests/validation/captures/test_mixups.py``
  (3 × (32×512 @ 512×24), alpha 0.75, beta −1.25, uniform(−1, 1) fp16 operands from seed 11,
  the planted H100 schedule: 3 splits of 64-wide k tiles, C in the epilogue), out[1, 5, 7]'s sign
  flipped.
- ``h_mm-bit0``: ``tests/data/captures/h200_holdout/h_mm_16x256x256_12.npz`` (an H200 cuBLAS
  fp16 mm), out[7, 40]'s lowest bit flipped.
- ``tf32-s0338``: a capture of the session-16 sweep (``tests/data/captures/sweep_h200_s16.tar.gz``)
  that no schedule of the space reproduces, as captured: an sm80 TF32 convolution with 182
  channels (``not-modelled``).
- ``f16-wgrad-c40-bit0``: a random capture of session 23's check on unseen shapes
  (``tests/data/captures/h200_probes/probes_set4.tar.gz``, operands drawn again from their
  seed), an fp16 channels_last weight gradient on cuDNN's sm80 xmma kernel after a ``Memset``
  (8 splits; identical as captured), with out[3, 5, 1, 1]'s lowest bit flipped. (Until session 23
  the sweep's s1149 (``gemvNSP``), s0562 (``wgrad2d_shmem_tiling``) and s0348 (six-split xmma TF32
  split-K) stood here, reproduced by the orders the order probes read. Until session 20 three
  TF32 mm stood here, s0119, s1075 and s0997, reproduced by the TF32 split-K grain
  of 4; until session 21 the linears s0270, s0096, s0412 and the TF32 dgrad s0236, reproduced by
  the bias added to the stored sum and by rounding grad_output; until session 22 the ``gemmSN_TN``
  linears s0704 and s0244, reproduced by each lane's chain restarting every 16 of its k.)

Each is searched once with :func:`validation.captures.search.search` on the unit of its ``gpu``;
printed: the answer, the outputs the nearest schedule gets, the candidates judged, the CPU
seconds (``time.process_time``: every thread of this process) and the wall seconds, the load
average, and the nearest schedule."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "captures"
SWEEP = DATA / "sweep_h200_s16.tar.gz"
sys.path.insert(0, str(ROOT))  # this worktree's packages, not an installed copy


def baddbmm_sign():
    """The synthetic baddbmm with one output's sign flipped (as ``test_mixups`` makes it)."""
    import emu
    import models
    from validation.captures import Capture

    rng = np.random.default_rng(11)
    A, B, C = (rng.uniform(-1, 1, s).astype(np.float16) for s in ((3, 32, 512), (3, 512, 24), (1, 32, 24)))
    planted = emu.Schedule(
        k_tile=64, splits=3, split_rule="ceil", c_entry="epilogue", alpha=0.75, beta=-1.25, output="fp16"
    )
    unit = models.unit("h100")
    out = np.stack([emu.gemm(A[i], B[i], C[0].astype(np.float32), unit, planted) for i in range(3)])
    out = out.astype(np.float16)
    out.view(np.uint16)[1, 5, 7] ^= 0x8000
    ops = {"A": A.view(np.uint16), "B": B.view(np.uint16), "C": C.view(np.uint16)}
    return Capture("baddbmm-sign", "baddbmm", ops, out, gpu="NVIDIA H200", alpha=0.75, beta=-1.25)


def h_mm_bit0():
    """h_mm_16x256x256_12 (H200 holdout) with out[7, 40]'s lowest bit flipped."""
    from dataclasses import replace

    from validation.captures import load_capture

    cap = load_capture(DATA / "h200_holdout" / "h_mm_16x256x256_12.npz")
    out = cap.out.copy()
    out.view(np.uint16)[7, 40] ^= 1
    return replace(cap, out=out)


def sweep(name: str):
    """A capture of the session-16 sweep, as captured (from the tarball, into a temporary folder)."""
    from validation.captures import load_capture

    with tarfile.open(SWEEP) as tar, tempfile.TemporaryDirectory() as tmp:
        (member,) = [m for m in tar.getmembers() if Path(m.name).name.startswith(name + "_")]
        tar.extract(member, tmp, filter="data")
        return load_capture(Path(tmp) / member.name)


def bit0(cap, where):
    """``cap`` with the output at ``where``'s lowest bit flipped."""
    from dataclasses import replace

    out = cap.out.copy()
    out.view(f"u{out.dtype.itemsize}")[where] ^= 1
    return replace(cap, out=out)


def probe_check(name: str):
    """A random capture of session 23's check set (from the probe archive, into a temporary
    folder; its operands drawn again from its seed)."""
    from validation.captures import load_capture

    archive = SWEEP.parent / "h200_probes" / "probes_set4.tar.gz"
    with tarfile.open(archive) as tar, tempfile.TemporaryDirectory() as tmp:
        (member,) = [m for m in tar.getmembers() if Path(m.name).name == name + ".npz"]
        tar.extract(member, tmp, filter="data")
        return load_capture(Path(tmp) / member.name)


CASES = {
    "baddbmm-sign": baddbmm_sign,
    "h_mm-bit0": h_mm_bit0,
    "tf32-s0338": lambda: sweep("s0338"),
    "f16-wgrad-c40-bit0": lambda: bit0(probe_check("c_wgrad_n2c40k24h17r3s1p1_chann_float16"), (3, 5, 1, 1)),
}


def run(name: str) -> dict:
    from validation.captures.search import search

    cap = CASES[name]()
    load0 = os.getloadavg()[0]
    c0, w0 = time.process_time(), time.perf_counter()
    r = search(cap)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    return {
        "case": name,
        "capture": f"{cap.op} {cap.describe()}",
        "answer": r.answer,
        "n": r.n,
        "n_identical": r.n_identical,
        "searched": r.searched,
        "cpu_s": round(cpu, 2),
        "wall_s": round(wall, 2),
        "load": round((load0 + os.getloadavg()[0]) / 2, 1),
        "nearest": r.best.describe() if r.best else "",
        "stages": [list(s) for s in r.stages],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="", help="comma-separated case names (" + ", ".join(CASES) + ")")
    p.add_argument("--json", default="", help="also write the rows to this JSON file")
    p.add_argument("--stages", action="store_true", help="print each search stage")
    args = p.parse_args(argv)
    names = args.only.split(",") if args.only else list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"bench_differs: error: --only: unknown case {unknown[0]!r} (one of {', '.join(CASES)})", file=sys.stderr)
        return 2
    print(f"bench_differs: {len(names)} cases, {os.cpu_count()} CPUs, numba threads {_threads()}")
    rows = []
    for name in names:
        row = run(name)
        rows.append(row)
        print(
            f"{name:14s} {row['answer']:13s} {row['n_identical']}/{row['n']} outputs, {row['searched']} candidates, "
            f"{row['cpu_s']:.1f} s CPU, {row['wall_s']:.1f} s wall (load {row['load']})"
        )
        print(f"  capture: {row['capture']}")
        print(f"  nearest: {row['nearest']}")
        if args.stages:
            for s in row["stages"]:
                print(f"    {s[0]}: {s[1]} -> {s[2]}")
        sys.stdout.flush()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


def _threads() -> int:
    try:
        import numba

        return numba.get_num_threads()
    except Exception:  # noqa: BLE001 - only printed
        return 0


if __name__ == "__main__":
    sys.exit(main())
