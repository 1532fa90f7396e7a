"""A capture plan checked without torch or a GPU: torch's contracts for each op, what a named GPU
accepts, and the plan file read safely.

Part of the capture kit (:mod:`validation.captures.kit`), and like it numpy only: on the GPU
machine it runs as a plain file beside ``kit.py`` and ``format.py``. ``python kit.py --check
--plan PLAN.json --gpu H100`` (or ``--check`` with one case's flags) runs these checks alone;
every capture runs them first. Each refusal is a ValueError naming the field to fix, e.g.
``shapes.B: A is 8×8, so B must be 8×N …`` or ``dtype: bfloat16 needs compute capability 8.0 or
newer``.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path

import numpy as np

try:  # inside the fp16emu package
    from .format import CONV_OPS, check_plan_entry, dtype_name
except ImportError:  # a plain file, with format.py beside it
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from format import CONV_OPS, check_plan_entry, dtype_name  # type: ignore[no-redef]

__all__ = [
    "GPU_ARCHS",
    "MAX_ELEMENTS",
    "MAX_PLAN_BYTES",
    "MAX_PLAN_CASES",
    "MAX_PLAN_DEPTH",
    "PLAN_KEYS",
    "check_contract",
    "check_gpu",
    "gpu_arch",
    "read_json",
    "read_plan",
]


def _fail(message: str):
    raise ValueError(message)


def _whole(v, low: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= low


#: GPU names (regular expressions, case-insensitive) and what they are: ("nvidia", (major,
#: minor)) compute capability, or ("amd", "gfxNNN"); also ``sm_90`` / ``sm90`` / ``9.0`` and
#: ``gfx942`` as themselves. NVIDIA's CUDA GPUs list (developer.nvidia.com/cuda-gpus); AMD's
#: LLVM AMDGPU processor table (llvm.org/docs/AMDGPUUsage.html)
GPU_ARCHS = (
    (r"\b(gb|b)(200|300|100)\b", ("nvidia", (10, 0))),
    (r"rtx (pro )?50\d\d|blackwell", ("nvidia", (12, 0))),
    (r"\b(g?h(100|200|800)|h20)\b", ("nvidia", (9, 0))),
    (r"\bl4\b|\bl40|rtx 40\d\d|\bada\b", ("nvidia", (8, 9))),
    (r"\ba(100|800|30)\b", ("nvidia", (8, 0))),
    (r"\ba(10|40|16|2)g?\b|rtx 30\d\d|rtx a\d+", ("nvidia", (8, 6))),
    (r"\bt4\b|rtx 20\d\d|quadro rtx|turing", ("nvidia", (7, 5))),
    (r"\bv100\b|volta", ("nvidia", (7, 0))),
    (r"\bp100\b", ("nvidia", (6, 0))),
    (r"\bmi3(50|55)", ("amd", "gfx950")),
    (r"\bmi3(00|25)", ("amd", "gfx942")),
    (r"\bmi2\d0|\bmi200\b", ("amd", "gfx90a")),
    (r"\bmi100\b", ("amd", "gfx908")),
)


def gpu_arch(gpu: str) -> tuple[str, object]:
    """What a GPU name (``"NVIDIA H200"``, ``"h100"``, ``"sm_89"``, ``"8.0"``, ``"MI300X"``,
    ``"gfx942"``) is: ``("nvidia", (major, minor))`` or ``("amd", "gfxNNN")``; ValueError
    naming the field ``gpu`` otherwise."""
    import re

    text = str(gpu).strip().lower()
    cc = re.fullmatch(r"(?:sm_?|compute capability )?(\d{1,2})\.?(\d)", text)
    if cc:
        return "nvidia", (int(cc.group(1)), int(cc.group(2)))
    gfx = re.search(r"gfx\d{2,3}[0-9a-f]?", text)
    if gfx:
        return "amd", gfx.group(0)
    for pattern, arch in GPU_ARCHS:
        if re.search(pattern, text):
            return arch
    _fail(
        f"gpu: {gpu!r} is not a GPU the kit knows; name it by its compute capability (sm_90, 8.9) or AMD "
        "architecture (gfx942)"
    )


def check_gpu(spec: dict, gpu, field: str = "gpu", name: str | None = None) -> None:
    """Refuse (ValueError naming the field) a checked plan entry that the GPU ``gpu`` (a name,
    :func:`gpu_arch`, or its result) cannot run as asked: bfloat16 needs NVIDIA compute capability
    8.0 or newer (Ampere) or an AMD CDNA GPU; TF32 (``allow_tf32``) NVIDIA 8.0 or newer (on AMD
    GPUs float32 GEMMs run in fp32); fp8 (``scaled_mm``) NVIDIA 8.9 or newer with the OCP types
    and not e5m2 × e5m2 (cuBLASLt has none), AMD MI300 (gfx942) with the fnuz types, gfx950 and
    newer with the OCP ones, row-wise scales there with B in e4m3 (PyTorch's
    ``aten/src/ATen/native/cuda/ScaledBlas.cpp``); block scales (MX, NVFP4) NVIDIA 10.0 or newer,
    MX on AMD gfx950."""
    vendor, arch = gpu_arch(gpu) if isinstance(gpu, str) else gpu
    name = gpu if isinstance(gpu, str) else name
    where = f"{name} ({_arch_text(vendor, arch)})" if name else _arch_text(vendor, arch)
    dtypes = {spec["dtype"], spec.get("b_dtype", spec["dtype"]), spec.get("out_dtype") or spec["dtype"]}
    if "bfloat16" in dtypes and vendor == "nvidia" and arch < (8, 0):
        field = "dtype" if spec["dtype"] == "bfloat16" else "out_dtype"
        _fail(f"{field}: bfloat16 needs compute capability 8.0 or newer (Ampere); {where} has none")
    if spec.get("allow_tf32") and spec["dtype"] == "float32":
        if vendor != "nvidia":
            _fail(f"allow_tf32: TF32 is NVIDIA's (compute capability 8.0 or newer); {where} multiplies float32 whole")
        if arch < (8, 0):
            _fail(f"allow_tf32: TF32 needs compute capability 8.0 or newer (Ampere); {where} runs float32 whole")
    if spec["op"] != "scaled_mm":
        return
    if spec.get("block_scale") is not None:  # MX / NVFP4: cuBLASLt's block-scaled GEMMs, hipBLASLt's MX
        if vendor == "nvidia" and arch < (10, 0):
            _fail(f"{field}: block-scaled torch._scaled_mm needs compute capability 10.0 or newer (Blackwell); {where}")
        if vendor == "amd" and (spec["block_scale"] != "mx" or not arch.startswith("gfx95")):
            _fail(f"{field}: on AMD GPUs block-scaled scaled_mm is MX on gfx950 (MI350, MI355) only; {where}")
        return
    fnuz = spec["dtype"].endswith("fnuz")
    if vendor == "nvidia":
        if arch < (8, 9):
            _fail(f"{field}: torch._scaled_mm needs compute capability 8.9 or newer (Ada, Hopper, Blackwell); {where}")
        if fnuz:
            _fail(f"dtype: {spec['dtype']} is MI300's; NVIDIA GPUs take float8_e4m3fn and float8_e5m2")
        if spec["dtype"] == spec["b_dtype"] == "float8_e5m2":
            _fail("b_dtype: cuBLASLt has no e5m2 × e5m2 GEMM; take e4m3 for A or B")
        return
    if arch == "gfx942" and not fnuz:
        _fail(f"dtype: MI300 ({arch}) multiplies float8_e4m3fnuz / float8_e5m2fnuz, not {spec['dtype']}")
    if arch != "gfx942" and fnuz:
        _fail(f"dtype: the fnuz types are MI300's (gfx942); {arch} takes float8_e4m3fn / float8_e5m2")
    if arch != "gfx942" and not arch.startswith(("gfx95", "gfx12")):
        _fail(f"{field}: torch._scaled_mm needs MI300 (gfx942) or newer, {where}")
    if spec["rowwise"] and "e4m3" not in spec["b_dtype"]:
        _fail(f"b_dtype: row-wise scales on ROCm need B in e4m3, got {spec['b_dtype']}")


def _arch_text(vendor, arch) -> str:
    return f"compute capability {arch[0]}.{arch[1]}" if vendor == "nvidia" else arch


#: the most elements a plan entry's operands and output may hold together (drawn as float64 on
#: the GPU machine's CPU first: 16 GiB)
MAX_ELEMENTS = 1 << 31


def _shape(shapes: dict, name: str, dims=None, field=None) -> list[int]:
    shape = shapes.get(name)
    field = field or f"shapes.{name}"
    if not isinstance(shape, list) or not all(_whole(d, 1) for d in shape):
        _fail(f"{field}: expected a list of sizes ≥ 1, got {shape!r}")
    if dims is not None and len(shape) not in ((dims,) if isinstance(dims, int) else dims):
        want = dims if isinstance(dims, int) else " or ".join(map(str, dims))
        _fail(f"{field}: expected {want} sizes, got {shape!r}")
    return shape


def _broadcast(name: str, shape, to, why: str):
    try:
        if tuple(np.broadcast_shapes(tuple(shape), tuple(to))) == tuple(to):
            return
    except ValueError:
        pass
    _fail(f"shapes.{name}: {tuple(shape)} does not broadcast to {why} {tuple(to)}")


def _fp32_scalar(spec: dict, name: str) -> None:
    v = spec.get(name, 1.0)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
        _fail(f"{name}: expected a finite number, got {v!r}")
    if float(np.float32(v)) != float(v):
        _fail(
            f"{name}: {v!r} is not an fp32 value and cuBLAS computes the epilogue in fp32; give "
            f"{name} = {float(np.float32(v))!r} (its fp32 value) so the capture says what ran"
        )


def check_contract(spec: dict) -> dict:
    """A plan entry checked against what torch itself accepts, before anything reaches a GPU
    (:func:`check_plan_entry` first): operand dims and sizes per op (``mm`` of A (M, K) and
    B (K, N); ``bmm``/``baddbmm`` batches equal; ``addmm``/``baddbmm``'s C broadcastable to the
    output, alpha and beta fp32 values; ``matmul``'s batch dims broadcastable; ``linear``'s
    weight (out, in) and bias (out,); convolutions' channels divisible by ``groups``, the weight's
    channels C/groups, stride and dilation ≥ 1, padding ≥ 0, the output size ≥ 1, the backward
    passes' ``grad_output`` the forward output's shape); ``out_dtype`` only where torch takes it
    (``torch.mm``: float32 from float16 or bfloat16, or the operands' own); ``allow_tf32`` only
    with float32; channels_last only for convolutions; at most :data:`MAX_ELEMENTS` elements.
    ValueError naming the field otherwise; returns the entry :func:`check_plan_entry` gives."""
    if not isinstance(spec, dict):
        _fail(f"entry: expected a JSON object (one case), got {type(spec).__name__}")
    shapes = spec.get("shapes", {})
    if not isinstance(shapes, dict):
        _fail(f'shapes: expected an object of operand shapes ({{"A": [M, K], …}}), got {shapes!r}')
    for name in shapes:
        _shape(shapes, name)
    spec = check_plan_entry(spec)
    op, dtype = spec["op"], spec["dtype"]
    if op == "scaled_mm":
        out = [spec["shapes"]["A"][0], spec["shapes"]["B"][1]]
        return _sized(spec, out)
    shapes = spec["shapes"]
    out = _contract_shapes(spec, op, shapes)
    out_dtype = spec.get("out_dtype")
    if out_dtype is not None:
        out_dtype = spec["out_dtype"] = dtype_name("out_dtype", out_dtype)
        if op != "mm":
            _fail(f"out_dtype: only mm (torch.mm(..., out_dtype=...)) and scaled_mm take it; {op} gives {dtype}")
        if out_dtype != dtype and not (out_dtype == "float32" and dtype in ("float16", "bfloat16")):
            _fail(f"out_dtype: torch.mm gives {dtype} operands' product as {dtype}, or float32 from float16/bfloat16")
    for flag in ("allow_tf32", "allow_fp16_reduced_precision_reduction", "cudnn_deterministic", "cudnn_benchmark"):
        if flag in spec and spec[flag] not in (True, False):
            _fail(f"{flag}: expected true or false, got {spec[flag]!r}")
    if spec.get("allow_tf32") and dtype != "float32":
        _fail(f"allow_tf32: TF32 applies to float32 operands; dtype is {dtype} (set allow_tf32 false or dtype float32)")
    if spec["memory_format"] == "channels_last" and op not in CONV_OPS:
        _fail(f"memory_format: channels_last is a layout of 4-D convolution tensors; {op} takes contiguous")
    return _sized(spec, out)


def _sized(spec: dict, out) -> dict:
    total = sum(int(np.prod(s, dtype=object)) for s in spec["shapes"].values()) + int(np.prod(out, dtype=object))
    if total > MAX_ELEMENTS:
        _fail(f"shapes: {total:,} elements in the operands and output, more than the kit draws ({MAX_ELEMENTS:,})")
    return spec


def _contract_shapes(spec: dict, op: str, shapes: dict) -> list[int]:
    """The output shape of a checked non-fp8 entry; ValueError naming the field torch would refuse."""
    if op in ("mm", "addmm"):
        (M, K), (K2, N) = _shape(shapes, "A", 2), _shape(shapes, "B", 2)
        if K2 != K:
            _fail(
                f"shapes.B: A is {M}×{K}, so B must be {K}×N (torch.{op}: mat1 and mat2 shapes must match), got {K2}×{N}"
            )
        if op == "addmm":
            _broadcast("C", _shape(shapes, "C", (1, 2)), [M, N], "the output (M, N)")
            _fp32_scalar(spec, "alpha")
            _fp32_scalar(spec, "beta")
        return [M, N]
    if op in ("bmm", "baddbmm"):
        (b, M, K), (b2, K2, N) = _shape(shapes, "A", 3), _shape(shapes, "B", 3)
        if b2 != b:
            _fail(f"shapes.B: A holds {b} matrices, so B must too (torch.{op}: batch sizes must match), got {b2}")
        if K2 != K:
            _fail(f"shapes.B: A is {b}×{M}×{K}, so B must be {b}×{K}×N, got {b2}×{K2}×{N}")
        if op == "baddbmm":
            _broadcast("C", _shape(shapes, "C", (1, 2, 3)), [b, M, N], "the output (b, M, N)")
            _fp32_scalar(spec, "alpha")
            _fp32_scalar(spec, "beta")
        return [b, M, N]
    if op == "matmul":
        A, B = _shape(shapes, "A"), _shape(shapes, "B")
        for name, s in (("A", A), ("B", B)):
            if len(s) < 2:
                _fail(f"shapes.{name}: matmul captures take 2 or more dims (a vector is a (1, K) or (K, 1) matrix)")
        if B[-2] != A[-1]:
            _fail(f"shapes.B: A is …×{A[-2]}×{A[-1]}, so B must be …×{A[-1]}×N, got {B}")
        try:
            batch = list(np.broadcast_shapes(tuple(A[:-2]), tuple(B[:-2])))
        except ValueError:
            _fail(f"shapes.B: batch dims {tuple(B[:-2])} do not broadcast with A's {tuple(A[:-2])} (torch.matmul)")
        return batch + [A[-2], B[-1]]
    if op == "linear":
        x, w = _shape(shapes, "input"), _shape(shapes, "weight", 2)
        if x[-1] != w[1]:
            _fail(f"shapes.weight: input has {x[-1]} features, so weight must be (out, {x[-1]}), got {w}")
        if "bias" in shapes and _shape(shapes, "bias", 1) != [w[0]]:
            _fail(f"shapes.bias: expected [{w[0]}] (one per output feature), got {shapes['bias']}")
        return x[:-1] + [w[0]]
    return _conv_contract(spec, op, shapes)


def _conv_contract(spec: dict, op: str, shapes: dict) -> list[int]:
    groups = spec["groups"]
    if not _whole(groups, 1):
        _fail(f"groups: expected a whole number ≥ 1, got {groups!r}")
    for key, low in (("stride", 1), ("padding", 0), ("dilation", 1)):
        if not all(v >= low for v in spec[key]):
            _fail(f"{key}: expected two whole numbers ≥ {low}, got {spec[key]!r}")
    if op == "conv2d_bwd_data":
        x, w = _shape(spec, "input_shape", 4, "input_shape"), _shape(shapes, "weight", 4)
    elif op == "conv2d_bwd_weight":
        x, w = _shape(shapes, "input", 4), _shape(spec, "weight_shape", 4, "weight_shape")
    else:
        x, w = _shape(shapes, "input", 4), _shape(shapes, "weight", 4)
    wfield = "weight_shape" if op == "conv2d_bwd_weight" else "shapes.weight"
    if x[1] % groups:
        _fail(f"groups: {x[1]} input channels do not divide into {groups} groups")
    if w[0] % groups:
        _fail(f"{wfield}: {w[0]} output channels do not divide into {groups} groups")
    if w[1] != x[1] // groups:
        _fail(
            f"{wfield}: expected {x[1] // groups} channels per filter ({x[1]} input channels / {groups} groups), got {w[1]}"
        )
    (s0, s1), (p0, p1), (d0, d1) = spec["stride"], spec["padding"], spec["dilation"]
    P = (x[2] + 2 * p0 - d0 * (w[2] - 1) - 1) // s0 + 1
    Q = (x[3] + 2 * p1 - d1 * (w[3] - 1) - 1) // s1 + 1
    if P < 1 or Q < 1:
        _fail(
            f"padding: the filter ({w[2]}×{w[3]}, dilation {d0}, {d1}) is larger than the padded input; output {P}×{Q}"
        )
    fwd = [x[0], w[0], P, Q]
    if op == "conv2d" and "bias" in shapes and _shape(shapes, "bias", 1) != [w[0]]:
        _fail(f"shapes.bias: expected [{w[0]}] (one per output channel), got {shapes['bias']}")
    if op != "conv2d" and _shape(shapes, "grad_output", 4) != fwd:
        _fail(f"shapes.grad_output: expected {fwd} (the forward output of these shapes), got {shapes['grad_output']}")
    return {"conv2d": fwd, "conv2d_bwd_data": list(x), "conv2d_bwd_weight": list(w)}[op]


#: what a plan may be: its bytes, its JSON nesting, its cases
MAX_PLAN_BYTES = 16 << 20
MAX_PLAN_DEPTH = 16
MAX_PLAN_CASES = 100_000
#: the keys a plan entry may hold (the flags' names; ``shapes`` for the operands' shapes; ``gpu``
#: the GPU it is meant for, checked with ``--check``)
PLAN_KEYS = frozenset(
    "op name dtype b_dtype out_dtype shapes range seed stride padding dilation groups input_shape weight_shape "
    "memory_format alpha beta allow_tf32 allow_fp16_reduced_precision_reduction cudnn_deterministic "
    "cudnn_benchmark bias rowwise scale_a scale_b scale_range use_fast_accum gpu block_scale scale_exponents".split()
)


def read_json(path, what: str = "--plan"):
    """A small JSON file read safely, without fp16emu's loader (the kit runs alone): a regular file
    only (a FIFO, device or folder is refused without blocking), at most :data:`MAX_PLAN_BYTES`,
    nested at most :data:`MAX_PLAN_DEPTH` deep, no NaN or Infinity; ValueError naming ``what``."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        _fail(f"{what}: cannot open {path}: {exc.strerror}")
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            _fail(f"{what}: {path} is not a regular file (a FIFO, device or folder); give a JSON file")
        data = fh.read(MAX_PLAN_BYTES + 1)
    if len(data) > MAX_PLAN_BYTES:
        _fail(f"{what}: {path} is larger than {MAX_PLAN_BYTES >> 20} MiB; split the plan")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        _fail(f"{what}: {path} is not UTF-8 text (a JSON plan)")
    bare = np.frombuffer(re.sub(r'"(?:[^"\\]|\\.)*"', '""', text).encode(), np.uint8)
    opens = np.isin(bare, np.frombuffer(b"[{", np.uint8)).astype(np.int64)
    depth = np.cumsum(opens - np.isin(bare, np.frombuffer(b"]}", np.uint8)))
    if depth.size and depth.max() > MAX_PLAN_DEPTH:
        _fail(f"{what}: {path} nests JSON {int(depth.max())} deep; a plan needs {MAX_PLAN_DEPTH} at most")

    def constant(name):
        _fail(f"{what}: {path} holds {name}; plans take finite numbers")

    try:
        return json.loads(text, parse_constant=constant)
    except RecursionError:
        _fail(f"{what}: {path} nests JSON too deep")
    except json.JSONDecodeError as exc:
        _fail(f"{what}: {path} is not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})")


def read_plan(path, gpu: str | None = None, check_gpus: bool = False) -> list[dict]:
    """The checked entries of a JSON plan: a list of objects with the flags' names as keys
    (:data:`PLAN_KEYS`), or an object ``{"gpu": NAME, "cases": [...]}``; each entry checked by
    :func:`check_contract` (torch's contracts) and, with ``check_gpus``, by :func:`check_gpu`
    against ``gpu`` (``--gpu``), else the entry's own ``gpu``, else the plan's. Read by
    :func:`read_json` (size, depth, no FIFO or device). ValueError naming the entry and its field."""
    plan = read_json(path)
    plan_gpu = None
    if isinstance(plan, dict):
        extra = set(plan) - {"gpu", "cases"}
        if extra or "cases" not in plan:
            _fail(f"--plan: a plan object holds 'cases' (a list) and optionally 'gpu'; got keys {sorted(plan)}")
        plan_gpu, plan = plan.get("gpu"), plan["cases"]
    if not isinstance(plan, list) or not all(isinstance(s, dict) for s in plan):
        _fail(f"--plan: {path} must hold a JSON list of objects (one per case)")
    if len(plan) > MAX_PLAN_CASES:
        _fail(f"--plan: {len(plan):,} cases, more than {MAX_PLAN_CASES:,}; split the plan")
    specs = []
    for i, entry in enumerate(plan):
        label = entry.get("name", "unnamed")
        try:
            unknown = sorted(set(entry) - PLAN_KEYS)
            if unknown:
                _fail(f"{unknown[0]}: not a plan key (they are the flags' names: {', '.join(sorted(PLAN_KEYS))})")
            entry = dict(entry)
            target = gpu or entry.pop("gpu", None) or plan_gpu
            entry.pop("gpu", None)
            spec = check_contract(entry)
            if check_gpus and target is not None:
                if not isinstance(target, str):
                    _fail(f"gpu: expected a GPU name, got {target!r}")
                check_gpu(spec, target)
            specs.append(spec)
        except ValueError as exc:
            _fail(f"--plan: entry {i} ({label}): {exc}")
    return specs
