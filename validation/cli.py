"""The ``fp16emu`` command: argument handling and printing only.

Exit codes: 0 pass (or no verdict asked), 1 fail, 2 usage or input error (one line, no traceback).
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["main"]


class UsageError(Exception):
    """A bad argument or input: printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own errors: one line, exit 2
        raise UsageError(message)


def _add_run(sub):
    p = sub.add_parser(
        "run",
        help="emulate one convolution test: kernel vs validation",
        description="CONFIG: a miopen-gen/rocmlir-gen argument string, a lit RUN line, an "
        "MIOpenDriver conv command, or a suite test name (quote it).",
    )
    p.add_argument("config", nargs="?")
    p.add_argument("--config", dest="config_option", default=None, help=argparse.SUPPRESS)
    p.add_argument("--hw", default="mi200", help="mi100, mi200, mi300 (default mi200)")
    p.add_argument("--kernel", default=None, help="xdlops or nonxdlops (default: the config's own)")
    p.add_argument(
        "--validator",
        default="cpu",
        help="cpu, gpu, cpu-acc4, cpu-ftz, mlir (default cpu), each optionally with +flush (fp16 inputs "
        "below 2^-14 flushed) and +inbounds (bwd_weight: only in-bounds products counted into "
        "groups); e.g. cpu-acc4+flush+inbounds, the 2022 study's fair_3 MI200 bwd_weight validator",
    )
    p.add_argument("--perf-config", default=None, help="rocMLIR tuning string (default: the 2022 default)")
    p.add_argument("--rand-min", type=int, default=None)
    p.add_argument("--rand-max", type=int, default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument(
        "--rand-type",
        default=None,
        choices=("float", "int"),
        help="the harness's random generator (default: the config's -rand_type, else int)",
    )
    p.add_argument(
        "--gpu-output",
        default=None,
        metavar="FILE.npy",
        help="the GPU kernel's own output (fp16, or its fp32 copy; the result tensor's shape or flat): compared "
        "with the emulated kernel bit for bit, an answer of bug or rounding",
    )
    p.add_argument(
        "--members",
        type=int,
        default=None,
        metavar="N",
        help="split-K atomic kernels: add orders in the ensemble (default 128)",
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--check", action="store_true", help="only read the config and print the GEMMs, units and orders that would run"
    )
    _add_verdict_options(p)
    return p


def _add_verdict_options(p):
    p.add_argument(
        "--verifier", default=None, help="a verifier preset (rocmlir-2022, rocmlir, study-2022, mlu-ops, torch, miopen)"
    )
    p.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="METRIC=VALUE",
        help="a threshold per metric (repeatable); overrides the preset's",
    )
    p.add_argument("--report", action="store_true", help="histograms and the worst elements")


def _parse_thresholds(items):
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--threshold: expected METRIC=VALUE, got {item!r}")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise UsageError(f"--threshold {name}: {value!r} is not a number") from None
    return out


def _measure(validation, kernel, args):
    """Compare as the chosen verifier measures; returns (comparison, verdict or None)."""
    from . import metrics
    from . import verifier as verifier_mod

    thresholds = _parse_thresholds(args.threshold)
    dtype = "fp16" if kernel.dtype == "float16" else None
    options = {}
    if args.verifier:
        options = verifier_mod.preset(args.verifier, dtype or metrics.resolve_dtype(kernel.dtype)).compare_options()
    comparison = metrics.compare(validation, kernel, **options)
    if not (args.verifier or thresholds):
        return comparison, None
    return comparison, verifier_mod.verdict(comparison, preset=args.verifier, thresholds=thresholds)


def _emit(comparison, verdict, args, header: dict, extra: dict | None = None) -> int:
    if args.format == "json":
        doc = dict(header)
        doc.update(verdict.to_dict() if verdict is not None else comparison.to_dict())
        doc.update(extra or {})
        print(json.dumps(doc, indent=1))
    else:
        for key, value in header.items():
            print(f"{key:>10s}: {value}")
        print(comparison.format_text(report=args.report))
        if verdict is not None:
            print(verdict.format_text())
    return 0 if verdict is None else verdict.exit_code


def _cmd_check(args) -> int:
    from .run import plan

    config, kmodel, vmodel = plan(
        args.config, hw=args.hw, kernel=args.kernel, validator=args.validator, perf_config=args.perf_config
    )
    p = config.problem
    doc = {
        "config": config.name or " ".join(config.source.split())[:100],
        "direction": p.direction,
        "result_shape": list(p.tensor_shape(p.result_role)),
        "models": [],
    }
    for model in (kmodel, vmodel):
        gemms = []
        for sub, g in zip(config.gemms, model.plan(p)):
            gemms.append(
                {
                    "G": sub.g,
                    "M": sub.m,
                    "N": sub.n,
                    "K": sub.k,
                    "unit": g.unit.name,
                    "group_size": g.unit.group_size,
                    "k_order": "custom" if g.order.k_order else "ascending",
                    "pad_k": g.order.pad_k,
                    "split_k": g.order.split_k,
                    "notes": g.order.notes,
                }
            )
        doc["models"].append({"name": model.key, "gemms": gemms})
    if args.format == "json":
        print(json.dumps(doc, indent=1))
    else:
        print(f"{doc['config']}: {p.direction}, result {'x'.join(map(str, doc['result_shape']))}")
        for m in doc["models"]:
            for g in m["gemms"]:
                print(
                    f"  {m['name']}: G{g['G']} M{g['M']} N{g['N']} K{g['K']} unit {g['unit']} (group {g['group_size']}), "
                    f"k order {g['k_order']}, pad_k {g['pad_k']}, split_k {g['split_k']}"
                )
    return 0


def _inputs_text(used: dict) -> str:
    seed = used.get("seed")
    if seed is None:
        return "the harness's fixed pattern 0.5, -1, 0.75 (no -rand)"
    return (
        f"seed {seed}, {used.get('rand_type', 'int')} generator in [{used.get('rand_min')}, {used.get('rand_max')}), "
        f"random side {used.get('rand_side', 'both')}"
    )


def _ensemble_summary(result, args) -> dict:
    """The verifier's metrics over the kernel's atomic add orders (split-K with ≥ 3 partials)."""
    from models.kernels import ATOMIC_ORDERS

    members = ATOMIC_ORDERS.members if args.members is None else args.members
    if members < 1:
        raise UsageError(f"--members: must be a positive integer, got {members}")
    keys = ("n_exact", "max_epsilon_diff", "max_abs_diff", "max_rel_diff", "rms")
    values: dict[str, list[float]] = {k: [] for k in keys}
    passed = 0
    validation = result.validation_output.reshape(result.shape)
    for k16 in result.members(members):
        comparison, verdict = _measure(validation, k16.reshape(result.shape), args)
        d = comparison.to_dict()
        for k in keys:
            values[k].append(float(d[k]))
        passed += verdict is not None and verdict.exit_code == 0
    return {
        "n_split": result.ensemble.n_split,
        "members": members,
        "granularity": ATOMIC_ORDERS.granularity,
        "seed": ATOMIC_ORDERS.seed,
        "ranges": {k: [min(v), max(v)] for k, v in values.items()},
        "members_passing": passed if (args.verifier or args.threshold) else None,
    }


def _cmd_run(args) -> int:
    from .run import run

    if args.check:
        return _cmd_check(args)

    result = run(
        args.config,
        hw=args.hw,
        kernel=args.kernel,
        validator=args.validator,
        perf_config=args.perf_config,
        rand_min=args.rand_min,
        rand_max=args.rand_max,
        seed=args.seed,
        rand_type=args.rand_type,
        progress=False if args.no_progress else None,
    )
    comparison, verdict = _measure(
        result.validation_output.reshape(result.shape), result.kernel_output.reshape(result.shape), args
    )
    p = result.problem
    header = {
        "config": result.config.name or " ".join(result.config.source.split())[:100],
        "direction": p.direction,
        "kernel": result.kernel.key,
        "validator": result.validator.key,
        "hw": args.hw,
        "shape": "x".join(map(str, result.shape)),
        "inputs": _inputs_text(result.inputs_used),
    }
    ensemble = _ensemble_summary(result, args) if result.ensemble is not None else None
    if ensemble is not None:
        header["atomics"] = (
            f"split-K adds {ensemble['n_split']} partial sums per output with fp32 atomics: the "
            f"GPU's result depends on their order, which varies run to run; the line below is the "
            f"ascending order, the ensemble ({ensemble['members']} orders) follows"
        )
    gpu = None
    if args.gpu_output is not None:
        gpu = result.against(_load_array(args.gpu_output, "--gpu-output", integers_ok=True))
    extra = {k: v for k, v in (("ensemble", ensemble), ("gpu", gpu and gpu.to_dict())) if v}
    code = _emit(comparison, verdict, args, header, extra=extra or None)
    if ensemble is not None and args.format == "text":
        print(
            f"ensemble over {ensemble['members']} atomic add orders (random per output {ensemble['granularity']}, "
            f"seed {ensemble['seed']}), range of each metric:"
        )
        for k, (lo, hi) in ensemble["ranges"].items():
            print(f"{k:>18s}: {lo:.6g} .. {hi:.6g}")
        if ensemble["members_passing"] is not None:
            print(f"{'verdict':>18s}: {ensemble['members_passing']}/{ensemble['members']} add orders pass")
    if gpu is not None:
        if args.format == "text":
            print(gpu.format_text())
        return 1 if gpu.answer == "differs" else code
    return code


def _cmd_compare(args) -> int:
    validation = _load_array(args.validation, "VALIDATION")
    kernel = _load_array(args.kernel, "KERNEL")
    if validation.shape != kernel.shape:
        raise UsageError(f"arrays: shapes differ, {validation.shape} vs {kernel.shape}")
    comparison, verdict = _measure(validation, kernel, args)
    return _emit(comparison, verdict, args, {"validation": args.validation, "kernel": args.kernel})


def _load_array(path: str, what: str, integers_ok: bool = False):
    import numpy as np

    try:
        data = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise UsageError(f"{what}: no such file {path!r}") from None
    except (OSError, ValueError) as err:
        raise UsageError(f"{what}: cannot read {path!r} as .npy/.npz ({' '.join(str(err).split())})") from None
    if hasattr(data, "files"):
        if len(data.files) != 1:
            raise UsageError(
                f"{what}: {path!r} holds {len(data.files)} arrays ({', '.join(data.files)}); give an .npz with one"
            )
        data = data[data.files[0]]
    if integers_ok and data.dtype == np.uint16:  # fp16 bit patterns
        return data
    if data.dtype.kind != "f" and str(data.dtype) != "bfloat16":
        raise UsageError(f"{what}: dtype {data.dtype} is not a float type (fp16, bf16, fp32, fp64)")
    return data


def _build_parser():
    parser = _Parser(
        prog="fp16emu",
        description="Bit-exact CPU emulation of GPU fp16 kernels, and why they differ from their reference.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_run(sub).set_defaults(func=_cmd_run)
    p = sub.add_parser("compare", help="compare two arrays you already have (.npy / .npz)")
    p.add_argument("validation", help="the reference (validation) array")
    p.add_argument("kernel", help="the kernel's array")
    p.add_argument("--format", choices=("text", "json"), default="text")
    _add_verdict_options(p)
    p.set_defaults(func=_cmd_compare)
    from . import design, explain, identify_cli, study

    study.register_cli(sub)
    explain.register_cli(sub)
    identify_cli.register_cli(sub)
    design.register_cli(sub)
    return parser


def _config_first(argv: list[str]) -> list[str]:
    """``fp16emu run "-batchsize=64 …"``: a config text that starts with '-' is not an option."""
    if (
        len(argv) >= 2
        and argv[0] in ("run", "explain")
        and argv[1].startswith("-")
        and (" " in argv[1] or argv[1].count("=") == 1 and not argv[1].startswith("--"))
    ):
        return [argv[0], f"--config={argv[1]}"] + argv[2:]
    return argv


def main(argv=None) -> int:
    try:
        argv = _config_first(list(sys.argv[1:] if argv is None else argv))
        args = _build_parser().parse_args(argv)
        if args.command in ("run", "explain"):
            args.config = args.config if args.config is not None else args.config_option
            if not args.config:
                raise UsageError(
                    "run: give a CONFIG (an argument string, a RUN line, an MIOpenDriver command or a suite test name)"
                )
        return args.func(args)
    except UsageError as err:
        print(f"fp16emu: error: {err}", file=sys.stderr)
        return 2
    except ValueError as err:  # bad config or input, reported by the library (ConfigError included)
        msg = " ".join(str(err).split()) or type(err).__name__
        print(f"fp16emu: error: {msg}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into head and the like
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("fp16emu: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
