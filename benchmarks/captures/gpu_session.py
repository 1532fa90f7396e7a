"""One GPU session of captures (issue 37): run the capture plans with the capture kit in several
worker processes on one GPU, stop starting cases at a deadline, and pack what was captured into at
most a few archives small enough to bring back.

    python3 benchmarks/captures/gpu_session.py --out DIR [--deadline 300] [--workers 6] \\
        [--plans plan_training.json,plan_sweep.json] [--device cuda|cpu] [--limit N] [--work TMP]

Needs numpy and PyTorch only: the kit (``validation/capture_torch.py``) is loaded as a plain file,
so fp16emu need not be installed on the GPU machine. Every case is saved without its operands
(the kit's ``omit_operands``: seed, range and sha256 stand in for them). A plan entry may carry
``cudnn_benchmark: true`` (cuDNN then times its algorithms and may take Winograd); it is recorded
in the capture. Writes ``DIR/<plan>.tar.gz`` (split into parts of at most 15 MiB),
``DIR/log.txt`` and ``DIR/session.json`` (the GPU, the versions, counts, seconds)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing as mp
import sys
import tarfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
KIT = HERE.parents[1] / "validation" / "capture_torch.py"
PART_BYTES = 15 * 2**20


def load_kit():
    spec = importlib.util.spec_from_file_location("capture_kit", KIT)
    kit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kit)
    return kit


def worker(args):
    index, n_workers, jobs, work_dir, deadline, device = args
    import torch

    kit = load_kit()
    plain_run_op = kit.run_op

    def run_op(torch_, op, tensors, params):
        torch_.backends.cudnn.benchmark = bool(params.get("cudnn_benchmark", False))
        return plain_run_op(torch_, op, tensors, params)

    kit.run_op = run_op
    lines = []
    done = 0
    for plan_name, spec in jobs[index::n_workers]:
        if time.time() > deadline:
            lines.append(f"DEADLINE {plan_name} {spec['name']}")
            continue
        t0 = time.time()
        try:
            fields = kit.capture_case(torch, spec, device=device, omit_operands=True)
            if spec.get("cudnn_benchmark"):
                fields["cudnn_benchmark"] = True
            path = Path(work_dir) / plan_name / f"{spec['name']}.npz"
            kit.save(path, fields)
            kernels = "; ".join(str(k) for k in fields["kernels"])
            lines.append(
                f"OK {plan_name} {spec['name']} {time.time() - t0:.2f}s differs={fields['repeat_differs']} {kernels}"
            )
            done += 1
        except Exception as exc:  # noqa: BLE001 - one failed case must not stop the session
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            lines.append(f"FAIL {plan_name} {spec['name']} {type(exc).__name__}: {first}")
            if not isinstance(exc, (RuntimeError, ValueError)):
                lines.append(traceback.format_exc()[-800:])
    return lines


def pack(work_dir: Path, out: Path, plan_name: str) -> list[str]:
    files = sorted((work_dir / plan_name).glob("*.npz"))
    parts, part, size = [], [], 0
    for f in files:
        n = f.stat().st_size
        if part and size + n > PART_BYTES:  # random fp16/fp32 outputs hardly compress
            parts.append(part)
            part, size = [], 0
        part.append(f)
        size += n
    if part:
        parts.append(part)
    written = []
    for i, chunk in enumerate(parts):
        path = out / f"{plan_name}_{i}.tar.gz"
        with tarfile.open(path, "w:gz") as tar:
            for f in chunk:
                tar.add(f, arcname=f"{plan_name}/{f.name}")
        written.append(f"{path.name} {path.stat().st_size} bytes, {len(chunk)} captures")
    return written


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--deadline", type=float, default=300.0, help="seconds after which no case is started")
    p.add_argument("--workers", type=int, default=6)
    p.add_argument("--plans", default="plan_training.json,plan_sweep.json")
    p.add_argument("--device", default="cuda")
    p.add_argument("--limit", type=int, default=0, help="at most this many cases per plan (0: all)")
    p.add_argument("--work", default="/tmp/fp16emu_gpu_session", help="where the captures are written before packing")
    args = p.parse_args(argv)
    start = time.time()
    out = Path(args.out)
    work_dir = Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    kit = load_kit()
    jobs = []
    for name in args.plans.split(","):
        plan_name = Path(name).stem
        specs = kit.read_plan(HERE / name)
        (work_dir / plan_name).mkdir(parents=True, exist_ok=True)
        jobs += [(plan_name, s) for s in (specs[: args.limit] if args.limit else specs)]
    deadline = start + args.deadline
    ctx = mp.get_context("spawn")
    with ctx.Pool(args.workers) as pool:
        results = pool.map(
            worker, [(i, args.workers, jobs, str(work_dir), deadline, args.device) for i in range(args.workers)]
        )
    lines = [line for r in results for line in r]
    (work_dir / "log.txt").write_text("\n".join(lines) + "\n")
    import torch

    session = {
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "cases": len(jobs),
        "ok": sum(line.startswith("OK ") for line in lines),
        "failed": sum(line.startswith("FAIL ") for line in lines),
        "past_deadline": sum(line.startswith("DEADLINE ") for line in lines),
        "seconds": round(time.time() - start, 1),
        "date": time.strftime("%Y-%m-%d"),
    }
    session["archives"] = [a for name in args.plans.split(",") for a in pack(work_dir, out, Path(name).stem)]
    with tarfile.open(out / "log.tar.gz", "w:gz") as tar:  # the log and the session in one file
        (work_dir / "session.json").write_text(json.dumps(session, indent=1) + "\n")
        tar.add(work_dir / "log.txt", arcname="log.txt")
        tar.add(work_dir / "session.json", arcname="session.json")
    print(json.dumps(session, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
