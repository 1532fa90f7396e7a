"""The ``fp16emu`` command: argument handling and printing only.

Exit codes: 0 pass (or no verdict asked), 1 fail, 2 usage or input error (one line, no traceback).
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

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
        help="the harness's random generator: int draws integers in [min, max), float reals in [min, max] "
        "(default: the config's -rand_type, else int)",
    )
    p.add_argument(
        "--gpu-output",
        default=None,
        metavar="FILE",
        help="the GPU kernel's own output (.npy, FILE.npz:KEY, or a raw dump with --gpu-output-format; fp16, or "
        "its fp32 copy; the result tensor's shape or flat): compared with the emulated kernel bit for bit, an "
        "answer of bug or rounding",
    )
    p.add_argument(
        "--gpu-output-format",
        default=None,
        choices=("fp16", "fp32"),
        help="--gpu-output is a raw little-endian binary dump of this element format",
    )
    p.add_argument(
        "--layout",
        default=None,
        metavar="LETTERS",
        help="the memory order of --gpu-output, e.g. nchw or nhwk (default: the config's result layout)",
    )
    p.add_argument(
        "--inputs",
        default=None,
        metavar="DIR|x.npy,w.npy[,dy.npy]",
        help="run on your own tensors (fp16, or exact fp32 copies): a folder with x.npy, w.npy, dy.npy as the "
        "direction needs, or the files in the order x, w, dy (or NAME=FILE); needed for MIOpenDriver commands",
    )
    p.add_argument(
        "--save",
        default=None,
        metavar="DIR",
        help="write kernel.npy (result tensor shape, fp16), validation.npy, the input tensors and run.json",
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


def _add_verdict_options(p, default_text="run: the config's harness verifier; compare: rocmlir"):
    p.add_argument(
        "--verifier",
        default=None,
        help="a verifier preset (rocmlir-2022, rocmlir, study-2022, mlu-ops, torch, miopen); default " + default_text,
    )
    p.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="METRIC=VALUE",
        help="a limit per metric (repeatable; the names of the check lines and JSON keys, e.g. max_abs_diff, "
        "max_epsilon_diff, rms; the labels absDiff, relDiff, epsilonDiff, RMS are accepted); overrides the preset's",
    )
    p.add_argument("--report", action="store_true", help="histograms and the worst elements")
    p.add_argument("--plot", default=None, metavar="FILE.png", help="save a titled picture (validation.plots)")


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


def _measure(validation, kernel, args, verifier: str, dtype: str | None = None):
    """Compare as ``verifier`` (a preset name) measures and judge; returns (comparison, verdict)."""
    from . import metrics
    from . import verifier as verifier_mod

    thresholds = _parse_thresholds(args.threshold)
    if dtype is None:
        dtype = (
            metrics.resolve_dtype(kernel.dtype)
            if kernel.dtype.kind == "f" or str(kernel.dtype) == "bfloat16"
            else "fp64"
        )
    options = verifier_mod.preset(verifier, dtype).compare_options()
    comparison = metrics.compare(validation, kernel, **options)
    return comparison, verifier_mod.verdict(comparison, preset=verifier, thresholds=thresholds)


def _verifier_text(name: str, source: str) -> str:
    extra = ""
    if name == "study-2022":
        extra = ", run set fair_3 (the study's verifier after both fixes; the study's MI200/MI100 fair_3 results)"
    return f"{name}{extra} ({source})"


def _emit(comparison, verdict, args, header: dict, extra: dict | None = None, middle: str = "", axes=None) -> int:
    """Print the header, the metrics, ``middle`` (ensemble, GPU answer), then the verdict: its
    checks, the NaN/inf check, the flags and the final PASS/FAIL line."""
    if args.format == "json":
        doc = dict(header)
        doc.update(verdict.to_dict() if verdict is not None else comparison.to_dict())
        doc.update(extra or {})
        if axes is not None:  # each reported element's coordinates by axis name too
            elements = [*doc.get("worst", []), *doc.get("nonfinite_elements", []), *doc.get("at_max", {}).values()]
            for e in elements:
                if e is not None and len(e["coords"]) == len(axes):
                    e["where"] = dict(zip(axes, e["coords"]))
        print(json.dumps(doc, indent=1))
    else:
        for key, value in header.items():
            print(f"{key:>10s}: {value}")
        print(comparison.format_text(report=args.report, axes=axes))
        if middle:
            print(middle)
        if verdict is not None:
            print(verdict.format_text())
    return 0 if verdict is None else verdict.exit_code


def _warn(messages) -> None:
    for m in messages:
        print(f"fp16emu: warning: {m}", file=sys.stderr)


def _check_inputs(config, args) -> dict:
    """What a run would fill the tensors with (``--check``: nothing is computed or read)."""
    from .configs import ConfigError
    from .inputs import resolve_inputs

    if args.inputs:
        return {"distribution": "user", "text": f"the user's tensors: {args.inputs}", "warnings": []}
    try:
        _, info = resolve_inputs(
            config, rand_min=args.rand_min, rand_max=args.rand_max, seed=args.seed, rand_type=args.rand_type
        )
    except ConfigError as err:
        return {"distribution": None, "text": str(err), "warnings": []}
    _warn(info.warnings)
    return info.to_dict()


def _cmd_check(args) -> int:
    from .configs import check_rand_bound, check_seed
    from .run import plan

    check_seed(args.seed)  # as run() would: --check answers what the run would answer
    check_rand_bound(args.rand_min, "--rand-min"), check_rand_bound(args.rand_max, "--rand-max")
    config, kmodel, vmodel = plan(
        args.config, hw=args.hw, kernel=args.kernel, validator=args.validator, perf_config=args.perf_config
    )
    p = config.problem
    doc = {
        "config": config.label,
        "direction": p.direction,
        "result_shape": list(p.tensor_shape(p.result_role)),
        "models": [],
        "inputs": _check_inputs(config, args),
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
        print(f"  inputs: {doc['inputs']['text']}")
        for m in doc["models"]:
            for g in m["gemms"]:
                print(
                    f"  {m['name']}: G{g['G']} M{g['M']} N{g['N']} K{g['K']} unit {g['unit']} (group {g['group_size']}), "
                    f"k order {g['k_order']}, pad_k {g['pad_k']}, split_k {g['split_k']}"
                )
    return 0


def _ensemble_summary(result, args, verifier: str) -> dict:
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
        comparison, verdict = _measure(validation, k16.reshape(result.shape), args, verifier)
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
        "members_passing": passed,
    }


def _cmd_run(args) -> int:
    from .configs import parse_config
    from .run import harness_verifier, run

    if args.check:
        return _cmd_check(args)
    config = parse_config(args.config)
    if args.inputs is not None and config.random.mode != "miopen_driver" and not args.inputs.strip():
        raise UsageError("--inputs: give a folder or x.npy,w.npy[,dy.npy]")
    loaded = None
    if args.gpu_output is not None:
        from .arrays import load_array
        from .configs.records import n_out_elements

        # read and check the GPU's file before the emulation spends its compute
        count = n_out_elements(config.problem)
        loaded = load_array(args.gpu_output, "--gpu-output", raw_format=args.gpu_output_format, count=count)
        if loaded.array.size != count:
            raise UsageError(
                f"--gpu-output: {loaded.source} holds {loaded.array.size} elements; the "
                f"{config.problem.result_role} tensor of this config has {count}"
            )
    result = run(
        config,
        hw=args.hw,
        kernel=args.kernel,
        validator=args.validator,
        perf_config=args.perf_config,
        rand_min=args.rand_min,
        rand_max=args.rand_max,
        seed=args.seed,
        rand_type=args.rand_type,
        progress=False if args.no_progress else None,
        inputs=args.inputs,
    )
    info = result.inputs_info
    _warn(info.warnings)
    if args.verifier:
        verifier, vsource = args.verifier, "option --verifier"
    else:
        verifier, vsource = harness_verifier(result.config)
    comparison, verdict = _measure(result.validation_array, result.kernel_array, args, verifier, "fp16")
    p = result.problem
    header = {
        "config": result.config.label,
        "direction": p.direction,
        "kernel": result.kernel.key,
        "validator": result.validator.key,
        "hw": args.hw,
        "shape": f"{'x'.join(map(str, result.shape))} ({''.join(result.axes)}, the {p.result_role} tensor)",
        "inputs": info.text(),
        "verifier": _verifier_text(verifier, vsource),
    }
    extra: dict = {
        "inputs": info.to_dict(),
        "axes": list(result.axes),
        "verifier": {"name": verifier, "source": vsource, "run_set": "fair_3" if verifier == "study-2022" else None},
        "warnings": list(info.warnings),
    }
    ensemble = _ensemble_summary(result, args, verifier) if result.ensemble is not None else None
    middle = []
    if ensemble is not None:
        header["atomics"] = (
            f"split-K adds {ensemble['n_split']} partial sums per output with fp32 atomics: the "
            f"GPU's result depends on their order, which varies run to run; the metrics below are the "
            f"ascending order's, the ensemble ({ensemble['members']} orders) follows"
        )
        extra["ensemble"] = ensemble
        middle.append(
            f"ensemble over {ensemble['members']} atomic add orders (random per output {ensemble['granularity']}, "
            f"seed {ensemble['seed']}), range of each metric:"
        )
        for k, (lo, hi) in ensemble["ranges"].items():
            middle.append(f"{k:>18s}: {lo:.6g} .. {hi:.6g}")
        middle.append(
            f"{'verdict':>18s}: {ensemble['members_passing']}/{ensemble['members']} add orders pass {verifier}"
        )
    gpu = None
    if loaded is not None:
        from .gpu import from_layout

        arr = loaded.array
        if args.layout is not None:
            arr = from_layout(arr, p, args.layout)
        gpu = result.against(arr)
        extra["gpu"] = {**gpu.to_dict(), "file": loaded.source, "layout": args.layout or p.layout(p.result_role)}
        middle.append(gpu.format_text())
    elif args.layout is not None or args.gpu_output_format is not None:
        _warn(["--layout/--gpu-output-format have no effect without --gpu-output"])
    if args.save is not None:
        from .inputs import save_run

        written = save_run(result, args.save, command="fp16emu " + " ".join(sys.argv[1:]))
        extra["saved"] = {"dir": args.save, "files": written}
        print(f"saved: {', '.join(written)} in {args.save}", file=sys.stderr)
    if args.plot:
        from . import plots

        plots.save(plots.run_figure(result, comparison, {"hardware": args.hw, "inputs": info.text()}), args.plot)
    code = _emit(comparison, verdict, args, header, extra=extra, middle="\n".join(middle), axes=result.axes)
    if gpu is not None:
        return 1 if gpu.answer == "differs" else code
    return code


def _cmd_compare(args) -> int:
    import math

    from . import metrics
    from .arrays import load_array, parse_shape

    shape = parse_shape(args.shape) if args.shape is not None else None
    count = math.prod(shape) if shape is not None else None
    hint = "--dtype fp16 --shape N,C,H,W, with --validation-dtype fp32 for an fp32 validation dump"
    raw = {  # a file that is neither .npy nor .npz is a raw dump: its format and --shape must be given
        "VALIDATION": (args.validation_dtype or args.dtype) if shape is not None else None,
        "KERNEL": args.dtype if shape is not None else None,
    }
    if args.validation_dtype is not None and args.dtype is None:
        raise UsageError("--validation-dtype: give the kernel's --dtype too")
    validation = load_array(
        args.validation, "VALIDATION", raw_format=raw["VALIDATION"], count=count, raw_hint=hint
    ).array
    kernel = load_array(args.kernel, "KERNEL", raw_format=raw["KERNEL"], count=count, raw_hint=hint).array
    if shape is not None:
        for name, a in (("VALIDATION", validation), ("KERNEL", kernel)):
            if a.size != count:
                raise UsageError(f"--shape {args.shape}: {name} has {a.size} elements, the shape {count}")
        validation, kernel = validation.reshape(shape), kernel.reshape(shape)
    elif validation.shape != kernel.shape:
        if validation.size == kernel.size and (validation.ndim == 1 or kernel.ndim == 1):
            shape = kernel.shape if validation.ndim == 1 else validation.shape
            validation, kernel = validation.reshape(shape), kernel.reshape(shape)
        else:
            raise UsageError(
                f"arrays: shapes differ, {validation.shape} vs {kernel.shape} (give --shape for flat dumps)"
            )
    warnings_: list[str] = []
    if kernel.dtype == np.uint16:
        kernel = kernel.view(np.float16)
    if validation.dtype == np.uint16:
        validation = validation.view(np.float16)
    if args.dtype is not None:
        dtype = args.dtype
        kernel = _as_format(kernel, dtype, "KERNEL")
    else:
        dtype = metrics.resolve_dtype(kernel.dtype)
        if kernel.dtype.itemsize > 2 and _holds_fp16(kernel):
            warnings_.append(
                f"KERNEL is {dtype} but every value is an fp16 value: if the kernel wrote fp16, give --dtype fp16 "
                f"(judged in {dtype} ulps now)"
            )
    verifier, vsource = (args.verifier, "option --verifier") if args.verifier else ("rocmlir", "default for compare")
    comparison, verdict = _measure(validation, kernel, args, verifier, dtype)
    _warn(warnings_)  # after the verifier accepted the arrays: a refusal (exit 2) is one line alone
    header = {
        "validation": args.validation,
        "kernel": args.kernel,
        "dtype": f"{dtype} ({'option --dtype' if args.dtype else 'the KERNEL array type'})",
        "verifier": _verifier_text(verifier, vsource),
    }
    extra = {"verifier": {"name": verifier, "source": vsource}, "warnings": warnings_}
    if args.plot:
        from . import plots

        fields = {"config": f"{args.validation} vs {args.kernel}", "kernel": args.kernel, "validator": args.validation}
        fields["inputs"] = f"arrays {validation.dtype} {'x'.join(map(str, validation.shape))}, your own"
        plots.save(plots.compare_figure(validation, kernel, comparison, fields), args.plot)
    return _emit(comparison, verdict, args, header, extra=extra)


def _holds_fp16(a) -> bool:
    from .arrays import convert_exactly

    return convert_exactly(a, np.float16)[1] is None


def _as_format(a, dtype: str, what: str):
    """``a`` as the kernel's format ``dtype`` when every value is one of that format's values."""
    import ml_dtypes

    from .arrays import convert_exactly

    target = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32}[dtype]
    if a.dtype == np.dtype(target):
        return a
    t, i = convert_exactly(a, target)
    if i is not None:
        raise UsageError(
            f"--dtype {dtype}: {what} element {i} = {np.float64(a.reshape(-1)[i])!r} is not a {dtype} value; give the "
            f"kernel's own output format (fp16, bf16 or fp32)"
        )
    return t


def _build_parser():
    parser = _Parser(
        prog="fp16emu",
        description="Bit-exact CPU emulation of GPU fp16 kernels, and why they differ from their reference.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_run(sub).set_defaults(func=_cmd_run)
    p = sub.add_parser(
        "compare",
        help="compare two arrays you already have (.npy / FILE.npz:KEY / raw dumps)",
        description="VALIDATION and KERNEL: FILE.npy, FILE.npz[:KEY], or a raw binary dump (any other file: "
        "the tensor's bytes, little-endian, in memory order), read with --dtype (and --validation-dtype) "
        "as its element format and --shape as its size: the file must hold exactly prod(shape) elements.",
    )
    p.add_argument("validation", help="the reference (validation) array: FILE.npy, FILE.npz[:KEY] or a raw dump")
    p.add_argument("kernel", help="the kernel's array: FILE.npy, FILE.npz[:KEY] or a raw dump")
    p.add_argument(
        "--dtype",
        default=None,
        choices=("fp16", "bf16", "fp32"),
        help="the kernel's own format (an fp16 result saved as fp32 is judged in fp16 ulps), and the element "
        "format of raw dumps; default the array's type",
    )
    p.add_argument(
        "--validation-dtype",
        default=None,
        choices=("fp16", "bf16", "fp32"),
        help="the element format of a raw VALIDATION dump when it is not --dtype (e.g. fp32 beside an fp16 kernel)",
    )
    p.add_argument(
        "--shape",
        default=None,
        metavar="D0,D1,...",
        help="reshape both arrays; the size of raw dumps (needed for them)",
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    _add_verdict_options(p, "rocmlir (fails on NaN/inf mismatches)")
    p.set_defaults(func=_cmd_compare)
    from . import design, explain, identify_cli, study, units

    units.register_cli(sub)
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
            given = sum(a == "--config" or a.startswith("--config=") for a in argv[1:]) + (args.config is not None)
            if given > 1:
                raise UsageError(
                    f"{args.command}: the config is given {given} times (CONFIG and --config); give it once"
                )
            args.config = args.config if args.config is not None else args.config_option
            if not args.config:
                raise UsageError(
                    "run: give a CONFIG (an argument string, a RUN line, an MIOpenDriver command or a suite test name)"
                )
        if getattr(args, "plot", None):  # before any computation: a picture that cannot be written is exit 2
            from .plots import check_path

            check_path(args.plot)
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
