"""The capture format: the one definition of what a library capture holds, shared by the capture
kit (:mod:`validation.captures.kit`, on the GPU machine) and the reader
(:mod:`validation.captures.capture`, on any machine).

It needs numpy only (ml_dtypes for generated bfloat16 operands of non-fp8 ops), so it runs, with
the kit, as a plain file beside it where fp16emu is not installed: the ops a capture may hold
(:data:`OPS`) and the operands each takes (:data:`OPERANDS`, :data:`NEEDS`), the dtypes and their
short names, a plan entry's checks and defaults (:func:`check_plan_entry`), the operands a plan
entry draws (:func:`generate_operands`, with :func:`round_to_patterns` for fp8), and the
drawing again of operands a capture omitted (:func:`complete`, against :func:`operand_digest`).
Block-scaled ``scaled_mm`` (MX, NVFP4: :data:`BLOCK_SCALINGS`) draws per-block scales, which
torch hands to cuBLASLt swizzled (:func:`blocked_scales`, undone by :func:`logical_scales`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import tempfile
from pathlib import Path

import numpy as np

__all__ = [
    "BATCH_OPS",
    "BLOCK_SCALINGS",
    "FP4_DTYPE",
    "batch_size",
    "blocked_scales",
    "logical_scales",
    "CONV_OPS",
    "DTYPES",
    "DTYPE_ALIASES",
    "FP8_DTYPES",
    "FP8_SHORT_NAMES",
    "NEEDS",
    "OPERANDS",
    "OPS",
    "ROUNDED_FORMATS",
    "SCALED_OUT_DTYPES",
    "batch_axes",
    "check_plan_entry",
    "complete",
    "draw_bytes",
    "dtype_name",
    "json_field",
    "generate_operands",
    "operand_digest",
    "round_to_patterns",
    "save",
    "scaled_capture_fields",
    "take_batch",
    "with_batch",
]

#: the ops a capture may hold
OPS = (
    "mm",
    "addmm",
    "bmm",
    "baddbmm",
    "matmul",
    "linear",
    "conv2d",
    "conv2d_bwd_data",
    "conv2d_bwd_weight",
    "scaled_mm",
)

#: per op: the operand arrays it needs (required, optional)
OPERANDS = {
    "mm": (("A", "B"), ()),
    "addmm": (("A", "B", "C"), ()),
    "bmm": (("A", "B"), ()),
    "baddbmm": (("A", "B", "C"), ()),
    "matmul": (("A", "B"), ()),
    "linear": (("input", "weight"), ("bias",)),
    "conv2d": (("input", "weight"), ("bias",)),
    "conv2d_bwd_data": (("grad_output", "weight"), ()),
    "conv2d_bwd_weight": (("grad_output", "input"), ()),
    "scaled_mm": (("A", "B"), ("bias",)),
}

#: dtype names the kit accepts, as torch attribute names
DTYPES = (
    "float16",
    "bfloat16",
    "float32",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float4_e2m1fn_x2",
)
#: the fp8 dtypes of ``scaled_mm`` operands: OCP's (NVIDIA sm_89+, MI350) and MI300's fnuz pair
FP8_DTYPES = DTYPES[3:7]
#: torch's packed fp4 (two e2m1 values a byte, the even-k one in the low nibble): block-scaled
#: ``scaled_mm`` only; a capture holds one e2m1 pattern per uint8, in logical order
FP4_DTYPE = DTYPES[7]
#: block-scaled ``scaled_mm`` (``block_scale`` of a plan entry): name → (scale format, values
#: along K per scale, the operand dtypes it takes). MX: OCP Microscaling v1.0, an E8M0 scale
#: (torch.float8_e8m0fnu) per 32; NVFP4: fp4 with an e4m3 scale (torch.float8_e4m3fn, sign
#: clear: UE4M3) per 16. torch hands the scales to cuBLASLt swizzled (:func:`blocked_scales`).
BLOCK_SCALINGS = {
    "mx": ("ue8m0", 32, ("float8_e4m3fn", "float8_e5m2", FP4_DTYPE)),
    "nvfp4": ("ue4m3", 16, (FP4_DTYPE,)),
}
#: short names the command line and plans also take
DTYPE_ALIASES = {
    "fp16": "float16",
    "bf16": "bfloat16",
    "fp32": "float32",
    "e4m3": "float8_e4m3fn",
    "e5m2": "float8_e5m2",
    "e4m3fnuz": "float8_e4m3fnuz",
    "e5m2fnuz": "float8_e5m2fnuz",
    "e2m1": FP4_DTYPE,
}
#: ``scaled_mm`` output dtypes fp16emu models (fp8 outputs, with ``scale_result``, are not)
SCALED_OUT_DTYPES = ("bfloat16", "float16", "float32")

#: per format: (exponent bits, fraction bits, exponent bias, largest finite value, has −0)
ROUNDED_FORMATS = {
    "float8_e4m3fn": (4, 3, 7, 448.0, True),
    "float8_e5m2": (5, 2, 15, 57344.0, True),
    "float8_e4m3fnuz": (4, 3, 8, 240.0, False),
    "float8_e5m2fnuz": (5, 2, 16, 57344.0, False),
    "bfloat16": (8, 7, 127, float.fromhex("0x1.fep127"), True),
    FP4_DTYPE: (2, 1, 1, 6.0, True),
}

CONV_OPS = ("conv2d", "conv2d_bwd_data", "conv2d_bwd_weight")


#: per op: every field a capture of it must hold (the operands and the shapes or scales beside them)
NEEDS = {
    op: OPERANDS[op][0]
    + {
        "scaled_mm": ("scale_a", "scale_b"),
        "conv2d_bwd_data": ("input_shape",),
        "conv2d_bwd_weight": ("weight_shape",),
    }.get(op, ())
    for op in OPS
}
#: the fp8 (and fp4) dtypes' short names, as fp16emu's formats are named (``float8_e4m3fn`` → ``e4m3``)
FP8_SHORT_NAMES = {v: k for k, v in DTYPE_ALIASES.items() if v in FP8_DTYPES + (FP4_DTYPE,)}


def _fail(message: str):
    raise ValueError(message)


def _pair(name, value):
    if not isinstance(value, (int, list, tuple)) or isinstance(value, bool):
        _fail(f"{name}: expected two whole numbers, got {value!r}"[:200])
    value = [value, value] if isinstance(value, int) else list(value)
    if len(value) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        _fail(f"{name}: expected two whole numbers, got {value!r}")
    return value


def check_plan_entry(spec: dict) -> dict:
    """A plan entry (a dict with the kit's flags' names as keys) checked, with every default
    filled in (for ``scaled_mm``: torch._scaled_mm's contract, see
    :func:`validation.captures.kit.check_device` for what depends on the GPU); ValueError naming
    the field otherwise."""
    if not isinstance(spec, dict):
        _fail(f"spec: expected a JSON object (a plan entry with op, shapes, dtype, …), got {_kind(spec)}")
    spec = dict(spec)
    op = spec.get("op")
    if not isinstance(op, str) or op not in OPS:
        _fail(f"op: {_shown(op)} is not one of {', '.join(OPS)}")
    shapes = spec.setdefault("shapes", {})
    if not isinstance(shapes, dict):
        _fail(f"shapes: expected a JSON object of operand name → list of sizes, got {_kind(shapes)}")
    for name, shape in shapes.items():
        if not _sizes(shape, 1, MAX_DIMS):
            _fail(f"shapes.{str(name)[:40]}: expected a list of 1 to {MAX_DIMS} whole numbers ≥ 1, got {_shown(shape)}")
    for key in ("input_shape", "weight_shape"):
        if key in spec and not _sizes(spec[key], 4, 4):
            _fail(f"{key}: expected 4 whole numbers ≥ 1 (N, C, H, W or K, C/groups, R, S), got {_shown(spec[key])}")
    dtype = spec["dtype"] = dtype_name("dtype", spec.get("dtype", "float8_e4m3fn" if op == "scaled_mm" else "float16"))
    rng = spec.setdefault("range", [-1.0, 1.0])
    if not isinstance(rng, (list, tuple)) or len(rng) != 2 or not _finite(rng) or not rng[0] < rng[1]:
        _fail(f"range: expected [lo, hi] with lo < hi, got {rng!r}")
    seed = spec.setdefault("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        _fail(f"seed: expected a whole number ≥ 0, got {seed!r}")
    if op == "scaled_mm":
        return _check_scaled(spec)
    if dtype in FP8_DTYPES + (FP4_DTYPE,):
        _fail(
            f"dtype: {dtype} operands are captured as scaled_mm (torch._scaled_mm); {op} takes {', '.join(DTYPES[:3])}"
        )
    required, optional = OPERANDS[op]
    for name in required:
        if name not in shapes:
            _fail(f"shapes.{name}: {op} needs the shape of {name} (has {sorted(shapes)})")
    for name in shapes:
        if name not in required + optional:
            _fail(f"shapes.{name}: {op} takes {', '.join(required + optional)}")
    if op in CONV_OPS:
        for key, default in (("stride", 1), ("padding", 0), ("dilation", 1)):
            spec[key] = _pair(key, spec.get(key, default))
        groups = spec.setdefault("groups", 1)
        if not _whole(groups, 1):
            _fail(f"groups: expected a whole number ≥ 1, got {_shown(groups)}")
        if op == "conv2d_bwd_data" and "input_shape" not in spec:
            _fail("input_shape: conv2d_bwd_data needs the shape of the input whose gradient it computes")
        if op == "conv2d_bwd_weight" and "weight_shape" not in spec:
            _fail("weight_shape: conv2d_bwd_weight needs the shape of the weight whose gradient it computes")
    mf = spec.setdefault("memory_format", "contiguous")
    if mf not in ("contiguous", "channels_last"):
        _fail(f"memory_format: {mf!r} is not one of contiguous, channels_last")
    return spec


def generate_operands(spec: dict) -> dict[str, np.ndarray]:
    """The operands a plan entry describes, drawn on the CPU: for each operand in the order
    :data:`OPERANDS` lists it, uniform in ``range`` from one ``numpy.random.default_rng(seed)``
    stream, then rounded to ``dtype`` (RNE). The same spec gives the same arrays on any machine.

    ``scaled_mm``: A (M, K) then B (K, N), each rounded to nearest, ties to even, into its fp8
    format by :func:`round_to_patterns` and returned as uint8 bit patterns (``range`` must lie
    inside both formats' finite range, so nothing saturates or overflows); then a bias (N,) in
    the output dtype (bfloat16 as uint16 patterns, RNE; float16 by numpy's RNE cast); then the
    float32 scales: per tensor ``scale_a``/``scale_b`` as shape () arrays, or with ``rowwise``
    scale_a (M, 1) and scale_b (1, N) drawn uniform in ``scale_range`` from the same stream."""
    spec = check_plan_entry(spec)
    if spec["op"] == "scaled_mm":
        return _scaled_operands(spec)
    required, optional = OPERANDS[spec["op"]]
    rng = np.random.default_rng(spec["seed"])
    lo, hi = spec["range"]
    out = {}
    for name in required + optional:
        if name not in spec["shapes"]:
            continue
        values = rng.uniform(lo, hi, size=tuple(spec["shapes"][name]))
        out[name] = values.astype(_numpy_dtype(spec["dtype"]))
    return out


def dtype_name(field: str, name) -> str:
    """A dtype given by torch's name or a short one (``e4m3``, ``bf16``) as torch's name."""
    name = DTYPE_ALIASES.get(name, name) if isinstance(name, str) else name
    if not isinstance(name, str) or name not in DTYPES:
        _fail(f"{field}: {_shown(name)} is not one of {', '.join(DTYPES)} (or {', '.join(DTYPE_ALIASES)})")
    return name


def _finite(values) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) for v in values)


def _check_scaled(spec: dict) -> dict:
    """A ``scaled_mm`` plan entry checked against ``torch._scaled_mm``'s contract as far as it
    holds on every GPU (ATen ``_scaled_mm_out_cuda``, ``ScaledBlas.cpp``): fp8 A (M, K) and
    B (K, N) with K and N multiples of 16, both OCP or both fnuz; fp32 scales per tensor, or
    row-wise (scale_a (M, 1), scale_b (1, N)) with a bfloat16 output (older PyTorch's CUTLASS
    path and hipBLASLt take no other); an output of bfloat16, float16 or float32; a bias (N,)
    only with a 16-bit output, in that dtype. What depends on the GPU is :func:`check_device`'s."""
    b_dtype = spec["b_dtype"] = dtype_name("b_dtype", spec.get("b_dtype", spec["dtype"]))
    if spec.get("block_scale") is not None:
        return _check_block_scaled(spec)
    for field, name in (("dtype", spec["dtype"]), ("b_dtype", b_dtype)):
        if name not in FP8_DTYPES:
            fp4 = " (fp4 with block_scale mx or nvfp4)" if name == FP4_DTYPE else ""
            _fail(f"{field}: scaled_mm multiplies fp8 operands ({', '.join(FP8_DTYPES)}), got {name}{fp4}")
    if spec["dtype"].endswith("fnuz") != b_dtype.endswith("fnuz"):
        _fail(f"b_dtype: {b_dtype} with A {spec['dtype']}: OCP fp8 pairs with OCP, fnuz (MI300) with fnuz")
    shapes = spec.get("shapes", {})
    _, _, N = _scaled_mm_dims(shapes, ("A", "B", "bias"), 16, "torch._scaled_mm")
    out_dtype = spec["out_dtype"] = dtype_name("out_dtype", spec.get("out_dtype", "bfloat16"))
    if out_dtype not in SCALED_OUT_DTYPES:
        _fail(
            f"out_dtype: {out_dtype} outputs are not modelled (scale_result); take one of {', '.join(SCALED_OUT_DTYPES)}"
        )
    bias = spec.pop("bias", False)
    if bias not in (True, False):
        _fail(f"bias: expected true or false, got {bias!r}")
    if bias or "bias" in shapes:
        if shapes.get("bias", [N]) != [N]:
            _fail(f"shapes.bias: expected [{N}] (one value per column), got {shapes['bias']!r}")
        if out_dtype == "float32":
            _fail("bias: torch._scaled_mm takes no bias with a float32 output; take bfloat16 or float16")
        shapes = {**shapes, "bias": [N]}
    spec["shapes"] = {k: list(v) for k, v in shapes.items()}
    rowwise = spec.setdefault("rowwise", False)
    if rowwise not in (True, False):
        _fail(f"rowwise: expected true or false, got {rowwise!r}")
    if rowwise:
        if out_dtype != "bfloat16":
            _fail(f"rowwise: row-wise scales need out_dtype bfloat16 (older PyTorch and hipBLASLt), got {out_dtype}")
        for name in ("scale_a", "scale_b"):
            if name in spec:
                _fail(f"{name}: row-wise scales are drawn from scale_range, not given")
        lo_hi = spec.setdefault("scale_range", [0.5, 2.0])
        if not isinstance(lo_hi, (list, tuple)) or len(lo_hi) != 2 or not _finite(lo_hi) or not 0 < lo_hi[0] < lo_hi[1]:
            _fail(f"scale_range: expected [lo, hi] with 0 < lo < hi, got {lo_hi!r}")
    else:
        for name in ("scale_a", "scale_b"):
            v = spec.setdefault(name, 1.0)
            if not _finite([v]) or not 0 < abs(v) <= float(np.finfo(np.float32).max):
                _fail(f"{name}: expected a finite nonzero number (an fp32 scale), got {v!r}")
    fast = spec.setdefault("use_fast_accum", False)
    if fast not in (True, False):
        _fail(f"use_fast_accum: expected true or false, got {fast!r}")
    _check_operand_range(spec)
    return spec


def _check_block_scaled(spec: dict) -> dict:
    """A block-scaled ``scaled_mm`` entry (``block_scale``: :data:`BLOCK_SCALINGS`): A (M, K) and
    B (K, N) in the scaling's dtypes (fp8 with fp8, fp4 with fp4), K a multiple of 32 and N of
    16; per-block scales drawn, not given: UE8M0 exponents in ``scale_exponents`` [lo, hi]
    (whole numbers, default [-4, 4]), UE4M3 values in ``scale_range`` (default [0.5, 4]);
    bfloat16, float16 or float32 output; no bias, no row-wise or per-tensor scales, no fast
    accumulation (torch._scaled_mm takes none with block scales)."""
    name = spec["block_scale"]
    if name not in BLOCK_SCALINGS:
        _fail(f"block_scale: {_shown(name)} is not one of {', '.join(BLOCK_SCALINGS)}")
    scale, block, dtypes = BLOCK_SCALINGS[name]
    for field in ("dtype", "b_dtype"):
        if spec[field] not in dtypes:
            _fail(f"{field}: {name} block scaling takes {', '.join(dtypes)}, got {spec[field]}")
    if (spec["dtype"] == FP4_DTYPE) != (spec["b_dtype"] == FP4_DTYPE):
        _fail(f"b_dtype: {spec['b_dtype']} with A {spec['dtype']}: fp4 pairs with fp4, fp8 with fp8")
    shapes = spec.get("shapes", {})
    _scaled_mm_dims(shapes, ("A", "B"), 32, "block-scaled torch._scaled_mm", " (its scales are drawn per block)")
    spec["shapes"] = {k: list(v) for k, v in shapes.items()}
    out_dtype = spec["out_dtype"] = dtype_name("out_dtype", spec.get("out_dtype", "bfloat16"))
    if out_dtype not in SCALED_OUT_DTYPES:
        _fail(f"out_dtype: {out_dtype} outputs are not modelled; take one of {', '.join(SCALED_OUT_DTYPES)}")
    for key, why in (
        ("bias", "no bias"),
        ("rowwise", "no row-wise scales"),
        ("use_fast_accum", "no fast accumulation"),
    ):
        if spec.get(key, False) is not False:
            _fail(f"{key}: block-scaled torch._scaled_mm takes {why}; leave it out")
    for key in ("scale_a", "scale_b"):
        if key in spec:
            _fail(f"{key}: block scales are drawn (scale_exponents, scale_range), not given")
    spec.update(bias=False, rowwise=False, use_fast_accum=False, scale_format=scale, block=block)
    if scale == "ue8m0":
        lo_hi = spec.setdefault("scale_exponents", [-4, 4])
        if not (isinstance(lo_hi, (list, tuple)) and len(lo_hi) == 2 and all(_whole(v, -127) for v in lo_hi)):
            _fail(f"scale_exponents: expected [lo, hi], whole numbers in -127 … 127, got {_shown(lo_hi)}")
        if not lo_hi[0] <= lo_hi[1] <= 127:
            _fail(f"scale_exponents: expected lo ≤ hi ≤ 127, got {_shown(lo_hi)}")
    else:
        lo_hi = spec.setdefault("scale_range", [0.5, 4.0])
        ok = isinstance(lo_hi, (list, tuple)) and len(lo_hi) == 2 and _finite(lo_hi)
        if not ok or not 0 < lo_hi[0] < lo_hi[1] <= 448:
            _fail(f"scale_range: expected [lo, hi] with 0 < lo < hi ≤ 448 (e4m3 scales), got {_shown(lo_hi)}")
    _check_operand_range(spec)
    return spec


def _scaled_mm_dims(shapes: dict, names: tuple, k_multiple: int, kind: str, why: str = "") -> tuple[int, int, int]:
    """(M, K, N) of a ``scaled_mm`` entry's ``shapes`` (fp8 or block-scaled: ``kind`` names it in
    the errors): only the operands ``names`` (``why`` says why no other), A (M, K) and B (K, N)
    two sizes ≥ 1 each, K a multiple of ``k_multiple`` and N of 16; otherwise a ValueError
    naming the field."""
    for name in shapes:
        if name not in names:
            _fail(f"shapes.{name}: {kind} takes {', '.join(names[:-1])} and {names[-1]}{why}")
    for name in ("A", "B"):
        if not _sizes(shapes.get(name), 2, 2):
            _fail(f"shapes.{name}: scaled_mm needs {name} as two sizes ≥ 1, got {_shown(shapes.get(name))}")
    (M, K), (K2, N) = shapes["A"], shapes["B"]
    if K2 != K:
        _fail(f"shapes.B: A is {M}×{K}, so B must be {K}×N, got {K2}×{N}")
    if K % k_multiple or N % 16:
        multiples = "K and N multiples of 16" if k_multiple == 16 else f"K a multiple of {k_multiple} and N of 16"
        _fail(f"shapes: {kind} needs {multiples}, got K = {K}, N = {N}")
    return M, K, N


def _check_operand_range(spec: dict) -> None:
    """The drawing ``range`` inside the finite range of both operand formats; the default
    memory format."""
    lo, hi = spec["range"]
    a, b = spec["dtype"], spec["b_dtype"]
    largest = min(ROUNDED_FORMATS[a][3], ROUNDED_FORMATS[b][3])
    if not -largest <= lo < hi <= largest:
        _fail(f"range: [{lo}, {hi}] leaves the finite range ±{largest:g} of {a} / {b}")
    spec.setdefault("memory_format", "contiguous")


def blocked_scales(scales: np.ndarray) -> np.ndarray:
    """Logical block scales (rows, K // block) in the layout torch hands to cuBLASLt
    (``to_blocked`` of torch/testing/_internal/common_quantized.py; cuBLAS docs, "1D block
    scaling factors layout"): padded with zeros to 128-row × 4-column tiles, each tile's row
    32·i + j stored at (j, i), tiles row-major; returned flat."""
    rows, cols = scales.shape
    R, C = -(-rows // 128), -(-cols // 4)
    padded = np.zeros((R * 128, C * 4), scales.dtype)
    padded[:rows, :cols] = scales
    tiles = padded.reshape(R, 128, C, 4).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(tiles.reshape(-1, 4, 32, 4).transpose(0, 2, 1, 3)).reshape(-1)


def logical_scales(flat: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """The inverse of :func:`blocked_scales`: the (rows, cols) scales from the swizzled ones;
    ValueError when their size is not the swizzled size of (rows, cols)."""
    R, C = -(-rows // 128), -(-cols // 4)
    flat = np.asarray(flat).reshape(-1)
    if flat.size != R * C * 512:
        _fail(f"scales: {flat.size} swizzled scales; ({rows}, {cols}) scales swizzle to {R * C * 512}")
    tiles = flat.reshape(R * C, 32, 4, 4).transpose(0, 2, 1, 3).reshape(R, C, 128, 4)
    return np.ascontiguousarray(tiles.transpose(0, 2, 1, 3).reshape(R * 128, C * 4)[:rows, :cols])


def _whole(v, low: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= low


#: the most dimensions an operand's shape may have (conv2d: 4; linear: a few batch dimensions)
MAX_DIMS = 8


def _sizes(shape, fewest: int, most: int) -> bool:
    """Whether ``shape`` is a list of ``fewest``..``most`` whole numbers ≥ 1."""
    return isinstance(shape, (list, tuple)) and fewest <= len(shape) <= most and all(_whole(d, 1) for d in shape)


def _kind(value) -> str:
    return "null" if value is None else f"a {type(value).__name__} ({_shown(value)})"


def _shown(value) -> str:
    """``value``'s repr, cut short (a field may be megabytes long)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def draw_bytes(spec: dict) -> int:
    """The bytes :func:`generate_operands` allocates for the plan entry ``spec`` (checked by
    :func:`check_plan_entry`), counted in Python integers with nothing drawn, for the caller to
    hold against its memory limit before drawing: per element the float64 draw and the kept copy
    (16 bytes), and for fp8 operands :func:`round_to_patterns`' float64 and int64 temporaries."""
    spec = check_plan_entry(spec)
    per_element = 48 if spec["op"] == "scaled_mm" else 16
    return sum(math.prod(shape) * per_element for shape in spec["shapes"].values())


def round_to_patterns(values, dtype: str) -> np.ndarray:
    """``values`` (finite, float64) rounded to nearest, ties to even, into ``dtype`` (an fp8
    dtype name or ``"bfloat16"``), as bit patterns: uint8 for fp8, uint16 for bfloat16. Values
    beyond the format's largest finite value are a ValueError (no saturation, no overflow to
    NaN or inf: the kit draws inside the range). A value rounding to zero keeps its sign where
    the format has −0 (as ml_dtypes' casts do); the fnuz formats have only +0.

    One rounding from float64, with numpy only (no ml_dtypes, no torch), so the same draws give
    the same patterns on any machine: in the binade of |x| (at least the smallest normal one,
    where the subnormals share its spacing), |x| / spacing is an exact float64 that ``np.rint``
    rounds half to even; the pattern's exponent and fraction fields are then one integer,
    ``(binade − emin) · 2^fraction_bits + that count``, whose carry into the next binade is the
    exponent field's increment."""
    exp_bits, frac_bits, bias, largest, has_negative_zero = ROUNDED_FORMATS[dtype]
    x = np.asarray(values, np.float64)
    if not np.isfinite(x).all() or (np.abs(x) > largest).any():
        _fail(f"values: {dtype} holds finite values up to ±{largest:g}; got {x[~(np.abs(x) <= largest)][:3]!r}")
    a = np.abs(x)
    emin = 1 - bias
    _, e2 = np.frexp(a)  # a = m · 2^e2 with m in [0.5, 1): the leading bit is 2^(e2 − 1)
    binade = np.where(a > 0, np.maximum(e2 - 1, emin), emin)
    count = np.rint(a / np.ldexp(1.0, binade - frac_bits)).astype(np.int64)
    code = ((binade - emin).astype(np.int64) << frac_bits) + count
    negative = np.signbit(x) & ((code != 0) | has_negative_zero)
    bits = code | (negative.astype(np.int64) << (exp_bits + frac_bits))
    return bits.astype(np.uint8 if exp_bits + frac_bits < 8 else np.uint16)


def _scaled_operands(spec: dict) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(spec["seed"])
    lo, hi = spec["range"]
    (M, K), (_, N) = spec["shapes"]["A"], spec["shapes"]["B"]
    out = {
        "A": round_to_patterns(rng.uniform(lo, hi, size=(M, K)), spec["dtype"]),
        "B": round_to_patterns(rng.uniform(lo, hi, size=(K, N)), spec["b_dtype"]),
    }
    if spec.get("block_scale") is not None:  # scale_a (M, K // block), scale_b (N, K // block): uint8 patterns
        for name, rows in (("scale_a", M), ("scale_b", N)):
            shape = (rows, K // spec["block"])
            if spec["scale_format"] == "ue8m0":
                e_lo, e_hi = spec["scale_exponents"]
                out[name] = (rng.integers(e_lo, e_hi + 1, size=shape) + 127).astype(np.uint8)
            else:
                out[name] = round_to_patterns(rng.uniform(*spec["scale_range"], size=shape), "float8_e4m3fn")
        return out
    if "bias" in spec["shapes"]:
        values = rng.uniform(lo, hi, size=N)
        bf16 = spec["out_dtype"] == "bfloat16"
        out["bias"] = round_to_patterns(values, "bfloat16") if bf16 else values.astype(np.float16)
    if spec["rowwise"]:
        s_lo, s_hi = spec["scale_range"]
        out["scale_a"] = rng.uniform(s_lo, s_hi, size=(M, 1)).astype(np.float32)
        out["scale_b"] = rng.uniform(s_lo, s_hi, size=(1, N)).astype(np.float32)
    else:
        out["scale_a"] = np.asarray(spec["scale_a"], np.float32)
        out["scale_b"] = np.asarray(spec["scale_b"], np.float32)
    return out


def _numpy_dtype(name: str):
    if name == "float16":
        return np.float16
    if name == "float32":
        return np.float32
    import ml_dtypes  # bf16 and fp8 have no numpy dtype of their own

    return getattr(ml_dtypes, name)


#: the longest JSON field (``spec``, ``shapes``) a capture may hold, and its deepest nesting
MAX_JSON_CHARS = 1 << 20
MAX_JSON_DEPTH = 16


def json_field(fields: dict, name: str):
    """The JSON value of the string field ``name`` of a capture, checked before it is parsed: a
    0-d string array or a str of at most :data:`MAX_JSON_CHARS` characters nested at most
    :data:`MAX_JSON_DEPTH` deep (counted without recursing), no NaN/Infinity; ValueError naming
    the field otherwise."""
    text = _scalar(fields, name, "US", "a JSON text (a string)")
    if len(text) > MAX_JSON_CHARS:
        _fail(f"{name}: {len(text)} characters of JSON, over the limit of {MAX_JSON_CHARS}")
    depth = deepest = 0
    for c in re.sub(r"[^\[\]{}]+", "", re.sub(r'"(?:[^"\\]|\\.)*"?', "", text)):
        depth += 1 if c in "[{" else -1
        deepest = max(deepest, depth)
    if deepest > MAX_JSON_DEPTH:
        _fail(f"{name}: JSON nested {deepest} levels deep, over the limit of {MAX_JSON_DEPTH}")

    def constant(word):
        raise ValueError(f"{word} is not a JSON number")

    try:
        return json.loads(text, parse_constant=constant)
    except (ValueError, RecursionError) as err:
        _fail(f"{name}: not valid JSON ({' '.join(str(err).split())[:80]})")


def _scalar(fields: dict, name: str, kinds: str, what: str):
    """Field ``name`` as one value (a str, int or float, or a 0-d array) of the dtype kinds ``kinds``."""
    v = fields[name]
    if isinstance(v, (str, int, float)) and not isinstance(v, bool):
        v = np.asarray(v)
    if not isinstance(v, np.ndarray) or v.ndim != 0 or v.dtype.kind not in kinds:
        shape = getattr(v, "shape", None)
        got = f"a {v.dtype} array of shape {shape}" if isinstance(v, np.ndarray) else _kind(v)
        _fail(f"{name}: expected {what}, got {got}")
    return v.item() if v.dtype.kind not in "US" else str(v)


def _vector(fields: dict, name: str, kinds: str, count: int, what: str) -> np.ndarray:
    """Field ``name`` as a 1-d array of ``count`` finite values of the dtype kinds ``kinds``."""
    v = np.asarray(fields[name])
    if v.shape != (count,) or v.dtype.kind not in kinds or (v.dtype.kind == "f" and not np.isfinite(v).all()):
        _fail(f"{name}: expected {what}, got a {v.dtype} array of shape {v.shape}")
    return v


def complete(fields: dict, *, max_bytes: int | None = None) -> dict:
    """A capture written with ``omit_operands``, with its operands drawn again from its seed and
    checked against the sha256 the GPU machine recorded; ValueError when one differs. Every
    field that describes the draw (``spec`` or ``op``, ``dtype``, ``seed``, ``range``, ``shapes``,
    ``input_shape``, ``weight_shape``) is checked first, naming the field, and the draw's size
    (:func:`draw_bytes`) is held against ``max_bytes`` before anything is drawn."""
    fields = dict(fields)
    if "spec" in fields:  # the whole plan entry (scaled_mm)
        spec = json_field(fields, "spec")
    else:
        spec = {}
        for key in ("op", "dtype", "memory_format"):
            if key in fields:
                spec[key] = _scalar(fields, key, "US", "a string")
        if "seed" in fields:
            spec["seed"] = int(_scalar(fields, "seed", "iu", "a whole number"))
        if "range" not in fields:
            _fail("range: needed to draw the omitted operands ([lo, hi])")
        spec["range"] = [float(x) for x in _vector(fields, "range", "fiu", 2, "[lo, hi], two numbers")]
        if "shapes" not in fields:
            _fail("shapes: needed to draw the omitted operands (a JSON object of operand name → sizes)")
        spec["shapes"] = json_field(fields, "shapes")
        for key in ("input_shape", "weight_shape"):
            if key in fields:
                spec[key] = [int(x) for x in _vector(fields, key, "iu", 4, "4 whole numbers")]
    if max_bytes is not None and draw_bytes(spec) > max_bytes:
        _fail(
            f"shapes: drawing the omitted operands needs {draw_bytes(spec)} bytes, over the memory limit of "
            f"{max_bytes} bytes (FP16EMU_MAX_MEMORY_GIB, ulimit -v)"
        )
    for name, array in _drawn(spec, fields).items():
        digest = operand_digest(array)
        want = str(fields.pop(f"{name}_sha256"))
        if digest != want:
            _fail(f"{name}: the operand drawn from seed {spec['seed']} is not the GPU machine's (sha256 differs)")
        fields[name] = array
    return fields


def operand_digest(array: np.ndarray) -> str:
    """The sha256 of an operand's bytes (C order), which a capture written with omitted operands keeps."""
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def scaled_capture_fields(spec: dict, operands: dict[str, np.ndarray], out: np.ndarray, *, generated=True, **recorded):
    """The fields of a ``scaled_mm`` capture (what :func:`save` writes and
    ``validation.captures`` reads), without torch: ``A`` (M, K) and ``B`` (K, N, logical order)
    as uint8 bit patterns with ``A_dtype``/``B_dtype`` (np.savez cannot write float8 arrays
    numpy reads back), ``scale_a``/``scale_b`` float32 (shape () per tensor, (M, 1) and (1, N)
    row-wise), an optional ``bias`` (N,) with ``bias_dtype``, ``out`` (M, N) with ``out_dtype``
    (bfloat16 as uint16 patterns, float16 and float32 as values), ``use_fast_accum``,
    ``scaling`` (``tensorwise`` or ``rowwise``) and, for generated operands, the plan entry
    (``spec``, JSON) with ``seed``, ``range`` and ``shapes`` that draw them again; ``recorded``
    (``gpu``, ``kernels``, ``torch``, ``cuda``, ``repeat_differs``, …) is added as given.

    Block-scaled (``block_scale`` in the entry): A and B patterns of e4m3 / e5m2 / e2m1 (fp4 one
    value a byte, ``A_dtype`` ``float4_e2m1fn_x2``), ``scale_a`` (M, K // block) and ``scale_b``
    (N, K // block) as uint8 patterns in logical order (rows of A, columns of B; never the
    swizzled layout torch hands to cuBLASLt, :func:`logical_scales`), ``scale_format``
    (``ue8m0`` or ``ue4m3``), ``block`` (32 or 16) and ``scaling`` (``mx`` or ``nvfp4``)."""
    spec = check_plan_entry(spec)
    A, B = operands["A"], operands["B"]
    M, N = A.shape[0], B.shape[1]
    out = np.asarray(out)
    want = {"bfloat16": np.uint16, "float16": np.float16, "float32": np.float32}[spec["out_dtype"]]
    if out.shape != (M, N) or out.dtype.itemsize != np.dtype(want).itemsize:
        _fail(f"out: expected ({M}, {N}) {spec['out_dtype']} values, got {out.shape} {out.dtype}")
    if A.dtype != np.uint8 or B.dtype != np.uint8 or A.ndim != 2 or B.shape[0] != A.shape[1]:
        _fail(f"A: expected uint8 patterns A (M, K) and B (K, N), got {A.dtype} {A.shape} and {B.dtype} {B.shape}")
    block = spec.get("block_scale") is not None
    scales = {}
    for name, rows in (("scale_a", M), ("scale_b", N)):
        v = np.asarray(operands[name])
        if block:  # logical (rows, K // block) patterns
            want_shape = (rows, A.shape[1] // spec["block"])
            if v.dtype != np.uint8 or v.shape != want_shape:
                _fail(
                    f"{name}: expected uint8 {spec['scale_format']} patterns of shape {want_shape}, got {v.dtype} {v.shape}"
                )
        scales[name] = v if block else v.astype(np.float32)
    fields = {
        "op": "scaled_mm",
        "A": A,
        "B": B,
        "A_dtype": spec["dtype"],
        "B_dtype": spec["b_dtype"],
        "dtype": spec["dtype"],
        **scales,
        "out": out.view(want),
        "out_dtype": spec["out_dtype"],
        "use_fast_accum": bool(spec["use_fast_accum"]),
        "scaling": "rowwise" if np.size(operands["scale_a"]) > 1 or np.size(operands["scale_b"]) > 1 else "tensorwise",
    }
    if block:
        fields.update(scaling=spec["block_scale"], scale_format=spec["scale_format"], block=spec["block"])
    if "bias" in operands:
        fields["bias"] = operands["bias"]
        fields["bias_dtype"] = "bfloat16" if operands["bias"].dtype == np.uint16 else operands["bias"].dtype.name
    if generated:
        fields.update(spec=json.dumps(spec), seed=spec["seed"], range=spec["range"], shapes=json.dumps(spec["shapes"]))
    if "name" in spec:
        fields["name"] = spec["name"]
    fields.update(recorded)
    return fields


def save(path, fields: dict) -> Path:
    """Write a capture atomically: into a temporary file of a random name made exclusively
    (``O_EXCL``, :func:`tempfile.mkstemp`) beside ``path``, then renamed over it. A link planted at
    ``path`` or at any temporary name is replaced or refused, never written through; a failed
    write leaves the old file as it was. The file's mode follows the user's umask."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **{k: np.asarray(v) for k, v in fields.items()})
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


# --- batch sweeps: how the files of one sweep relate ------------------------------------------

#: the ops a batch sweep (the kit's ``--batch-sweep``) takes, and the axis each sweeps: M for
#: ``mm``/``addmm``/``linear`` (a linear's leading axis) and ``scaled_mm``, the batch of
#: ``bmm``/``baddbmm``, a ``matmul``'s output's leading axis, N (images) for convolutions
BATCH_OPS = OPS


def batch_axes(spec: dict) -> dict[str, int]:
    """The arrays a batch sweep cuts and the axis of each (``out`` included): for ``mm``/``addmm``
    A's rows (and C's where it has M rows), a linear's input's leading axis, the batch of
    ``bmm``/``baddbmm`` (C's where it has one), images (N) of a convolution, ``scaled_mm``'s A
    rows (and row-wise scale_a). Arrays not named are the same at every batch size."""
    op, shapes = spec["op"], spec["shapes"]
    if op not in BATCH_OPS:
        _fail(f"--batch-sweep: {op} is not swept; it takes {', '.join(BATCH_OPS)}")
    if op in ("mm", "addmm", "scaled_mm"):
        axes = {"A": 0}
        if op == "addmm" and len(shapes["C"]) == 2 and shapes["C"][0] == shapes["A"][0] != 1:
            axes["C"] = 0
        if op == "scaled_mm" and (spec.get("rowwise") or spec.get("block_scale")):
            axes["scale_a"] = 0
    elif op == "matmul":  # the output's leading axis: A's rows (2-D), else the batch dims' first
        A, B = shapes["A"], shapes["B"]
        ndim = max(len(A), len(B))
        axes = {"A": 0} if ndim == 2 else {k: 0 for k, s in (("A", A), ("B", B)) if len(s) == ndim and s[0] != 1}
        if not axes:
            _fail("shapes.A: the matmul's leading batch dim is 1 in A and B; nothing to sweep")
    elif op == "linear":
        if len(shapes["input"]) < 2:
            _fail("shapes.input: a 1-D linear input has no batch to sweep")
        axes = {"input": 0}
    elif op in ("bmm", "baddbmm"):
        axes = {"A": 0, "B": 0}
        if op == "baddbmm" and len(shapes["C"]) == 3 and shapes["C"][0] == shapes["A"][0] != 1:
            axes["C"] = 0
    elif op == "conv2d_bwd_weight":
        axes = {"grad_output": 0, "input": 0}
    else:
        axes = {"input": 0} if op == "conv2d" else {"grad_output": 0}
    return {**axes, "out": 0}


def batch_size(spec: dict) -> int:
    """The size of the axis a batch sweep cuts (:func:`batch_axes`)."""
    if spec["op"] == "conv2d_bwd_data":
        return int(spec["input_shape"][0])
    name = next(k for k in batch_axes(spec) if k != "out")
    return int(spec["shapes"][name][0])


def with_batch(spec: dict, n: int) -> dict:
    """``spec`` with its swept axis (:func:`batch_axes`) of size ``n``."""
    axes = batch_axes(spec)
    shapes = {k: list(v) for k, v in spec["shapes"].items()}
    for name in axes:
        if name in shapes:
            shapes[name][0] = n
    out = {**spec, "shapes": shapes}
    if spec["op"] == "conv2d_bwd_data":
        out["input_shape"] = [n] + list(spec["input_shape"][1:])
    return out


def take_batch(spec: dict, operands: dict[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    """The operands of ``spec`` (drawn at its own, the largest, batch size) cut to batch ``n``:
    the leading ``n`` entries along each axis :func:`batch_axes` names, the others unchanged."""
    axes = batch_axes(spec)
    return {k: (np.ascontiguousarray(v[:n]) if k in axes else v) for k, v in operands.items()}


def _drawn(spec: dict, fields: dict) -> dict[str, np.ndarray]:
    """The operands a capture's generator fields draw: a batch sweep's file (``batch``) draws the
    sweep's largest case (its ``spec``) and takes its first ``batch`` entries (:func:`take_batch`)."""
    operands = generate_operands(spec)
    if "batch" not in fields:
        return operands
    n = np.asarray(fields["batch"])
    if n.ndim or n.dtype.kind not in "iu" or not 1 <= int(n) <= batch_size(spec):
        _fail(f"batch: expected a whole number from 1 to the sweep's largest, {batch_size(spec)}, got {n!r}")
    return take_batch(spec, operands, int(n))
