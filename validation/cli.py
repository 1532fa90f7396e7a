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
    p = sub.add_parser("run", help="emulate one convolution test: kernel vs validation",
                       description="CONFIG: a miopen-gen/rocmlir-gen argument string, a lit RUN line, an "
                                   "MIOpenDriver conv command, or a suite test name (quote it).")
    p.add_argument("config")
    p.add_argument("--hw", default="mi200", help="mi100, mi200, mi300 (default mi200)")
    p.add_argument("--kernel", default=None, help="xdlops or nonxdlops (default: the config's own)")
    p.add_argument("--validator", default="cpu", help="cpu, gpu, cpu-acc4, cpu-ftz, mlir (default cpu)")
    p.add_argument("--perf-config", default=None, help="rocMLIR tuning string (default: the 2022 default)")
    p.add_argument("--rand-min", type=int, default=None)
    p.add_argument("--rand-max", type=int, default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_verdict_options(p)
    return p


def _add_verdict_options(p):
    p.add_argument("--verifier", default=None, help="a verifier preset (rocmlir-2022, rocmlir, study-2022, mlu-ops, torch, miopen)")
    p.add_argument("--threshold", action="append", default=[], metavar="METRIC=VALUE",
                   help="a threshold per metric (repeatable); overrides the preset's")
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


def _emit(comparison, args, header: dict) -> int:
    from . import verifier as verifier_mod

    thresholds = _parse_thresholds(args.threshold)
    verdict = None
    if args.verifier or thresholds:
        verdict = verifier_mod.verdict(comparison, preset=args.verifier, thresholds=thresholds)
    if args.format == "json":
        doc = dict(header)
        doc.update(comparison.to_dict())
        if verdict is not None:
            doc["flags"] = verdict.flags
            doc["verdict"] = "pass" if verdict.passed else "fail"
        else:
            doc.setdefault("flags", None)
            doc.setdefault("verdict", None)
        print(json.dumps(doc, indent=1, default=float))
    else:
        for key, value in header.items():
            print(f"{key:>10s}: {value}")
        print(comparison.format_text(report=args.report))
        if verdict is not None:
            print(verdict.format_text())
    if verdict is None:
        return 0
    return 0 if verdict.passed else 1


def _cmd_run(args) -> int:
    from . import metrics
    from .run import run

    result = run(args.config, hw=args.hw, kernel=args.kernel, validator=args.validator,
                 perf_config=args.perf_config, rand_min=args.rand_min, rand_max=args.rand_max,
                 seed=args.seed, progress=False if args.no_progress else None)
    comparison = metrics.compare(result.validation_output.reshape(result.shape),
                                 result.kernel_output.reshape(result.shape))
    p = result.problem
    header = {"config": result.config.name or " ".join(result.config.source.split())[:100],
              "direction": p.direction, "kernel": result.kernel.name, "validator": result.validator.name,
              "hw": args.hw, "shape": "x".join(map(str, result.shape))}
    return _emit(comparison, args, header)


def _cmd_compare(args) -> int:
    from . import metrics

    validation = _load_array(args.validation, "VALIDATION")
    kernel = _load_array(args.kernel, "KERNEL")
    if validation.shape != kernel.shape:
        raise UsageError(f"arrays: shapes differ, {validation.shape} vs {kernel.shape}")
    comparison = metrics.compare(validation, kernel)
    return _emit(comparison, args, {"validation": args.validation, "kernel": args.kernel})


def _load_array(path: str, what: str):
    import numpy as np

    try:
        data = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise UsageError(f"{what}: no such file {path!r}") from None
    except (OSError, ValueError) as err:
        raise UsageError(f"{what}: cannot read {path!r} as .npy/.npz ({' '.join(str(err).split())})") from None
    if hasattr(data, "files"):
        if len(data.files) != 1:
            raise UsageError(f"{what}: {path!r} holds {len(data.files)} arrays ({', '.join(data.files)}); give an .npz with one")
        data = data[data.files[0]]
    if data.dtype.kind != "f" and str(data.dtype) != "bfloat16":
        raise UsageError(f"{what}: dtype {data.dtype} is not a float type (fp16, bf16, fp32, fp64)")
    return data


def _build_parser():
    parser = _Parser(prog="fp16emu", description="Bit-exact CPU emulation of GPU fp16 kernels, and why they differ from their reference.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_run(sub).set_defaults(func=_cmd_run)
    p = sub.add_parser("compare", help="compare two arrays you already have (.npy / .npz)")
    p.add_argument("validation", help="the reference (validation) array")
    p.add_argument("kernel", help="the kernel's array")
    p.add_argument("--format", choices=("text", "json"), default="text")
    _add_verdict_options(p)
    p.set_defaults(func=_cmd_compare)
    return parser


def main(argv=None) -> int:
    try:
        args = _build_parser().parse_args(argv)
        return args.func(args)
    except UsageError as err:
        print(f"fp16emu: error: {err}", file=sys.stderr)
        return 2
    except ValueError as err:  # bad config or input, reported by the library (ConfigError included)
        msg = " ".join(str(err).split()) or type(err).__name__
        print(f"fp16emu: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fp16emu: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
