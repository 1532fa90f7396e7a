"""``fp16emu run`` (one test: emulated kernel against the validation, the GPU's output judged) and
``fp16emu compare`` (two arrays you already have): parse, call the library, print."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from ..configs import ConfigError, parse_config
from ..plots import save
from ..run import load_gpu_output, load_pair, plan, run, save_run
from ..run.arrays import RAW_FORMATS
from ..run.gpu import check_layout
from ..run.inputs import check_save_dir, resolve_inputs, save_names
from ..run.plots import compare_figure, run_figure
from ..run.reading import check_judging
from ..run.runner import OPTION_NAMES, check_overrides, gemm_order_note, plan_gemms
from ..verify import compare_default, measure
from .common import (
    HW_HELP,
    UsageError,
    add_format_option,
    add_verdict_options,
    emit,
    parse_thresholds,
    verifier_text,
    warn,
)

__all__ = ["register_cli"]


def register_cli(sub) -> None:
    """Add ``run`` and ``compare`` to an argparse ``subparsers``."""
    _add_run(sub).set_defaults(func=_cmd_run)
    _add_compare(sub).set_defaults(func=_cmd_compare)


def _add_run(sub):
    p = sub.add_parser(
        "run",
        help="emulate one convolution test: kernel vs validation",
        description="CONFIG: a miopen-gen/rocmlir-gen argument string, a lit RUN line, an "
        "MIOpenDriver conv command, or a suite test name (quote it).",
    )
    p.add_argument("config", nargs="?")
    p.add_argument("--config", dest="config_option", default=None, help=argparse.SUPPRESS)
    p.add_argument("--hw", default="mi200", help=HW_HELP)
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
        choices=("fp16", "bf16", "fp32"),
        help="--gpu-output is a raw little-endian binary dump of this element format (bf16: a bf16 config's output)",
    )
    p.add_argument(
        "--layout",
        default=None,
        metavar="LETTERS",
        help="the memory order of --gpu-output, e.g. nchw or nhwk (default: the config's result layout)",
    )
    p.add_argument(
        "--search-budget",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="when --gpu-output differs from the emulated kernel, search this long at most for the options it "
        "matches (layouts, other GPUs, kernels and tunings, seeds, input ranges); 0: no search (default 60)",
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
    add_format_option(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--check", action="store_true", help="only read the config and print the GEMMs, units and orders that would run"
    )
    add_verdict_options(p)
    return p


def _add_compare(sub):
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
        choices=tuple(RAW_FORMATS),
        help="the kernel's own format (an fp16 result saved as fp32 is judged in fp16 ulps), and the element "
        "format of raw dumps and of fp8 .npy files (np.save writes fp8 as untyped bytes); default the array's type",
    )
    p.add_argument(
        "--validation-dtype",
        default=None,
        choices=tuple(RAW_FORMATS),
        help="the element format of a raw VALIDATION dump when it is not --dtype (e.g. fp32 beside an fp16 kernel)",
    )
    p.add_argument(
        "--shape",
        default=None,
        metavar="D0,D1,...",
        help="reshape both arrays; the size of raw dumps (needed for them)",
    )
    add_format_option(p)
    add_verdict_options(p, "rocmlir (fails on NaN/inf mismatches)")
    return p


def _check_inputs(config, args) -> dict:
    """What a run would fill the tensors with (``--check``: nothing is computed or read)."""
    if args.inputs:
        return {"distribution": "user", "text": f"the user's tensors: {args.inputs}", "warnings": []}
    try:
        _, info = resolve_inputs(
            config, rand_min=args.rand_min, rand_max=args.rand_max, seed=args.seed, rand_type=args.rand_type
        )
    except ConfigError as err:
        return {"distribution": None, "text": str(err), "warnings": []}
    warn(info.warnings)
    return info.to_dict()


def _cmd_check(args) -> int:
    # as run() would: --check answers what the run would answer
    check_overrides(args.seed, args.rand_min, args.rand_max, names=("--seed", "--rand-min", "--rand-max"))
    config, kmodel, vmodel = plan(
        args.config, hw=args.hw, kernel=args.kernel, validator=args.validator, perf_config=args.perf_config
    )
    check_judging(  # the run's own checks, before anything is computed
        config,
        kmodel.input,
        verifier=args.verifier or None,
        thresholds=parse_thresholds(args.threshold),
        layout=args.layout,
        members=args.members,
        search_budget=args.search_budget,
        names=OPTION_NAMES,
    )
    p = config.problem
    doc = {
        "config": config.label,
        "direction": p.direction,
        "result_shape": list(config.gemm.c_shape if config.gemm else p.tensor_shape(p.result_role)),
        "format": kmodel.input,
        "models": [],
        "inputs": _check_inputs(config, args),
    }
    if config.gemm is not None:
        doc["gemm"] = {**config.gemm.to_dict(), "order": gemm_order_note(kmodel)}
    for model in (kmodel, vmodel):
        doc["models"].append({"name": model.key, "gemms": plan_gemms(config, model)})
    if args.format == "json":
        print(json.dumps(doc, indent=1))
    else:
        what = p.direction if config.gemm is None else config.gemm.describe()
        print(f"{doc['config']}: {what}, {doc['format']} tensors, result {'x'.join(map(str, doc['result_shape']))}")
        if config.gemm is not None:
            print(f"  as a convolution: {doc['gemm']['as_convolution']}")
            print(f"  order: {doc['gemm']['order']}")
            print(f"  harness: {doc['gemm']['harness']}")
        print(f"  inputs: {doc['inputs']['text']}")
        for m in doc["models"]:
            for g in m["gemms"]:
                print(
                    f"  {m['name']}: G{g['G']} M{g['M']} N{g['N']} K{g['K']} unit {g['unit']} (group {g['group_size']}), "
                    f"k order {g['k_order']}, pad_k {g['pad_k']}, split_k {g['split_k']}"
                )
    return 0


def _cmd_run(args) -> int:
    if args.check:
        return _cmd_check(args)
    config = parse_config(args.config)
    if args.inputs is not None and config.random.mode != "miopen_driver" and not args.inputs.strip():
        raise UsageError("--inputs: give a folder or x.npy,w.npy[,dy.npy]")
    loaded = None
    if args.save is not None:  # a folder, or a file name in it, that cannot be written: exit 2 before computing
        check_save_dir(args.save, names=save_names(config.problem))
    if args.gpu_output is not None:  # read and check the GPU's file before the emulation spends its compute
        loaded = load_gpu_output(args.gpu_output, config.problem, "--gpu-output", raw_format=args.gpu_output_format)
    elif args.layout is not None or args.gpu_output_format is not None:
        if args.layout is not None:
            check_layout(config.problem, args.layout, "--layout")  # refused as --check refuses it
        warn(["--layout/--gpu-output-format have no effect without --gpu-output"])
    check_overrides(args.seed, args.rand_min, args.rand_max, names=("--seed", "--rand-min", "--rand-max"))
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
        gpu_output=loaded,
        layout=args.layout if loaded is not None else None,
        verifier=args.verifier or None,
        thresholds=parse_thresholds(args.threshold),
        members=args.members,
        search_budget=args.search_budget,
        command=_options(config, args),
    )
    judged = result.judgement  # the verdict and reading: decided by the library, printed here
    info = result.inputs_info
    warn(info.warnings)
    vsource = "option --verifier" if args.verifier else judged.verifier_source
    verifier = judged.verifier
    p = result.problem
    gemm = result.config.gemm
    axes = judged.axes
    header = {
        "config": result.config.label,
        "direction": p.direction,
        "kernel": result.kernel.key,
        "validator": result.validator.key,
        "hw": args.hw,
        "format": f"{result.format} tensors (-t {result.config.dtype}), {result.format} output; metrics in {result.format} ulps",
        "shape": f"{'x'.join(map(str, result.shape))} ({''.join(result.axes)}, the {p.result_role} tensor)",
        "inputs": info.text(),
        "verifier": verifier_text(verifier, vsource),
    }
    if gemm is not None:
        header = {
            "config": header["config"],
            "operation": f"{gemm.describe()}, {result.format}; run as the 1x1 forward convolution "
            f"(filter = A, input = B, output = C)",
            **{k: v for k, v in header.items() if k not in ("config", "direction", "shape")},
            "shape": f"{'x'.join(map(str, gemm.c_shape))} ({''.join(axes)}, the matrix C)",
            "order": gemm_order_note(result.kernel),
            "harness": gemm.to_dict()["harness"],
        }
    extra: dict = {
        "reading": judged.reading,
        "inputs": info.to_dict(),
        "axes": list(axes),
        "verifier": {"name": verifier, "source": vsource, "run_set": "fair_3" if verifier == "study-2022" else None},
        "warnings": list(info.warnings),
    }
    middle = []
    if gemm is not None:
        extra["gemm"] = gemm.to_dict()
    ensemble = judged.ensemble
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
    gpu = judged.gpu
    if gpu is not None:
        doc = judged.to_dict()
        header["judged"] = f"the GPU's output {loaded.source} (the emulated kernel's own verdict follows the answer)"
        extra["gpu"] = {**doc["gpu"], "layout": args.layout or p.layout(p.result_role)}
        extra["emulated_kernel"] = doc["emulated_kernel"]
        middle.append(gpu.format_text())
        if judged.emulated_verdict is not None:
            middle.append(
                f"the emulated kernel ({result.kernel.key} on {args.hw}) against the same validation: "
                f"{'PASS' if judged.emulated_verdict.exit_code == 0 else 'FAIL'} by {verifier}"
            )
        if judged.search is not None:
            middle.append(judged.search.format_text())
        if judged.reading != "rounding":
            middle.append(judged.reading_text())
    if args.save is not None:
        written = save_run(result, args.save, command="fp16emu " + " ".join(sys.argv[1:]))
        extra["saved"] = {"dir": args.save, "files": written}
        print(f"saved: {', '.join(written)} in {args.save}", file=sys.stderr)
    if args.plot:
        shown = result if judged.gpu_array is None else replace(result, kernel_output=judged.gpu_array.reshape(-1))
        fields = {"hardware": args.hw, "inputs": info.text()}
        if loaded is not None:
            fields["kernel"] = f"GPU output {loaded.source}"
        save(run_figure(shown, judged.comparison, fields), args.plot)
    emit(judged.comparison, judged.verdict, args, header, extra=extra, middle="\n".join(middle), axes=axes)
    return judged.exit_code


def _options(config, args) -> dict:
    """The run's options as ``fp16emu run`` flags: each match's reproducing command is written from them."""
    p = config.problem
    return {
        "config": args.config,
        "hw": args.hw,
        "kernel": args.kernel,
        "perf_config": args.perf_config,
        "validator": None if args.validator == "cpu" else args.validator,
        "seed": args.seed,
        "rand_type": args.rand_type,
        "rand_min": args.rand_min,
        "rand_max": args.rand_max,
        "gpu_output": args.gpu_output,
        "gpu_output_format": args.gpu_output_format,
        "layout": args.layout,
        "own_layout": p.layout(p.result_role),
    }


def _cmd_compare(args) -> int:
    pair = load_pair(
        args.validation, args.kernel, dtype=args.dtype, validation_dtype=args.validation_dtype, shape=args.shape
    )
    validation, kernel, dtype = pair.validation, pair.kernel, pair.dtype
    limits = parse_thresholds(args.threshold)
    if args.verifier:
        verifier, vsource = args.verifier, "option --verifier"
    else:  # the default fits the format: rocMLIR's bf16/fp8 relDiff 1e-6 fails any one-ulp difference
        verifier, defaults, why = compare_default(dtype)
        vsource = f"default for compare: {why}"
        limits = {**defaults, **limits}
    comparison, verdict = measure(validation, kernel, verifier, dtype, limits)
    warn(pair.warnings)  # after the verifier accepted the arrays: a refusal (exit 2) is one line alone
    header = {
        "validation": args.validation,
        "kernel": args.kernel,
        "dtype": f"{dtype} ({'option --dtype' if pair.dtype_given else 'the KERNEL array type'})",
        "verifier": verifier_text(verifier, vsource),
    }
    extra = {"verifier": {"name": verifier, "source": vsource}, "warnings": list(pair.warnings)}
    if args.plot:
        fields = {"config": f"{args.validation} vs {args.kernel}", "kernel": args.kernel, "validator": args.validation}
        fields["inputs"] = f"arrays {validation.dtype} {'x'.join(map(str, validation.shape))}, your own"
        save(compare_figure(validation, kernel, comparison, fields), args.plot)
    return emit(comparison, verdict, args, header, extra=extra)
