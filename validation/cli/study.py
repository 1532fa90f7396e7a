"""``fp16emu study reproduce`` (and ``python -m validation.study reproduce``): options to a
:class:`.Selection`, :func:`.reproduce`, the summary printed."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from models.kernels import ATOMIC_ORDERS

from ..configs.limits import check_count
from ..engine import Terminated, check_scheduler, ending_on_signals
from ..plots import check_path, save
from ..progress import HEARTBEAT_S, auto_progress
from ..study.measured import RAND0_SEEDS, RUN_SETS
from ..study.plots import study_figure
from ..study.report import print_summary
from ..study.reproduction import reproduce
from ..study.selection import Selection
from .common import error_line

__all__ = ["add_reproduce_arguments", "run_reproduce", "register_cli", "main"]

#: the line a terminated reproduction ends with (exit 143; 130 for Ctrl-C)
TERMINATED_MESSAGE = "fp16emu: terminated (finished tests are cached; run again to resume)"
#: the most worker processes --jobs may ask for
MAX_JOBS = 1024

_DESCRIPTION = """``fp16emu study reproduce --measured DIR`` reads the study's raw results (DIR is its
``raw_results`` folder: ``verify_results_<run set>_<GPU>/verify_f16_<kernel>_<pv|pv-with-gpu>_rand<r>.txt``),
emulates every selected test (inputs, kernel, validation function, verifier) and prints the
emulated line next to the measured one with each printed field marked equal or not."""


def add_reproduce_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--measured",
        required=True,
        metavar="DIR",
        help="the study's raw_results folder (github.com/zhanglx13/llvm-project-mlir-dev-utils, fp16_experiment/raw_results @3b042e7)",
    )
    p.add_argument("--run-set", default="fair_1", help=f"comma-separated, of {','.join(RUN_SETS)} (default fair_1)")
    p.add_argument("--gpu", default="mi100,mi200", help="mi100,mi200 (default both)")
    p.add_argument("--kernel", default="xdlops,nonxdlops", help="xdlops,nonxdlops (default both)")
    p.add_argument("--validator", default="cpu,gpu", help="cpu (-pv), gpu (-pv_with_gpu) (default both)")
    p.add_argument("--range", default="r0,r1,r4,r5", help="r0 [-1,1], r1 [-10,10], r4 [1,5], r5 [5,10] (default all)")
    p.add_argument("--tests", default=None, metavar="NAME,...", help="suite test names (default all 107)")
    p.add_argument("--smallest", type=int, default=None, metavar="N", help="only the N smallest tests (by work)")
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="workers (default 1; with --scheduler local, one per core); capped at the jobs to run and the cores",
    )
    p.add_argument(
        "--scheduler",
        default="auto",
        metavar="S",
        help="where jobs run: auto (default: this process for one worker, else local when dask.distributed is "
        "installed, else processes), local (a Dask LocalCluster of --jobs workers), tcp://HOST:PORT (an existing "
        "Dask scheduler; shared cache directory), processes (a local process pool, no Dask)",
    )
    p.add_argument(
        "--out", default="out/study", metavar="DIR", help="report.md, reproduce.csv and .cache/ (default out/study)"
    )
    p.add_argument(
        "--members",
        type=int,
        default=ATOMIC_ORDERS.members,
        help=f"atomic add orders per ensemble (default {ATOMIC_ORDERS.members})",
    )
    p.add_argument(
        "--granularity", default="element", help="atomic add order random per 'element' (default) or per output 'tile'"
    )
    p.add_argument(
        "--rand0-seeds",
        default=",".join(map(str, RAND0_SEEDS)),
        metavar="S,...",
        help="seeds standing in for fair_rand0's clock seeds",
    )
    p.add_argument("--show", default="all", help="print lines side by side: all (default), mismatches, none")
    p.add_argument("--no-diagnose", action="store_true", help="skip the diagnosis of lines that differ")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    p.add_argument(
        "--cached-only",
        action="store_true",
        help="emulate nothing: report the lines already in the cache (a partial report of a running reproduction)",
    )
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress: no bar on a terminal, no line every 5 minutes when stderr is not a terminal",
    )
    p.add_argument(
        "--allow-missing",
        action="store_true",
        help="a selected measured file that is missing or empty is flagged in the summary and report "
        "instead of being an error",
    )
    p.add_argument(
        "--plot", default=None, metavar="FILE.png", help="save emulated-vs-measured scatters (ensembles as ranges)"
    )


def _jobs(args) -> int:
    """--jobs, or its default: one worker, or every core for ``--scheduler local``."""
    if args.jobs is not None:  # a worker process each: bounded as every count is
        return check_count(args.jobs, "--jobs", high=MAX_JOBS)
    return (os.cpu_count() or 1) if args.scheduler == "local" else 1


def run_reproduce(args) -> int:
    """The ``study reproduce`` handler: the exit code (0 every selected line reproduced or inside its
    ensemble, 1 otherwise)."""
    if args.plot:
        check_path(args.plot)
    try:
        seeds = tuple(int(s) for s in str(args.rand0_seeds).split(",") if s.strip())
    except ValueError:
        raise ValueError(f"--rand0-seeds: {args.rand0_seeds!r} is not a comma-separated list of integers") from None
    selection = Selection.from_options(
        run_set=args.run_set,
        gpu=args.gpu,
        kernel=args.kernel,
        validator=args.validator,
        range=args.range,
        tests=args.tests,
        smallest=args.smallest,
        members=args.members,
        granularity=args.granularity,
        rand0_seeds=seeds,
        diagnose=not args.no_diagnose,
    )
    command = "fp16emu study reproduce " + " ".join(
        f"--{k.replace('_', '-')} {v}"
        for k, v in (
            ("measured", args.measured),
            ("run_set", args.run_set),
            ("gpu", args.gpu),
            ("kernel", args.kernel),
            ("validator", args.validator),
            ("range", args.range),
            ("tests", args.tests),
            ("smallest", args.smallest),
            ("jobs", args.jobs),
            ("scheduler", None if args.scheduler == "auto" else args.scheduler),
            ("out", args.out),
        )
        if v is not None
    )
    try:
        with ending_on_signals(TERMINATED_MESSAGE):  # within a second in every phase, children included
            report = _reproduce(args, selection, command)
    except Terminated:  # SIGTERM: the workers are stopped; one line, exit 143 (128 + SIGTERM)
        print(TERMINATED_MESSAGE, file=sys.stderr)
        return Terminated.exit_code
    print_summary(report, sys.stdout)
    if report.write_error:
        raise ValueError(report.write_error)
    if args.plot and report.lines:
        save(study_figure(report), args.plot)
        print(f"plot: {args.plot}")
    print(f"report: {Path(args.out) / 'report.md'}, {Path(args.out) / 'reproduce.csv'}")
    return report.exit_code


def _reproduce(args, selection, command):
    return reproduce(
        selection,
        args.measured,
        jobs=_jobs(args),
        scheduler=check_scheduler(args.scheduler, reach=True),
        out=args.out,
        cache_dir=False if args.no_cache else None,
        progress=not args.no_progress and auto_progress(),
        # no terminal (a log, nohup, CI): a plain line every 5 minutes instead of the bar
        heartbeat_s=None if args.no_progress or auto_progress() else HEARTBEAT_S,
        show=args.show,
        command=command,
        cached_only=args.cached_only,
        allow_missing=args.allow_missing,
    )


def register_cli(subparsers) -> argparse.ArgumentParser:
    """Add ``study`` (subcommand ``reproduce``) to an argparse subparsers object; the handler is
    ``args.func(args)`` and returns the exit code."""
    p = subparsers.add_parser(
        "study",
        help="the 2022 fp16 study: reproduce its measured lines",
        description="The 2022 AMD fp16 study (MI100/MI200, rocMLIR).",
    )
    sub = p.add_subparsers(dest="study_command", required=True)
    r = sub.add_parser(
        "reproduce", help="emulate the study's tests and compare every printed field", description=_DESCRIPTION
    )
    add_reproduce_arguments(r)
    r.set_defaults(func=run_reproduce)
    return p


def main(argv=None) -> int:
    """``python -m validation.study reproduce …`` (the same as ``fp16emu study reproduce …``)."""

    class _P(argparse.ArgumentParser):
        def error(self, message):
            raise ValueError(message)

    parser = _P(prog="python -m validation.study")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_P)
    register_cli(sub)
    try:
        args = parser.parse_args(["study", *(sys.argv[1:] if argv is None else argv)])
        return args.func(args)
    except ValueError as err:  # the one error line of every command (validation.cli.common.error_line)
        print(error_line("study", err), file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:
        what = "terminated" if isinstance(err, Terminated) else "interrupted"
        print(f"fp16emu: {what} (finished tests are cached; run again to resume)", file=sys.stderr)
        return getattr(err, "exit_code", 130)
