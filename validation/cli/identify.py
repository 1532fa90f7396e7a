"""``fp16emu probe`` and ``fp16emu identify``: argument handling and printing only."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

import emu
from emu.operands import input_name
from emu.units import Format
from models import unit

from ..captures import is_capture
from ..captures.cli import identify_capture
from ..files import check_output_file
from ..identify import probes as probe_mod
from ..identify import study as identify_study
from ..identify.plots import identify_figure, identify_study_figure
from ..identify.rows import load_rows
from ..identify.search import identify
from ..plots import check_path, save
from ..study import atomic_reorders
from ..suites import suite_config, suite_entry
from .common import add_format_option

__all__ = ["register_cli"]


# --- command line -------------------------------------------------------------------------------


def register_cli(subparsers):
    """Add ``probe`` and ``identify`` to an argparse ``subparsers``; each handler (``func``)
    returns the exit code. Bad files and values raise ValueError (exit 2, one line)."""
    p = subparsers.add_parser(
        "probe",
        help="write a probe set (.npz) that tells the model space's points apart",
        description="Writes a, b (R, K) bit patterns of the operand format (--input: uint16 fp16/bf16, uint32 "
        "fp32 containers of tf32 values, uint8 fp8), c (R,) uint32 fp32 patterns (uint16 with --accumulator fp16) "
        "and the format's name (input). Run it on a GPU with `python -m validation.identify.probe_gpu FILE.npz`, "
        "then `fp16emu identify FILE.out.npz`.",
    )
    p.add_argument("--out", required=True, help="the .npz to write")
    p.add_argument(
        "--input",
        default="fp16",
        help="operand format: fp16 (default), bf16, tf32, e4m3, e5m2, e4m3fnuz, e5m2fnuz",
    )
    p.add_argument(
        "--k",
        default=None,
        help="products per row (default: the format's instruction K: 16 fp16/bf16, 8 tf32, 32 fp8)",
    )
    p.add_argument("--rows", default="4096", help="rows (default 4096)")
    p.add_argument("--seed", default="0", help="generator seed (default 0)")
    p.add_argument("--accumulator", default="fp32", help="fp32 (default) or fp16 (fp16, e4m3 and e5m2 operands)")
    p.add_argument(
        "--emulate",
        default=None,
        metavar="UNIT",
        help="also write d as the named unit computes it for the operand format (a stand-in device, e.g. h100)",
    )
    p.set_defaults(func=_cmd_probe)

    q = subparsers.add_parser(
        "identify",
        help="which arithmetic reproduces measured rows, or which library schedule reproduces a capture",
        description="RESULTS: a library capture (.npz with an 'op', written by `python -m validation.capture_torch`: "
        "searches the unit, gemmK order and accumulation schedule that reproduce the GPU's output bit for bit); "
        "an .npz with a, b, c, d (probe outputs), a CSV with columns a, b, c, d, or a "
        "directory of MATLAB-tensor-core model_validation files (a_*.txt, b_*.txt, c_*_fp32.txt, d_*). "
        "Exit 0: reproduced; 1: nothing reproduces; 2: bad input.",
    )
    q.add_argument("results")
    q.add_argument(
        "--hw",
        default=None,
        help="with a capture: the unit to search with (default: from the capture's gpu, e.g. 'NVIDIA H200' → h100)",
    )
    q.add_argument("--output", default=None, help="fp32 or fp16: which outputs the data hold (default: from the data)")
    q.add_argument(
        "--input",
        default=None,
        help="operand format of the rows (fp16, bf16, tf32, e4m3, e5m2, e4m3fnuz, e5m2fnuz); default: the "
        "file's input entry (a MATLAB-tensor-core folder: its a_<GPU>_<format>.txt name), else fp16",
    )
    add_format_option(q)
    q.add_argument("--next", default="8", help="splitting probes to propose when several points remain (default 8)")
    q.add_argument("--next-out", default=None, metavar="FILE.npz", help="write the proposed probes as a probe set")
    q.add_argument(
        "--test",
        default=None,
        help="with the 2022 study's raw results folder as RESULTS: the suite test whose measured lines "
        "identify the xdlops kernel (forward: unit and gemmK order; backward weight: KBlocks)",
    )
    q.add_argument("--gpu", default="mi100,mi200", help="with --test: mi100, mi200 or both (default)")
    q.add_argument(
        "--plot",
        default=None,
        metavar="FILE.png",
        help="save the rows each candidate reproduces (with --test: each candidate's lines against the measured ones)",
    )
    q.set_defaults(func=_cmd_identify)
    return p, q


def _int_option(value: str, name: str, lo: int, hi: int) -> int:
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: {value!r} is not an integer") from None
    if not lo <= v <= hi:
        raise ValueError(f"{name}: must be in {lo} … {hi}, got {v}")
    return v


def _input_option(value: str) -> str:
    try:
        return input_name(value)
    except ValueError:
        raise ValueError(f"--input: {value!r} is not one of {', '.join(probe_mod.INSTRUCTION_K)}") from None


def _cmd_probe(args) -> int:
    fmt = _input_option(args.input)
    k = _int_option(args.k if args.k is not None else str(probe_mod.INSTRUCTION_K[fmt]), "--k", 1, 64)
    rows = _int_option(args.rows, "--rows", 1, 10_000_000)
    seed = _int_option(args.seed, "--seed", 0, 2**63 - 1)
    if args.accumulator not in ("fp32", "fp16"):
        raise ValueError(f"--accumulator: {args.accumulator!r} is not one of fp32, fp16")
    if args.accumulator == "fp16" and fmt not in probe_mod.FP16_ACCUMULATOR_INPUTS:
        raise ValueError(
            f"--accumulator: no unit accumulates {fmt} products in fp16; fp16 takes "
            f"{', '.join(probe_mod.FP16_ACCUMULATOR_INPUTS)} operands (use fp32)"
        )
    u = None
    if args.emulate:
        try:
            u = unit(args.emulate, output=args.accumulator, input=fmt)
        except ValueError as err:
            raise ValueError(f"--emulate: {err}") from None
    check_output_file(args.out, "--out")
    probes = probe_mod.probe_set(rows, k, seed=seed, accumulator=args.accumulator, input=fmt)
    d = None
    extra = {}
    if u is not None:
        d = emu.dot_add(probes.a, probes.b, probes.c_values(), u)
        d = d.view(np.uint16 if args.accumulator == "fp16" else np.uint32)
        extra["device"] = np.array(f"fp16emu emulation of {u.name} ({fmt} operands, {args.accumulator} output)")
    try:
        probe_mod.save(args.out, probes, d, **extra)
    except OSError as err:
        raise ValueError(f"--out: cannot write {args.out!r} ({err.strerror or err})") from None
    print(
        f"wrote {args.out}: {len(probes)} rows of K = {k}, {fmt} operands, {args.accumulator} accumulator, seed {seed}"
        + (f", d from {u.name}" if d is not None else "")
    )
    return 0


def _cmd_identify(args) -> int:
    given = getattr(args, "input", None)
    if given is not None:
        _input_option(given)  # an unknown format: exit 2 before any file is read
    if is_capture(args.results):
        if given is not None:
            raise ValueError("--input: only for probe rows; a library capture records its operands' dtype itself")
        if getattr(args, "plot", None):
            check_path(args.plot)
        return identify_capture(args.results, hw=args.hw, fmt=args.format, plot=getattr(args, "plot", None))
    if args.hw is not None:
        raise ValueError("--hw: only for a library capture (an .npz with an 'op')")
    count = _int_option(args.next, "--next", 0, 64)
    if getattr(args, "plot", None):
        check_path(args.plot)
    if args.next_out is not None:
        check_output_file(args.next_out, "--next-out")
    if os.path.isdir(args.results) and any(Path(args.results).glob("verify_results_*")):  # no OSError
        if given is not None and _input_option(given) != "fp16":
            raise ValueError("--input: the 2022 study's lines are fp16 convolutions; accepted here: fp16")
        return _cmd_identify_study(args)
    if args.test is not None:
        raise ValueError("--test: RESULTS must be the study's raw results folder (verify_results_<run set>_<GPU>/)")
    rows = load_rows(args.results, args.output, None if given is None else _input_option(given))
    result = identify(rows, next_count=count)
    if args.next_out and result.next_probes:
        patterns = probe_mod.pattern_dtype(rows.input_format)
        a = np.array([[int(x, 16) for x in p["a"]] for p in result.next_probes], patterns)
        b = np.array([[int(x, 16) for x in p["b"]] for p in result.next_probes], patterns)
        c = np.array(
            [int(p["c"], 16) for p in result.next_probes], np.uint16 if rows.output_format == Format.FP16 else np.uint32
        )
        try:
            probe_mod.save(
                args.next_out,
                probe_mod.ProbeSet(a, b, c, np.array([p["category"] for p in result.next_probes]), rows.input_format),
                option="--next-out",
            )
        except OSError as err:
            raise ValueError(f"--next-out: cannot write {args.next_out!r} ({err.strerror or err})") from None
    if getattr(args, "plot", None):
        save(identify_figure(result, rows), args.plot)
    if args.format == "json":
        print(json.dumps(result.to_dict(), indent=1))
    else:
        print(result.format_text())
        if args.next_out:
            print(
                f"next probes written to {args.next_out}"
                if result.next_probes
                else f"no next probes: nothing written to {args.next_out}"
            )
    return 0 if result.consistent else 1  # 1: no point of the space reproduces every row


def _cmd_identify_study(args) -> int:
    """``fp16emu identify RAW_RESULTS --test NAME``: the study-line identification of one test."""
    if not args.test:
        raise ValueError(
            "--test: give the suite test whose measured lines to use (RESULTS is the study's raw results folder)"
        )
    name = suite_entry(args.test).name
    gpus = tuple(g.strip().lower() for g in args.gpu.split(",") if g.strip())
    bad = [g for g in gpus if g not in ("mi100", "mi200")]
    if bad or not gpus:
        raise ValueError(f"--gpu: {', '.join(bad) or 'none given'} not among mi100, mi200")

    direction = suite_config(name).problem.direction
    lines: dict = {}
    if direction != "bwd_weight" or not atomic_reorders(name):
        found = identify_study.identify_forward(args.results, [name], gpus=gpus, lines_out=lines)
        doc = {g: [c.label() for c in found.get((name, g), [])] for g in gpus}
        kind = f"{direction}: units and gemmK orders reproducing every measured -pv_with_gpu xdlops line"
    else:
        found = identify_study.identify_kblocks(args.results, [name], gpus=gpus)
        doc = {
            g: {str(v.kblocks): {"verdict": v.verdict, "detail": list(v.detail)} for v in found.get((name, g), [])}
            for g in gpus
        }
        kind = "bwd_weight with split-K atomics: KBlocks candidates against the measured xdlops lines"
    if not any(doc.values()):
        raise ValueError(f"--test: no measured fair_1 xdlops lines of {name} in {args.results}")
    if getattr(args, "plot", None):
        save(identify_study_figure(name, found, lines, gpus=gpus), args.plot)
    if args.format == "json":
        print(json.dumps({"test": name, "kind": kind, "result": doc}, indent=1))
        return 0
    print(f"{name} ({kind})")
    for g, res in doc.items():
        if isinstance(res, list):
            print(f"  {g}: " + ("; ".join(res) if res else "no candidate is consistent"))
        else:
            print(f"  {g}: " + ", ".join(f"KBlocks {kb} {v['verdict']}" for kb, v in res.items()))
    return 0
