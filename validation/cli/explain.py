"""The ``fp16emu explain`` subcommand."""

from __future__ import annotations

import json
import sys

from ..explain.explainer import DEFAULT_METRICS, check_top, explain, metric_names
from ..explain.plots import explain_figure
from ..explain.sources import SOURCES
from ..plots import check_path, save
from ..run.runner import VALIDATOR_CHOICES, plan
from .common import HW_HELP, add_format_option


def register_cli(subparsers):
    """Add the ``explain`` subcommand to an argparse ``subparsers``; its handler (``func``)
    returns the exit code (0). Bad option values raise ValueError naming the option and the
    allowed values."""
    p = subparsers.add_parser(
        "explain",
        help="attribute a test's error to its sources (Shapley shares over 5 switches)",
        description="CONFIG: a miopen-gen/rocmlir-gen argument string, a lit RUN line, an MIOpenDriver conv command, "
        "or a suite test name (quote it). Runs the 2^5 factorial design over the error sources "
        f"({', '.join(SOURCES)}) between the exact fp64 convolution and the emulated kernel.",
    )
    p.add_argument("config", nargs="?")
    p.add_argument("--config", dest="config_option", default=None, help="the CONFIG, when it starts with '-'")
    p.add_argument("--hw", default="mi200", help=HW_HELP)
    p.add_argument("--kernel", default=None, help="xdlops or nonxdlops (default: the config's own)")
    p.add_argument(
        "--validator", default="cpu", help=f"{', '.join(VALIDATOR_CHOICES)} (default cpu): the reference's order"
    )
    p.add_argument("--reference", default="exact", help="exact (fp64 convolution, default) or validator")
    p.add_argument("--perf-config", default=None, help="rocMLIR tuning string (default: the 2022 default)")
    p.add_argument("--rand-min", type=int, default=None)
    p.add_argument("--rand-max", type=int, default=None)
    p.add_argument(
        "--rand-type",
        default=None,
        help="float or int: the harness's generator (default: the config's -rand_type, else int)",
    )
    p.add_argument("--seed", type=int, default=None)
    p.add_argument(
        "--inputs",
        default=None,
        metavar="DIR|x.npy,w.npy[,dy.npy]",
        help="explain on your own tensors (as run --inputs; needed for MIOpenDriver commands)",
    )
    p.add_argument(
        "--metric",
        default=",".join(DEFAULT_METRICS),
        help=f"comma-separated metrics (default {','.join(DEFAULT_METRICS)})",
    )
    p.add_argument("--top", default="10", help="worst elements to explain (default 10)")
    add_format_option(p)
    p.add_argument(
        "--plot",
        default=None,
        metavar="FILE",
        help="save a titled picture: the shares, error vs magnitude, where subnormals sit",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_explain)
    return p


def _cmd_explain(args) -> int:
    fmt = args.format
    if args.plot:
        check_path(args.plot)
    config = args.config if args.config is not None else args.config_option
    if not config:
        raise ValueError(
            "explain: give a CONFIG (an argument string, a RUN line, an MIOpenDriver command or a suite test name)"
        )
    try:
        top = check_top(args.top)
    except ValueError:
        raise ValueError(f"--top: {args.top!r} is not a whole number ≥ 0") from None
    try:
        names = metric_names(args.metric)
    except ValueError as err:
        raise ValueError(f"--{err}") from None
    result = explain(
        config,
        hw=args.hw,
        kernel=args.kernel,
        validator=args.validator,
        reference=args.reference,
        perf_config=args.perf_config,
        rand_min=args.rand_min,
        rand_max=args.rand_max,
        rand_type=args.rand_type,
        seed=args.seed,
        metrics=names,
        top=top,
        progress=False if args.no_progress else None,
        inputs=args.inputs,
        keep_arrays=bool(args.plot),
    )

    for w in result.inputs.warnings if result.inputs is not None else ():
        print(f"fp16emu: warning: {w}", file=sys.stderr)
    if fmt == "json":
        print(json.dumps(result.to_dict(), indent=1, allow_nan=False))
    else:
        print(result.format_text())
    if args.plot:
        problem = plan(config, hw=args.hw, kernel=args.kernel, perf_config=args.perf_config)[0].problem
        kw = {k: getattr(args, k) for k in ("seed", "rand_type", "rand_min", "rand_max")}
        inputs = ", ".join(f"{k} {v}" for k, v in kw.items() if v is not None) or "the config's own random data"
        save(explain_figure(result, problem, {"inputs": inputs}), args.plot)
    return 0
