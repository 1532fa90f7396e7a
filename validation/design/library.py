"""The legal schedules of a library op: a capture or an op description, the units of the GPUs a
test runs on, the schedules the capture search knows, and their outputs against an fp64 reference.

A *problem* is a :class:`validation.captures.Capture` (a real one, or one made from an op
description with generated operands and no GPU output). Its legal schedules are the candidates
of the capture search's schedule space (:func:`validation.captures.space.candidates`: the
library schedules and split counts, per unit) for the units of the GPUs named, less the ones
that stand for a bug (partials rounded to a 16-bit type; fast fp8 accumulation where exact was
asked), sampled when there are more than asked for. Each is run on the problem's operands and on
generated operands of the same range (:func:`operand_sets`) through the one GEMM path of the
search (:func:`validation.captures.gemms.jobs_of`, :func:`emu.gemm`), and compared with the exact
result in float64 (:func:`reference`).

TF32: for fp32 operands torch's ``torch.backends.cuda.matmul.allow_tf32`` is off by default (a
GEMM multiplies fp32 whole) and ``torch.backends.cudnn.allow_tf32`` on (a convolution may take
TF32 kernels): ``dtype fp32`` is the fp32 FMA schedules, plus the TF32 ones for convolutions;
``dtype tf32`` (the flag on) is the TF32 unit's schedules and the fp32 CUDA-core ones a library
may still pick (PyTorch "TensorFloat-32 (TF32) on Ampere (and later) devices",
docs.pytorch.org/docs/stable/notes/cuda.html).
"""

from __future__ import annotations

import dataclasses
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np

import emu
from emu.simt import fma_gemm
from models.libraries import unit_from_gpu

from ..captures.capture import Capture, CaptureError, load_capture
from ..captures.format import DTYPE_ALIASES, OPS, round_to_patterns, save
from ..captures.gemms import Candidate, Variant, full_fp32, jobs_of, model_unit
from ..captures.space import candidates

__all__ = [
    "DESIGN_DTYPES",
    "DESIGN_OPS",
    "LibraryProblem",
    "bounded",
    "legal_schedules",
    "problem_json",
    "operand_sets",
    "problem_from_capture",
    "problem_from_op",
    "reference",
    "run_schedule",
    "units_of",
]

#: the ops ``fp16emu design --op`` describes (``scaled_mm`` is the fp8 form of ``mm``)
DESIGN_OPS = ("mm", "linear", "bmm", "addmm", "scaled_mm", "conv2d")
#: the dtypes it takes: operands (and outputs, but fp8's bf16)
DESIGN_DTYPES = ("fp16", "bf16", "fp32", "tf32", "e4m3")
_DTYPE = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "tf32": "float32", "e4m3": "float8_e4m3fn"}


@dataclass
class LibraryProblem:
    """The op to design a tolerance for: ``cap`` (its operands; ``cap.out`` the GPU's output when
    ``measured``), the GPUs named and their units, and where it came from."""

    cap: Capture
    gpus: tuple[str, ...]
    units: tuple[str, ...]
    source: str
    measured: bool
    range: tuple[float, float]
    fast_accum: bool = False

    @property
    def K(self) -> int:
        jobs = jobs_of(self.cap, Variant()) if self.cap.op != "scaled_mm" else None
        return int(self.cap.operands["A"].shape[1] if jobs is None else jobs[0].A.shape[1])

    def describe(self) -> str:
        return self.cap.describe()


def units_of(gpus, fmt: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The GPU names (``h100``, ``NVIDIA H200``, ``mi300``) and their units, each unit once;
    ValueError naming the GPU fp16emu does not model."""
    import models

    names, units = [], []
    for g in gpus:
        g = str(g).strip()
        if not g:
            continue
        u = g.lower() if g.lower() in models.UNIT_NAMES else unit_from_gpu(g)
        if u is None or u in ("fma32", "fp64"):
            raise ValueError(f"--gpus: {g!r} is not a GPU fp16emu models (e.g. h100, h200, a100, mi300, b200)")
        if fmt not in ("fp32",):
            try:
                models.unit(u, input="fp8" if fmt.startswith("e") else fmt)
            except ValueError as exc:
                raise ValueError(f"--gpus: {g} has no {fmt} matrix unit fp16emu models: {exc}") from None
        names.append(g)
        if u not in units:
            units.append(u)
    if not names:
        raise ValueError("--gpus: name at least one GPU (e.g. h100,h200)")
    return tuple(names), tuple(units)


def _value_range(cap: Capture) -> tuple[float, float]:
    vals = [_values(cap, v, n) for n, v in cap.operands.items() if n in ("A", "B", "input", "weight", "grad_output")]
    lo = min(float(v.min()) for v in vals)
    hi = max(float(v.max()) for v in vals)
    return (lo, hi) if hi > lo else (lo - 1.0, hi + 1.0)


def problem_from_capture(path, gpus=None) -> LibraryProblem:
    """A capture's problem: its operands and output; the GPUs named (default: the capture's own)."""
    cap = load_capture(path)
    fmt = cap.input if cap.op != "scaled_mm" else "e4m3"
    if not gpus:
        if not cap.gpu:
            raise CaptureError("gpu: not recorded; name the GPUs with --gpus (e.g. h100,h200)")
        gpus = [cap.gpu]
    names, units = units_of(gpus, fmt)
    fast = bool(cap.extra.get("use_fast_accum", False))
    return LibraryProblem(cap, names, units, str(path), True, _value_range(cap), fast)


def problem_from_op(
    op: str, shape, dtype: str, gpus, *, seed: int = 0, value_range=(-1.0, 1.0), bias: bool = True
) -> LibraryProblem:
    """A problem from an op description: ``mm``/``addmm`` (M, N, K), ``linear`` (M, N, K: input
    (M, K), weight (N, K), a bias (N) unless ``bias=False``), ``bmm`` (B, M, N, K); ``e4m3``
    makes ``mm`` a ``torch._scaled_mm`` (per-tensor scales 0.75 and 1.25, a bf16 bias unless
    ``bias=False``, a bf16 output, exact accumulation asked). Operands drawn uniform in
    ``value_range`` from ``seed`` as the capture kit draws them."""
    dtype = str(dtype).lower()
    if dtype not in DESIGN_DTYPES:
        raise ValueError(f"--dtype: {dtype!r} is not one of {', '.join(DESIGN_DTYPES)}")
    if op not in DESIGN_OPS:
        extra = " (backward convolutions: design a capture of one)" if op in OPS else ""
        raise ValueError(f"--op: {op!r} is not one of {', '.join(DESIGN_OPS)}{extra}")
    if dtype == "e4m3" and op in ("mm", "scaled_mm"):
        op = "scaled_mm"
    elif dtype == "e4m3" or op == "scaled_mm":
        raise ValueError(f"--dtype: fp8 (e4m3) is designed for mm (torch._scaled_mm), not {op}")
    dims = [int(x) for x in shape]
    want = {"bmm": 4, "conv2d": 7}.get(op, 3)
    if len(dims) != want or min(dims) < 1:
        names = {"bmm": "B M N K", "conv2d": "N C H W K R S"}.get(op, "M N K")
        raise ValueError(f"--shape: {op} takes {want} sizes ≥ 1 ({names}), got {' '.join(map(str, shape))}")
    if np.prod(dims, dtype=np.int64) > 1 << 28:
        raise ValueError(f"--shape: {'×'.join(map(str, dims))} is too large to emulate here (at most 2^28 products)")
    names, _ = units_of(gpus, dtype)
    conv = {}
    if op == "conv2d":
        n, c, h, w, k, r, s_ = dims
        if r > h or s_ > w:
            raise ValueError(f"--shape: a {r}×{s_} filter does not fit a {h}×{w} image (stride 1, no padding)")
        shapes = {"input": [n, c, h, w], "weight": [k, c, r, s_]} | ({"bias": [k]} if bias else {})
        conv = {"stride": np.array([1, 1]), "padding": np.array([0, 0]), "dilation": np.array([1, 1]), "groups": 1}
    elif op == "bmm":
        b, M, N, K = dims
        shapes = {"A": [b, M, K], "B": [b, K, N]}
    elif op == "linear":
        M, N, K = dims
        shapes = {"input": [M, K], "weight": [N, K]} | ({"bias": [N]} if bias else {})
    elif op == "addmm":
        M, N, K = dims
        shapes = {"A": [M, K], "B": [K, N], "C": [M, N]}
    else:
        M, N, K = dims
        shapes = {"A": [M, K], "B": [K, N]}
    lo, hi = (float(x) for x in value_range)
    spec = {"op": op, "dtype": _DTYPE[dtype], "seed": int(seed), "range": [lo, hi], "shapes": shapes}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "described.npz"
        if op == "scaled_mm":
            from ..captures.format import generate_operands, scaled_capture_fields

            # scales that are not 1 and a bias, so that the scale and bias mutants have something to act on
            spec = {**spec, "out_dtype": "bfloat16", "scale_a": 0.75, "scale_b": 1.25, "bias": bias}
            spec["shapes"] = {k: v for k, v in shapes.items() if k in ("A", "B")}
            ops = generate_operands(spec)
            fields = scaled_capture_fields(spec, ops, np.zeros((M, N), np.uint16))
        else:
            from ..captures.format import generate_operands

            ops = generate_operands(spec)
            if op == "conv2d":
                out_shape = (dims[0], dims[4], dims[2] - dims[5] + 1, dims[3] - dims[6] + 1)
            else:
                out_shape = tuple(dims[:3]) if op == "bmm" else (dims[0], dims[1])
            out = np.zeros(out_shape, np.dtype(ml_dtypes.bfloat16) if dtype == "bf16" else ops[next(iter(ops))].dtype)
            fields = {"op": op, **ops, **conv, "out": out, "dtype": _DTYPE[dtype], "allow_tf32": dtype == "tf32"}
        save(path, fields)
        cap = load_capture(path)
    cap.path = f"{op} {'×'.join(map(str, dims))} {dtype} (described; operands uniform in [{lo:g}, {hi:g}], seed {seed})"
    _, units = units_of(names, dtype)
    return LibraryProblem(cap, names, units, "described", False, (lo, hi))


def bounded(problem: LibraryProblem, max_outputs: int) -> tuple[LibraryProblem, str | None]:
    """``problem`` cut to at most ``max_outputs`` outputs where its rows are independent GEMM rows
    (mm, addmm, linear, scaled_mm: the first rows of A or the input, C, scales and the output;
    bmm: the first batches): every output keeps its K products and schedule, so the errors and
    rules judged are those of the whole op's rows kept. A note saying so, or None when uncut."""
    cap = problem.cap
    if cap.out.size <= max_outputs or cap.conv is not None:
        return problem, None
    ops = dict(cap.operands)
    extra = dict(cap.extra)
    if cap.op == "bmm":
        keep = max(1, max_outputs // (cap.out.shape[1] * cap.out.shape[2]))
        ops = {k: v[:keep] for k, v in ops.items()}
        out = cap.out[:keep]
        what = f"the first {keep} of {cap.out.shape[0]} batches"
    else:
        N = cap.out.shape[-1]
        out2 = cap.out.reshape(-1, N)
        keep = max(1, max_outputs // N)
        name = "input" if cap.op == "linear" else "A"
        ops[name] = ops[name].reshape(-1, ops[name].shape[-1])[:keep]
        if "C" in ops:
            ops["C"] = np.broadcast_to(ops["C"], cap.out.shape).reshape(-1, N)[:keep].copy()
        if cap.op == "scaled_mm" and extra["scale_a"].shape[0] > 1:
            extra["scale_a"] = extra["scale_a"][:keep]
        out = out2[:keep]
        what = f"the first {keep} of {out2.shape[0]} rows"
    cut = dataclasses.replace(cap, operands=ops, out=out, extra=extra)
    note = f"{what} kept ({out.size} of {cap.out.size} outputs, --max-outputs): rows are independent GEMM rows"
    return dataclasses.replace(problem, cap=cut), note


def _fp8_names(cap: Capture) -> tuple[str, str]:
    a, _, b = cap.input.partition("x")
    return DTYPE_ALIASES[a], DTYPE_ALIASES[b or a]


def _values(cap: Capture, bits: np.ndarray, name: str = "A") -> np.ndarray:
    """Operand bit patterns as the exact float64 values the user's tensors hold."""
    if cap.op == "scaled_mm":
        a, b = _fp8_names(cap)
        return bits.view(getattr(ml_dtypes, a if name == "A" else b)).astype(np.float64)
    if cap.input in ("fp32", "tf32"):
        return bits.view(np.float32).astype(np.float64)
    return bits.view(np.float16 if cap.input == "fp16" else ml_dtypes.bfloat16).astype(np.float64)


def reference(cap: Capture) -> np.ndarray:
    """The op's result in float64 from the operands as given (fp32 ones whole, never cut to
    tf32): the reference every error is measured against."""
    if cap.op == "scaled_mm":
        A, B = _values(cap, cap.operands["A"], "A"), _values(cap, cap.operands["B"], "B")
        out = (A @ B) * cap.extra["scale_a"].astype(np.float64) * cap.extra["scale_b"].astype(np.float64)
        if "bias" in cap.extra:
            out = out + cap.extra["bias"].astype(np.float64)
        return out
    out = np.zeros(cap.out.size, np.float64)
    for job in jobs_of(cap, Variant()):
        r = _values(cap, job.A) @ _values(cap, job.B)
        if job.C is not None:
            r = r + np.asarray(job.C, np.float64)
        out[job.out_index.reshape(-1)] = r.reshape(-1)
    return out.reshape(cap.out.shape)


def run_schedule(cap: Capture, cand: Candidate, edit=None) -> np.ndarray:
    """The op's whole output as ``cand`` computes it, through the capture search's GEMMs;
    ``edit(A, B, C, schedule, extra)`` → (A, B, C, schedule, extra) changes what each GEMM is
    given (a library bug mutant: :mod:`validation.design.mutants`)."""
    if cap.op == "scaled_mm":
        A, B, bias = cap.operands["A"], cap.operands["B"], cap.extra.get("bias")
        extra = {"scale_a": cap.extra["scale_a"], "scale_b": cap.extra["scale_b"]}
        sch = cand.schedule
        if edit is not None:
            A, B, bias, sch, extra = edit(A, B, bias, sch, extra)
        unit = model_unit(cand.unit, cap.input)
        return emu.gemm(A, B, bias, unit, sch, scale_a=extra["scale_a"], scale_b=extra["scale_b"])
    unit = model_unit(cand.unit, cap.input)
    whole = full_fp32(cap, cand.unit)
    out = np.zeros(cap.out.size, cap.out.dtype)
    for job in jobs_of(cap, cand.variant):
        A, B, C, sch = job.A, job.B, job.C, cand.schedule
        if edit is not None:
            A, B, C, sch, _ = edit(A, B, C, sch, {})
        res = fma_gemm(A, B, C, sch) if whole else emu.gemm(A, B, C, unit, sch)
        out[job.out_index.reshape(-1)] = np.asarray(res).astype(cap.out.dtype).reshape(-1)
    return out.reshape(cap.out.shape)


def _draw(cap: Capture, name: str, bits: np.ndarray, rng, lo: float, hi: float) -> np.ndarray:
    v = rng.uniform(lo, hi, size=bits.shape)
    if cap.op == "scaled_mm":
        a, b = _fp8_names(cap)
        return round_to_patterns(v, a if name == "A" else b)
    if cap.input in ("fp32", "tf32"):
        return v.astype(np.float32).view(np.uint32)
    if cap.input == "fp16":
        return v.astype(np.float16).view(np.uint16)
    return v.astype(ml_dtypes.bfloat16).view(np.uint16)


def operand_sets(problem: LibraryProblem, n: int, seed: int = 1) -> list[Capture]:
    """``n`` operand sets: the problem's own, then ``n − 1`` drawn uniform in its operands' range
    (C and a bias too) from ``numpy.random.default_rng(seed + i)``, rounded to their format."""
    out = [problem.cap]
    lo, hi = problem.range
    for i in range(1, n):
        rng = np.random.default_rng(seed + i)
        ops = {k: _draw(problem.cap, k, v, rng, lo, hi) for k, v in problem.cap.operands.items()}
        cap = dataclasses.replace(problem.cap, operands=ops, out=np.zeros_like(problem.cap.out))
        cap.path = f"operands uniform in [{lo:g}, {hi:g}], seed {seed + i}"
        if problem.cap.op == "scaled_mm" and "bias" in problem.cap.extra:
            b = rng.uniform(lo, hi, size=problem.cap.extra["bias"].shape)
            cap.extra = {**problem.cap.extra, "bias": b.astype(ml_dtypes.bfloat16).astype(np.float32)}
        out.append(cap)
    return out


def _legal(cand: Candidate, problem: LibraryProblem) -> bool:
    s = cand.schedule
    if s.partial_format is not None:  # a 16-bit workspace: the partials-rounded mutant
        return False
    if problem.cap.op == "scaled_mm" and not problem.fast_accum and s.promotion_interval == 0:
        return False  # fast accumulation where exact was asked: a mutant
    return True


def _space_of(cap: Capture, unit: str, problem: LibraryProblem) -> list[Candidate]:
    cands, _ = candidates(cap, unit)
    out = [c for c in cands if _legal(c, problem)]
    conv_fp32 = cap.conv is not None and cap.input == "fp32"
    if conv_fp32:  # cudnn.allow_tf32 is on by default: the TF32 kernels are legal too
        tf32 = dataclasses.replace(cap, input="tf32")
        out += [c for c in candidates(tf32, unit)[0] if _legal(c, problem) and c.unit != "fma32"]
    return out


def _common(c: Candidate) -> bool:
    s = c.schedule
    return (
        s.splits > 1 and s.split_rule == "ceil" and s.k_tile >= 16 and not s.residue_tile and not s.instruction_k
    ) or s.promotion_interval > 0


def legal_schedules(
    problem: LibraryProblem, max_schedules: int = 24, first=(), seed: int = 0
) -> tuple[list[Candidate], int, list[str]]:
    """The legal schedules (module docstring): the candidates in ``first`` (the capture's own
    schedule) and every unit's plain one-chain schedule, then a sample drawn with
    ``random.Random(seed)`` up to ``max_schedules`` in all, half of it from the libraries' common
    split-K form (k tiles of 16 or more, ⌈tiles/splits⌉ per split); the number in the whole set;
    notes."""
    pool: list[Candidate] = []
    seen = set()
    for u in problem.units:
        for c in _space_of(problem.cap, u, problem):
            key = (c.unit, c.variant, c.schedule)
            if key not in seen:
                seen.add(key)
                pool.append(c)
    notes = []
    if not pool:
        raise ValueError(f"no legal schedule for {problem.describe()} on {', '.join(problem.gpus)}")
    chosen: list[Candidate] = []
    keys = set()

    def take(c):
        key = (c.unit, c.variant, c.schedule)
        if key not in keys and len(chosen) < max_schedules:
            keys.add(key)
            chosen.append(c)

    for c in first:
        take(c)
    for u in problem.units:
        plain = [c for c in pool if c.unit == u and c.schedule.splits == 1]
        if plain:
            take(plain[0])
    rest = [c for c in pool if (c.unit, c.variant, c.schedule) not in keys]
    rng = random.Random(seed)
    # half of the sample from the libraries' common form (whole k tiles of 16 or more, ⌈tiles/splits⌉ each, no
    # residue tile or narrow instruction), half from the rest of the space
    common = [c for c in rest if _common(c)]
    other = [c for c in rest if not _common(c)]
    room = max(0, max_schedules - len(chosen))
    picked = rng.sample(common, min(len(common), (room + 1) // 2))
    picked += rng.sample(other, min(len(other), room - len(picked)))
    for c in picked:
        take(c)
    if len(pool) > len(chosen):
        notes.append(
            f"sampled {len(chosen)} of the {len(pool)} legal schedules (random.Random({seed}); raise --max-schedules "
            "for more)"
        )
    return chosen, len(pool), notes


def problem_json(problem: LibraryProblem) -> dict:
    return {
        "source": problem.source,
        "problem": problem.describe(),
        "op": problem.cap.op,
        "input": problem.cap.input,
        "output": problem.cap.out_format,
        "K": problem.K,
        "gpus": list(problem.gpus),
        "units": list(problem.units),
        "range": list(problem.range),
        "measured": problem.measured,
    }
