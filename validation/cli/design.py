"""``fp16emu design``: argument handling and printing only."""

from __future__ import annotations

import dataclasses
import sys

from models.bugs import MUTANTS, default_mutants, unsupported
from models.hardware import check_hardware

from ..design.functions import FUNCTION_NAMES, function_names, load_functions, parse_functions
from ..design.generators import parse_generator
from ..design.report import format_json, format_text, plot
from ..design.sweep import design, resolve_targets
from ..engine import check_scheduler
from ..progress import HEARTBEAT_S, Heartbeat, bar_width
from ..run.runner import KERNEL_CHOICES, choice
from .common import HW_HELP, add_format_option

__all__ = ["register_cli"]


def _progress_display(args):
    """(tqdm bar or None, heartbeat or None, total(n) setting either's total): a bar on a terminal
    (or with --progress); with no terminal (a log, nohup, CI) a plain line every HEARTBEAT_S
    instead; neither with --no-progress."""
    show = not args.no_progress and (args.progress or sys.stderr.isatty())
    bar = None
    if show:
        from tqdm import tqdm

        bar = tqdm(total=0, desc="design", unit="run", leave=False, file=sys.stderr, **bar_width(sys.stderr))
    beat = Heartbeat(HEARTBEAT_S, unit="runs") if bar is None and not args.no_progress else None

    def total(n):
        if bar is not None:
            bar.total = n
            bar.refresh()
        if beat is not None:
            beat.total = n

    return bar, beat, total


def register_cli(subparsers):
    """Add ``design`` to an argparse ``subparsers``; its handler returns the exit code. Bad
    values raise ValueError (exit 2, one line)."""
    p = subparsers.add_parser(
        "design",
        help="rank validation functions: false alarms on correct kernels vs detection of injected bugs",
        description="TESTS: a suite (rocmlir_2022, rocmlir_2022:N for its N smallest tests, k-sweep[:N]), suite test "
        "names or config texts. For each, the correct kernel's metrics over seeds (noise model, analytic bounds, "
        "recommended thresholds) and every validation function on the correct kernel and on every bug mutant "
        "(models.bugs). The tests share one data type, fp16 (-t f16) or bf16 (-t bf16): its inputs, output "
        "rounding, ulps, preset limits and mutants. Or a library op: a capture (CAPTURE.npz) or --op/--shape/--dtype, "
        "judged over the legal schedules of --gpus against library bug mutants and the rules people paste, with a "
        "recommended assert_close tolerance (exit 1 when --check's tolerance fails a legal schedule or misses a "
        "mutant). See docs/design.md.",
    )
    p.add_argument("tests", nargs="*", metavar="SUITE|CONFIG|CAPTURE.npz")
    lib = p.add_argument_group(
        "library ops (a capture, or --op): the legal schedules of the GPUs named, library bug mutants, and the "
        "rules people paste (docs/design.md, 'Library ops')"
    )
    lib.add_argument("--op", default=None, help="mm, linear, bmm, addmm, conv2d (scaled_mm: --dtype e4m3)")
    lib.add_argument(
        "--shape",
        nargs="+",
        default=None,
        metavar="N",
        help="M N K (bmm: B M N K; conv2d: N C H W K R S, stride 1, no padding)",
    )
    lib.add_argument("--dtype", default=None, help="fp16, bf16, fp32, tf32 (allow_tf32 on) or e4m3 (scaled_mm)")
    lib.add_argument(
        "--gpus", default=None, help="GPUs the test runs on, e.g. h100,h200,a100,mi300 (default: the capture's)"
    )
    lib.add_argument(
        "--check",
        default=None,
        metavar="rtol=…,atol=…",
        help="does this tolerance fail a legal schedule or miss a mutant? (exit 1 if so)",
    )
    lib.add_argument("--max-schedules", default="16", help="legal schedules run at most, sampled (default 16)")
    lib.add_argument(
        "--operand-sets", default="2", help="operand sets: the op's own, then generated ones of its range (default 2)"
    )
    lib.add_argument("--mutant-bases", default="2", help="legal schedules each mutant is planted in (default 2)")
    lib.add_argument(
        "--max-outputs", default="65536", help="outputs judged at most: the op's first rows (default 65536)"
    )
    lib.add_argument("--margin", default="2", help="the recommended atol's margin over the legal errors (default 2)")
    p.add_argument(
        "--validators",
        nargs="+",
        default=None,
        metavar="PRESET|FILE",
        help=f"presets ({', '.join(FUNCTION_NAMES)}), NAME@RANGE, or .json/.toml files (default: every preset the "
        "tests' data type has: bf16 has no study-2022)",
    )
    p.add_argument(
        "--seeds", default="20", help="seeds per test and input range, for fit and for evaluation (default 20)"
    )
    p.add_argument(
        "--ranges",
        nargs="+",
        default=None,
        metavar="RANGE",
        help="run each preset on these input generators instead of its own: float:LO:HI, int:LO:HI, away:LO:HI "
        "(±[LO, HI]), exact, sparse",
    )
    p.add_argument(
        "--bugs",
        nargs="+",
        default=None,
        metavar="NAME",
        help="bug mutants to inject (models.bugs names, each with its default variants; 'none': false alarms only; "
        "default: all)",
    )
    p.add_argument("--hw", default="mi200", help=HW_HELP)
    p.add_argument("--kernel", default=None, help="xdlops or nonxdlops (default: each config's own)")
    p.add_argument("--validator", default="cpu", help="the validation (reference) function, as in `run` (default cpu)")
    p.add_argument(
        "--rate", default="0.01", help="target false-alarm rate of the recommended thresholds (default 0.01)"
    )
    p.add_argument("--jobs", default="1", help="worker processes (default 1)")
    p.add_argument(
        "--scheduler",
        default="processes",
        help="where the --jobs workers run: processes (a local process pool, the default), local (a Dask "
        "LocalCluster), tcp://HOST:PORT (an existing Dask cluster), auto (as study reproduce); "
        "results do not depend on it",
    )
    add_format_option(p)
    p.add_argument(
        "--plot",
        default=None,
        metavar="FILE.png",
        help="suites: false alarms vs detection, and the noise; library ops: every run's error against each rule's threshold",
    )
    p.add_argument("--progress", action="store_true", help="show a progress bar even when not on a terminal")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_design)
    return p


def _number(value: str, name: str, kind, lo, hi):
    try:
        v = kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"--{name}: {value!r} is not a {'whole ' if kind is int else ''}number") from None
    if not lo <= v <= hi:
        raise ValueError(f"--{name}: {v} is outside {lo}..{hi}")
    return v


def _cmd_design(args) -> int:
    from ..captures import is_capture

    library = args.op is not None or (len(args.tests) == 1 and str(args.tests[0]).endswith(".npz"))
    if library:
        return _cmd_library(args, is_capture)
    for name in ("shape", "dtype", "gpus", "check"):
        if getattr(args, name) is not None:
            raise ValueError(f"--{name}: only for a library op (a capture .npz or --op)")
    if not args.tests:
        raise ValueError("give a suite, configs, a capture (.npz) or --op (see fp16emu design --help)")
    fmt = str(args.format).lower()
    if args.plot and not str(args.plot).lower().endswith((".png", ".svg", ".pdf")):
        raise ValueError(f"--plot: {args.plot!r} must end in .png, .svg or .pdf")
    seeds = _number(args.seeds, "seeds", int, 1, 100_000)
    jobs = _number(args.jobs, "jobs", int, 1, 256)

    scheduler = check_scheduler(args.scheduler, reach=True)
    rate = _number(args.rate, "rate", float, 1e-9, 0.5)
    hw = check_hardware(args.hw)
    kernel = None if args.kernel is None else choice(args.kernel, KERNEL_CHOICES, "kernel")
    targets = resolve_targets(args.tests, hw=hw, kernel=kernel, validator=args.validator)
    dtype = targets[0].input if targets else "fp16"
    validators = list(function_names(dtype)) if args.validators is None else args.validators
    functions = parse_functions(validators, dtype)
    if args.ranges:
        gens = [parse_generator(r) for r in args.ranges]
        files = [f for f, v in zip(functions, _sources(validators, dtype)) if v]
        presets = [f for f, v in zip(functions, _sources(validators, dtype)) if not v]
        functions = [dataclasses.replace(f, generator=g) for f in presets for g in gens] + files
    mutants = None
    if args.bugs is not None:
        names = [b.strip().lower() for b in args.bugs]
        if names != ["none"]:
            # 'none' beside bug names adds nothing: the correct kernel's false alarms are always measured
            bad = [n for n in names if n != "none" and n not in MUTANTS]
            if bad:
                raise ValueError(f"--bugs: {bad[0]!r} is not one of none, {', '.join(MUTANTS)}")
            for n in names:
                why = unsupported(n, dtype) if n != "none" else None
                if why:
                    raise ValueError(f"--bugs: {n} does not apply to {dtype} tests: {why}")
        mutants = tuple(m for m in default_mutants(dtype) if m.name in names)
    bar, beat, total = _progress_display(args)

    try:
        result = design(
            targets,
            functions,
            seeds=seeds,
            mutants=mutants,
            rate=rate,
            jobs=jobs,
            progress=bar.update if bar is not None else None if beat is None else beat.update,
            total=total,
            scheduler=scheduler,
        )
    finally:
        if bar is not None:
            bar.close()
    if args.plot:
        plot(result, args.plot)
    print(format_json(result) if fmt == "json" else format_text(result))
    return 0


def _cmd_library(args, is_capture) -> int:
    from ..design.library import problem_from_capture, problem_from_op
    from ..design.library_report import design_json, design_plot, design_text
    from ..design.tolerance import design_library, parse_tolerance

    fmt = str(args.format).lower()
    gpus = None if args.gpus is None else [g for g in str(args.gpus).split(",") if g.strip()]
    check = None if args.check is None else parse_tolerance(args.check)
    if args.plot and not str(args.plot).lower().endswith((".png", ".svg", ".pdf")):
        raise ValueError(f"--plot: {args.plot!r} must end in .png, .svg or .pdf")
    if args.op is not None:
        if args.tests:
            raise ValueError("--op describes the op: give no capture or suite beside it")
        if args.shape is None or args.dtype is None:
            raise ValueError("--op needs --shape M N K (bmm: B M N K) and --dtype (fp16, bf16, fp32, tf32, e4m3)")
        shape = [_number(x, "shape", int, 1, 1 << 24) for x in args.shape]
        problem = problem_from_op(args.op, shape, args.dtype, gpus or ["h100"])
    else:
        path = args.tests[0]
        if not is_capture(path):
            raise ValueError(f"{path}: not a library capture (an .npz with an 'op' member)")
        for name in ("shape", "dtype"):
            if getattr(args, name) is not None:
                raise ValueError(f"--{name}: the capture records it; give it only with --op")
        problem = problem_from_capture(path, gpus)
    kw = dict(
        max_schedules=_number(args.max_schedules, "max-schedules", int, 1, 100_000),
        n_operands=_number(args.operand_sets, "operand-sets", int, 1, 1000),
        mutant_bases=_number(args.mutant_bases, "mutant-bases", int, 1, 1000),
        margin=_number(args.margin, "margin", float, 1.0, 1e6),
        max_outputs=_number(args.max_outputs, "max-outputs", int, 1, 1 << 30),
    )
    bar, beat, total = _progress_display(args)

    progress = bar.update if bar is not None else None if beat is None else beat.update
    try:
        d = design_library(problem, progress=progress, total=total, **kw)
    finally:
        if bar is not None:
            bar.close()
    result = None if check is None else d.check(*check)
    if args.plot:
        design_plot(d, args.plot)
    if fmt == "json":
        import json

        print(json.dumps(design_json(d, result), indent=1))
    else:
        print(design_text(d, result))
        if args.plot:
            print(f"plot: {args.plot}")
    return 0 if result is None or result["ok"] else 1


def _sources(items, dtype: str = "fp16") -> list[bool]:
    """Per function of ``parse_functions(items, dtype)``: True when it came from a file."""
    out = []
    for item in items:
        s = str(item)
        if s.lower().endswith((".json", ".toml")):
            out += [True] * len(load_functions(s, dtype))
        else:
            out.append(False)
    return out
