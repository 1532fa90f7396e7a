"""The capture kit: run a PyTorch op on the GPU and save what it computed as an fp16emu capture.

Runs on any machine with PyTorch and a GPU (NVIDIA or AMD); it needs only numpy and torch, so it
also runs as a plain file (``python capture_torch.py …``) where fp16emu is not installed.
``fp16emu identify CAPTURE.npz`` then searches for the accumulation schedule that reproduces the
output bit for bit.

Three ways in:

* generated inputs, one op from the command line::

      python -m validation.capture_torch mm --A 256 4096 --B 4096 256 --out mm.npz
      python -m validation.capture_torch conv2d --input 2 64 14 14 --weight 64 64 3 3 \\
          --padding 1 1 --memory-format channels_last --out conv.npz
      python -m validation.capture_torch scaled_mm --A 64 4096 --B 4096 64 --dtype e4m3 \\
          --b-dtype e5m2 --rowwise --bias --fast-accum --out fp8.npz

* many cases from a JSON plan (a list of objects with the same fields as the flags), one file
  each: ``python -m validation.capture_torch --plan plan.json --out-dir captures/``;
* the user's own tensors, from Python::

      from validation.capture_torch import capture
      capture("fail.npz", "linear", input=x, weight=w, bias=b)
      capture("fp8.npz", "scaled_mm", A=a, B=b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

The capture format (an ``.npz``; see ``docs/library.md``): ``op`` (one of :data:`OPS`), the
operands under torch's names (``A``, ``B``, ``C``; ``input``, ``weight``, ``bias``;
``grad_output`` with ``input_shape`` or ``weight_shape``), ``stride``, ``padding``,
``dilation`` (two integers each) and ``groups`` for convolutions, ``out`` (the GPU's result in
torch's logical order, NCHW for convolutions, in its own dtype); optional ``memory_format``
(``contiguous`` or ``channels_last``), ``gpu``, ``kernels`` (the GPU kernels the profiler saw),
``torch``, ``alpha``/``beta`` (addmm), ``out_dtype`` and the backend switches in force
(``allow_fp16_reduced_precision_reduction``, ``allow_tf32``, ``cudnn_deterministic``).

Generated inputs are drawn on the CPU with numpy's PCG64 (``numpy.random.default_rng(seed)``,
uniform in [lo, hi), rounded to the operand dtype), so the same seed gives the same operands on
any machine; ``repeat_differs`` counts output elements that differ between two runs of the op.

fp8 GEMMs are ``scaled_mm`` (``torch._scaled_mm``): fp8 operands rounded on the CPU by
:func:`round_to_patterns` (numpy only), stored as uint8 bit patterns with ``A_dtype`` and
``B_dtype``, the scales, bias and output as :func:`scaled_capture_fields` says; what torch and the
GPU accept is checked first (:func:`check_plan_entry`, :func:`check_device`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

__all__ = [
    "OPS",
    "OPERANDS",
    "FP8_DTYPES",
    "DeviceRefused",
    "capture",
    "capture_case",
    "check_device",
    "check_plan_entry",
    "complete",
    "generate_operands",
    "main",
    "plan_entry_from_argv",
    "read_plan",
    "round_to_patterns",
    "run_op",
    "save",
    "scaled_capture_fields",
]

#: the ops a capture may hold
OPS = ("mm", "addmm", "bmm", "linear", "conv2d", "conv2d_bwd_data", "conv2d_bwd_weight", "scaled_mm")

#: per op: the operand arrays it needs (required, optional)
OPERANDS = {
    "mm": (("A", "B"), ()),
    "addmm": (("A", "B", "C"), ()),
    "bmm": (("A", "B"), ()),
    "linear": (("input", "weight"), ("bias",)),
    "conv2d": (("input", "weight"), ("bias",)),
    "conv2d_bwd_data": (("grad_output", "weight"), ()),
    "conv2d_bwd_weight": (("grad_output", "input"), ()),
    "scaled_mm": (("A", "B"), ("bias",)),
}

#: dtype names the kit accepts, as torch attribute names
DTYPES = ("float16", "bfloat16", "float32", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
#: the fp8 dtypes of ``scaled_mm`` operands: OCP's (NVIDIA sm_89+, MI350) and MI300's fnuz pair
FP8_DTYPES = DTYPES[3:]
#: short names the command line and plans also take
DTYPE_ALIASES = {
    "fp16": "float16",
    "bf16": "bfloat16",
    "fp32": "float32",
    "e4m3": "float8_e4m3fn",
    "e5m2": "float8_e5m2",
    "e4m3fnuz": "float8_e4m3fnuz",
    "e5m2fnuz": "float8_e5m2fnuz",
}
#: ``scaled_mm`` output dtypes fp16emu models (fp8 outputs, with ``scale_result``, are not)
SCALED_OUT_DTYPES = ("bfloat16", "float16", "float32")

#: per format: (exponent bits, fraction bits, exponent bias, largest finite value, has −0)
_FORMATS = {
    "float8_e4m3fn": (4, 3, 7, 448.0, True),
    "float8_e5m2": (5, 2, 15, 57344.0, True),
    "float8_e4m3fnuz": (4, 3, 8, 240.0, False),
    "float8_e5m2fnuz": (5, 2, 16, 57344.0, False),
    "bfloat16": (8, 7, 127, float.fromhex("0x1.fep127"), True),
}

CONV_OPS = ("conv2d", "conv2d_bwd_data", "conv2d_bwd_weight")


def _fail(message: str):
    raise ValueError(message)


def _pair(name, value):
    value = [value, value] if isinstance(value, int) else list(value)
    if len(value) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        _fail(f"{name}: expected two whole numbers, got {value!r}")
    return value


def _check_spec(spec: dict) -> dict:
    """A plan entry with its defaults filled in; ValueError naming the field otherwise."""
    spec = dict(spec)
    op = spec.get("op")
    if op not in OPS:
        _fail(f"op: {op!r} is not one of {', '.join(OPS)}")
    dtype = spec["dtype"] = _dtype_name("dtype", spec.get("dtype", "float8_e4m3fn" if op == "scaled_mm" else "float16"))
    rng = spec.setdefault("range", [-1.0, 1.0])
    if not isinstance(rng, (list, tuple)) or len(rng) != 2 or not _finite(rng) or not rng[0] < rng[1]:
        _fail(f"range: expected [lo, hi] with lo < hi, got {rng!r}")
    seed = spec.setdefault("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        _fail(f"seed: expected a whole number ≥ 0, got {seed!r}")
    if op == "scaled_mm":
        return _check_scaled(spec)
    if dtype in FP8_DTYPES:
        _fail(
            f"dtype: {dtype} operands are captured as scaled_mm (torch._scaled_mm); {op} takes {', '.join(DTYPES[:3])}"
        )
    required, optional = OPERANDS[op]
    shapes = spec.get("shapes", {})
    for name in required:
        if name not in shapes:
            _fail(f"shapes.{name}: {op} needs the shape of {name} (has {sorted(shapes)})")
    for name in shapes:
        if name not in required + optional:
            _fail(f"shapes.{name}: {op} takes {', '.join(required + optional)}")
    if op in CONV_OPS:
        for key, default in (("stride", 1), ("padding", 0), ("dilation", 1)):
            spec[key] = _pair(key, spec.get(key, default))
        spec.setdefault("groups", 1)
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
    spec = _check_spec(spec)
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


def _dtype_name(field: str, name) -> str:
    """A dtype given by torch's name or a short one (``e4m3``, ``bf16``) as torch's name."""
    name = DTYPE_ALIASES.get(name, name)
    if name not in DTYPES:
        _fail(f"{field}: {name!r} is not one of {', '.join(DTYPES)} (or {', '.join(DTYPE_ALIASES)})")
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
    b_dtype = spec["b_dtype"] = _dtype_name("b_dtype", spec.get("b_dtype", spec["dtype"]))
    for field, name in (("dtype", spec["dtype"]), ("b_dtype", b_dtype)):
        if name not in FP8_DTYPES:
            _fail(f"{field}: scaled_mm multiplies fp8 operands ({', '.join(FP8_DTYPES)}), got {name}")
    if spec["dtype"].endswith("fnuz") != b_dtype.endswith("fnuz"):
        _fail(f"b_dtype: {b_dtype} with A {spec['dtype']}: OCP fp8 pairs with OCP, fnuz (MI300) with fnuz")
    shapes = spec.get("shapes", {})
    for name in shapes:
        if name not in ("A", "B", "bias"):
            _fail(f"shapes.{name}: scaled_mm takes A, B and bias")
    for name in ("A", "B"):
        shape = shapes.get(name)
        if not isinstance(shape, (list, tuple)) or len(shape) != 2 or not all(_whole(d, 1) for d in shape):
            _fail(f"shapes.{name}: scaled_mm needs {name} as two sizes ≥ 1, got {shape!r}")
    (M, K), (K2, N) = shapes["A"], shapes["B"]
    if K2 != K:
        _fail(f"shapes.B: A is {M}×{K}, so B must be {K}×N, got {K2}×{N}")
    if K % 16 or N % 16:
        _fail(f"shapes: torch._scaled_mm needs K and N multiples of 16, got K = {K}, N = {N}")
    out_dtype = spec["out_dtype"] = _dtype_name("out_dtype", spec.get("out_dtype", "bfloat16"))
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
    lo, hi = spec["range"]
    largest = min(_FORMATS[spec["dtype"]][3], _FORMATS[b_dtype][3])
    if not -largest <= lo < hi <= largest:
        _fail(f"range: [{lo}, {hi}] leaves the finite range ±{largest:g} of {spec['dtype']} / {b_dtype}")
    spec.setdefault("memory_format", "contiguous")
    return spec


def _whole(v, low: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= low


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
    exp_bits, frac_bits, bias, largest, has_negative_zero = _FORMATS[dtype]
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


# --- the GPU side -----------------------------------------------------------------------------


def _to_torch(torch, array: np.ndarray, dtype: str, device):
    """A numpy array (ml_dtypes for bf16/fp8) as a torch tensor of ``dtype`` on ``device``."""
    if array.dtype.itemsize == 2 and dtype == "bfloat16":
        return torch.from_numpy(array.view(np.int16).copy()).view(torch.bfloat16).to(device)
    if array.dtype.itemsize == 1:
        return torch.from_numpy(array.view(np.uint8).copy()).view(getattr(torch, dtype)).to(device)
    return torch.from_numpy(np.ascontiguousarray(array)).to(device)


def _to_numpy(t) -> np.ndarray:
    """A torch tensor's values in its logical (contiguous) order as numpy (ml_dtypes for bf16/fp8)."""
    t = t.detach().contiguous().cpu()
    name = str(t.dtype).removeprefix("torch.")
    if name == "bfloat16":
        import ml_dtypes

        return t.view(__import__("torch").int16).numpy().view(ml_dtypes.bfloat16)
    if t.element_size() == 1 and name.startswith("float8"):
        import ml_dtypes

        return t.view(__import__("torch").uint8).numpy().view(getattr(ml_dtypes, name))
    return t.numpy()


def _patterns(t) -> np.ndarray:
    """A torch tensor's bit patterns in its logical (row-major) order: uint8 for fp8, uint16 for
    bfloat16, the values themselves for float16 and float32 (no ml_dtypes needed)."""
    torch = __import__("torch")
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    if t.element_size() == 1:
        return t.view(torch.uint8).numpy()
    return t.numpy()


class DeviceRefused(ValueError):
    """A plan entry the GPU (or the installed PyTorch) cannot run, found before it is touched."""


def check_device(torch, spec: dict, device) -> None:
    """Refuse (:class:`DeviceRefused`, naming the field) a ``scaled_mm`` entry this device cannot
    run, before any tensor reaches it: ``torch._scaled_mm`` runs on NVIDIA GPUs of compute
    capability 8.9 or newer with OCP fp8 (not e5m2 × e5m2: cuBLASLt has no such kernel), and
    on AMD MI300 (gfx942) with the fnuz types or gfx950 and newer with OCP fp8 (row-wise scales
    there need B in e4m3); the CPU runs PyTorch's reference (for tests only, not a GPU kernel).
    Other ops: no check."""
    if spec["op"] != "scaled_mm":
        return
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, spec["dtype"]):
        raise DeviceRefused(f"torch: PyTorch {torch.__version__} has no torch._scaled_mm with {spec['dtype']}")
    dev = torch.device(device)
    if dev.type == "cpu":
        return
    if dev.type != "cuda":
        raise DeviceRefused(f"device: torch._scaled_mm runs on CUDA and ROCm GPUs, not {dev.type}")
    props = torch.cuda.get_device_properties(dev)
    fnuz = spec["dtype"].endswith("fnuz")
    if getattr(torch.version, "hip", None):
        arch = str(getattr(props, "gcnArchName", "")).split(":")[0]
        if arch == "gfx942" and not fnuz:
            raise DeviceRefused(
                f"dtype: MI300 ({arch}) multiplies float8_e4m3fnuz / float8_e5m2fnuz, not {spec['dtype']}"
            )
        if arch != "gfx942" and fnuz:
            raise DeviceRefused(f"dtype: the fnuz types are MI300's (gfx942); {arch} takes float8_e4m3fn / float8_e5m2")
        if arch != "gfx942" and not arch.startswith(("gfx95", "gfx12")):
            raise DeviceRefused(f"device: torch._scaled_mm needs MI300 (gfx942) or newer, this is {arch}")
        if spec["rowwise"] and "e4m3" not in spec["b_dtype"]:
            raise DeviceRefused(f"b_dtype: row-wise scales on ROCm need B in e4m3, got {spec['b_dtype']}")
        return
    if (props.major, props.minor) < (8, 9):
        raise DeviceRefused(
            f"device: torch._scaled_mm needs compute capability 8.9 or newer (Ada, Hopper, Blackwell); "
            f"{props.name} is {props.major}.{props.minor}"
        )
    if fnuz:
        raise DeviceRefused(f"dtype: {spec['dtype']} is MI300's; NVIDIA GPUs take float8_e4m3fn and float8_e5m2")
    if spec["dtype"] == spec["b_dtype"] == "float8_e5m2":
        raise DeviceRefused("b_dtype: cuBLASLt has no e5m2 × e5m2 GEMM; take e4m3 for A or B")


def _scaled_tensors(torch, spec: dict, operands: dict[str, np.ndarray], device) -> dict:
    """``scaled_mm``'s operands on ``device`` as ``torch._scaled_mm`` takes them: A row-major,
    B column-major (B's transpose contiguous, seen through ``.t()``: Hopper's cuBLASLt takes
    no other layout), fp32 scales, the bias in the output dtype."""
    A = torch.from_numpy(np.ascontiguousarray(operands["A"])).view(getattr(torch, spec["dtype"]))
    Bt = torch.from_numpy(np.ascontiguousarray(operands["B"].T)).view(getattr(torch, spec["b_dtype"]))
    out = {"A": A.to(device), "B": Bt.to(device).t()}
    for name in ("scale_a", "scale_b"):
        out[name] = torch.from_numpy(np.array(operands[name], np.float32)).to(device)
    if "bias" in operands:
        bias = operands["bias"]
        t = torch.from_numpy(bias.view(np.int16).copy()).view(torch.bfloat16) if bias.dtype == np.uint16 else None
        out["bias"] = (torch.from_numpy(bias.copy()) if t is None else t).to(device)
    return out


def run_op(torch, op: str, tensors: dict, params: dict):
    """The GPU op of a capture on torch tensors; returns the output tensor."""
    if op == "scaled_mm":
        res = torch._scaled_mm(
            tensors["A"],
            tensors["B"],
            scale_a=tensors["scale_a"],
            scale_b=tensors["scale_b"],
            bias=tensors.get("bias"),
            out_dtype=getattr(torch, params["out_dtype"]),
            use_fast_accum=bool(params["use_fast_accum"]),
        )
        return res[0] if isinstance(res, tuple) else res  # PyTorch < 2.4 also returned amax
    F = torch.nn.functional
    if op == "mm":
        if params.get("out_dtype"):
            return torch.mm(tensors["A"], tensors["B"], out_dtype=getattr(torch, params["out_dtype"]))
        return torch.mm(tensors["A"], tensors["B"])
    if op == "addmm":
        return torch.addmm(
            tensors["C"], tensors["A"], tensors["B"], beta=params.get("beta", 1.0), alpha=params.get("alpha", 1.0)
        )
    if op == "bmm":
        return torch.bmm(tensors["A"], tensors["B"])
    if op == "linear":
        return F.linear(tensors["input"], tensors["weight"], tensors.get("bias"))
    conv = dict(
        stride=params["stride"], padding=params["padding"], dilation=params["dilation"], groups=params["groups"]
    )
    if op == "conv2d":
        return F.conv2d(tensors["input"], tensors["weight"], tensors.get("bias"), **conv)
    go = tensors["grad_output"]
    if op == "conv2d_bwd_data":
        shaped = torch.empty(params["input_shape"], dtype=go.dtype, device=go.device)
        weight, mask = tensors["weight"], [True, False, False]
    else:
        shaped = tensors["input"]
        weight = torch.empty(params["weight_shape"], dtype=go.dtype, device=go.device)
        mask = [False, True, False]
    if params.get("memory_format") == "channels_last":
        shaped, weight = (
            shaped.contiguous(memory_format=torch.channels_last),
            weight.contiguous(memory_format=torch.channels_last),
        )
    grads = torch.ops.aten.convolution_backward(
        go, shaped, weight, None, conv["stride"], conv["padding"], conv["dilation"], False, [0, 0], conv["groups"], mask
    )
    return grads[0] if op == "conv2d_bwd_data" else grads[1]


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def _kernel_names(prof) -> list[str]:
    names = []
    for event in prof.events():
        device = str(getattr(event, "device_type", ""))
        if device.endswith("CUDA") and event.name not in names:
            names.append(event.name)
    return names


def capture_case(
    torch, spec: dict, operands: dict[str, np.ndarray] | None = None, device="cuda", omit_operands: bool = False
) -> dict:
    """Run one plan entry on ``device`` (twice, under the profiler the second time) and return
    the capture's fields (numpy arrays and plain values), ready for :func:`numpy.savez`. With
    ``omit_operands`` the generated operands are left out and their sha256 kept instead
    (``<name>_sha256``): :func:`complete` draws them again from the seed on any machine."""
    spec = _check_spec(spec)
    generated = operands is None
    operands = generate_operands(spec) if generated else operands
    scaled = spec["op"] == "scaled_mm"
    if scaled:
        check_device(torch, spec, device)
        tensors = _scaled_tensors(torch, spec, operands, device)
    else:
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = bool(
            spec.get("allow_fp16_reduced_precision_reduction", True)
        )
        torch.backends.cuda.matmul.allow_tf32 = bool(spec.get("allow_tf32", False))
        torch.backends.cudnn.allow_tf32 = bool(spec.get("allow_tf32", False))
        torch.backends.cudnn.deterministic = bool(spec.get("cudnn_deterministic", True))
        torch.backends.cudnn.benchmark = False
        tensors = {k: _to_torch(torch, v, spec["dtype"], device) for k, v in operands.items()}
    if spec["memory_format"] == "channels_last":
        tensors = {
            k: v.contiguous(memory_format=torch.channels_last) if v.dim() == 4 else v for k, v in tensors.items()
        }
    to_numpy = _patterns if scaled else _to_numpy
    first = to_numpy(run_op(torch, spec["op"], tensors, spec))
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        second = run_op(torch, spec["op"], tensors, spec)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    second = to_numpy(second)
    differs = int(np.count_nonzero(_bits(first) != _bits(second)))
    recorded = {
        "repeat_differs": differs,
        "kernels": np.asarray(_kernel_names(prof), dtype=str),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "cuda": str(torch.version.cuda),
    }
    if getattr(torch.version, "hip", None):
        recorded["hip"] = str(torch.version.hip)
    if scaled:
        fields = scaled_capture_fields(spec, operands, second, generated=generated, **recorded)
        return _omit(fields, operands) if omit_operands else fields
    fields = {"op": spec["op"], "out": second, "repeat_differs": differs, "dtype": spec["dtype"]}
    fields.update(operands)
    for key in ("stride", "padding", "dilation", "groups", "input_shape", "weight_shape"):
        if key in spec and spec["op"] in CONV_OPS:
            fields[key] = np.asarray(spec[key], np.int64)
    for key in ("alpha", "beta", "out_dtype", "seed", "range", "name"):
        if key in spec:
            fields[key] = spec[key]
    fields["memory_format"] = spec["memory_format"]
    fields["shapes"] = json.dumps(spec["shapes"])
    fields["allow_fp16_reduced_precision_reduction"] = torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
    fields["allow_tf32"] = torch.backends.cuda.matmul.allow_tf32
    fields["cudnn_deterministic"] = torch.backends.cudnn.deterministic
    fields.update(recorded)
    return _omit(fields, operands) if omit_operands else fields


def _omit(fields: dict, operands: dict[str, np.ndarray]) -> dict:
    """``fields`` with the generated operands replaced by their sha256 (``<name>_sha256``)."""
    for name in operands:
        fields.pop(name)
        fields[f"{name}_sha256"] = hashlib.sha256(np.ascontiguousarray(operands[name]).tobytes()).hexdigest()
    return fields


def scaled_capture_fields(spec: dict, operands: dict[str, np.ndarray], out: np.ndarray, *, generated=True, **recorded):
    """The fields of a ``scaled_mm`` capture (what :func:`save` writes and
    ``validation.captures`` reads), without torch: ``A`` (M, K) and ``B`` (K, N, logical order)
    as uint8 bit patterns with ``A_dtype``/``B_dtype`` (np.savez cannot write float8 arrays
    numpy reads back), ``scale_a``/``scale_b`` float32 (shape () per tensor, (M, 1) and (1, N)
    row-wise), an optional ``bias`` (N,) with ``bias_dtype``, ``out`` (M, N) with ``out_dtype``
    (bfloat16 as uint16 patterns, float16 and float32 as values), ``use_fast_accum``,
    ``scaling`` (``tensorwise`` or ``rowwise``) and, for generated operands, the plan entry
    (``spec``, JSON) with ``seed``, ``range`` and ``shapes`` that draw them again; ``recorded``
    (``gpu``, ``kernels``, ``torch``, ``cuda``, ``repeat_differs``, …) is added as given."""
    spec = _check_spec(spec)
    A, B = operands["A"], operands["B"]
    M, N = A.shape[0], B.shape[1]
    out = np.asarray(out)
    want = {"bfloat16": np.uint16, "float16": np.float16, "float32": np.float32}[spec["out_dtype"]]
    if out.shape != (M, N) or out.dtype.itemsize != np.dtype(want).itemsize:
        _fail(f"out: expected ({M}, {N}) {spec['out_dtype']} values, got {out.shape} {out.dtype}")
    if A.dtype != np.uint8 or B.dtype != np.uint8 or A.ndim != 2 or B.shape[0] != A.shape[1]:
        _fail(f"A: expected uint8 patterns A (M, K) and B (K, N), got {A.dtype} {A.shape} and {B.dtype} {B.shape}")
    fields = {
        "op": "scaled_mm",
        "A": A,
        "B": B,
        "A_dtype": spec["dtype"],
        "B_dtype": spec["b_dtype"],
        "dtype": spec["dtype"],
        "scale_a": np.asarray(operands["scale_a"], np.float32),
        "scale_b": np.asarray(operands["scale_b"], np.float32),
        "out": out.view(want),
        "out_dtype": spec["out_dtype"],
        "use_fast_accum": bool(spec["use_fast_accum"]),
        "scaling": "rowwise" if np.size(operands["scale_a"]) > 1 or np.size(operands["scale_b"]) > 1 else "tensorwise",
    }
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
    """Write a capture atomically (a temporary file beside ``path``, then a rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **{k: np.asarray(v) for k, v in fields.items()})
    tmp.replace(path)
    return path


def capture(path, op: str, *, device=None, **tensors_and_params) -> Path:
    """Capture ``op`` on the user's own torch tensors: ``capture("x.npz", "mm", A=a, B=b)``;
    ``conv2d`` takes ``input``, ``weight``, ``bias`` and ``stride``/``padding``/``dilation``/
    ``groups``; the backward ops ``grad_output`` with ``weight`` and ``input_shape`` (data) or
    ``input`` and ``weight_shape`` (weight). Runs on the tensors' device; writes ``path``."""
    import torch

    if op == "scaled_mm":
        return _capture_scaled(torch, path, device, **tensors_and_params)
    names = set(OPERANDS.get(op, ((), ()))[0]) | set(OPERANDS.get(op, ((), ()))[1])
    tensors = {k: v for k, v in tensors_and_params.items() if k in names}
    params = {k: v for k, v in tensors_and_params.items() if k not in names}
    first = next(iter(tensors.values()), None)
    if first is None:
        _fail(f"op: {op!r} needs operands {OPERANDS.get(op)}")
    spec = {"op": op, "dtype": str(first.dtype).removeprefix("torch."), **params}
    spec["shapes"] = {k: list(v.shape) for k, v in tensors.items()}
    if first.dim() == 4 and first.is_contiguous(memory_format=torch.channels_last) and not first.is_contiguous():
        spec.setdefault("memory_format", "channels_last")
    operands = {k: _to_numpy(v) for k, v in tensors.items()}
    fields = capture_case(torch, spec, operands, device=device or first.device)
    for key in ("seed", "range"):
        fields.pop(key, None)
    return save(path, fields)


def _capture_scaled(
    torch, path, device, *, A, B, scale_a, scale_b, bias=None, out_dtype=None, use_fast_accum=False
) -> Path:
    """``capture(path, "scaled_mm", A=a, B=b, scale_a=sa, scale_b=sb, bias=None,
    out_dtype=torch.bfloat16, use_fast_accum=False)``: ``torch._scaled_mm``'s arguments; the
    scales' shapes say per tensor or row-wise, as they do to torch."""

    def name(dtype):
        return str(dtype).removeprefix("torch.")

    M, N = A.shape[0], B.shape[-1]
    for label, s, rows in (("scale_a", scale_a, (M, 1)), ("scale_b", scale_b, (1, N))):
        if s.dtype != torch.float32 or (s.numel() != 1 and tuple(s.shape) != rows):
            _fail(f"{label}: expected float32 with one element or of shape {rows}, got {s.dtype} {tuple(s.shape)}")
    spec = {
        "op": "scaled_mm",
        "dtype": name(A.dtype),
        "b_dtype": name(B.dtype),
        "shapes": {"A": list(A.shape), "B": list(B.shape)},
        "out_dtype": name(out_dtype or A.dtype),
        "use_fast_accum": bool(use_fast_accum),
        "bias": bias is not None,
    }
    operands = {"A": _patterns(A), "B": _patterns(B), "scale_a": _patterns(scale_a), "scale_b": _patterns(scale_b)}
    if scale_a.numel() == 1 and scale_b.numel() == 1:
        operands.update(scale_a=operands["scale_a"].reshape(()), scale_b=operands["scale_b"].reshape(()))
    if bias is not None:
        if bias.dtype != getattr(torch, spec["out_dtype"], None):
            _fail(f"bias: expected {spec['out_dtype']} like the output (torch._scaled_mm's rule), got {bias.dtype}")
        operands["bias"] = _patterns(bias)
    fields = capture_case(torch, spec, operands, device=device or A.device)
    return save(path, fields)


def complete(fields: dict) -> dict:
    """A capture written with ``omit_operands``, with its operands drawn again from its seed and
    checked against the sha256 the GPU machine recorded; ValueError when one differs."""
    fields = dict(fields)
    if "spec" in fields:  # the whole plan entry (scaled_mm)
        spec = json.loads(str(fields["spec"]))
    else:
        spec = {k: fields[k] for k in ("op", "dtype", "seed", "range", "memory_format") if k in fields}
        spec = {k: (v.item() if isinstance(v, np.ndarray) and v.ndim == 0 else v) for k, v in spec.items()}
        spec["range"] = [float(x) for x in np.asarray(fields["range"])]
        spec["shapes"] = json.loads(str(fields["shapes"]))
        for key in ("input_shape", "weight_shape"):
            if key in fields:
                spec[key] = [int(x) for x in np.asarray(fields[key])]
    for name, array in generate_operands(spec).items():
        digest = hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()
        want = str(fields.pop(f"{name}_sha256"))
        if digest != want:
            _fail(f"{name}: the operand drawn from seed {spec['seed']} is not the GPU machine's (sha256 differs)")
        fields[name] = array
    return fields


# --- the command line -------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m validation.capture_torch", description=__doc__.split("\n\n")[0])
    p.add_argument("op", nargs="?", choices=OPS, help="the op to capture (or --plan)")
    for name in ("A", "B", "C", "input", "weight", "grad_output"):
        p.add_argument(f"--{name}", type=int, nargs="+", metavar="DIM", help=f"shape of {name}")
    p.add_argument(
        "--bias",
        type=int,
        nargs="*",
        metavar="DIM",
        help="shape of the bias; alone: one value per output column/channel",
    )
    p.add_argument("--input-shape", type=int, nargs=4, help="conv2d_bwd_data: shape of the input")
    p.add_argument("--weight-shape", type=int, nargs=4, help="conv2d_bwd_weight: shape of the weight")
    for name, default in (("stride", 1), ("padding", 0), ("dilation", 1)):
        p.add_argument(f"--{name}", type=int, nargs=2, default=[default, default])
    p.add_argument("--groups", type=int, default=1)
    names = DTYPES + tuple(DTYPE_ALIASES)
    p.add_argument("--dtype", choices=names, help="operands' dtype (A's for scaled_mm); float16, or e4m3 for scaled_mm")
    p.add_argument("--b-dtype", choices=names, help="scaled_mm: B's fp8 dtype (default: --dtype)")
    outs = ("float16", "bfloat16", "float32", "fp16", "bf16", "fp32")
    p.add_argument("--out-dtype", choices=outs, help="mm: torch.mm's out_dtype; scaled_mm: its out_dtype (bf16)")
    p.add_argument("--scale-a", type=float, help="scaled_mm: A's per-tensor fp32 scale (default 1)")
    p.add_argument("--scale-b", type=float, help="scaled_mm: B's per-tensor fp32 scale (default 1)")
    p.add_argument("--rowwise", action="store_true", help="scaled_mm: row-wise scales, drawn in --scale-range")
    p.add_argument("--scale-range", type=float, nargs=2, metavar=("LO", "HI"), help="--rowwise: default 0.5 2")
    p.add_argument("--fast-accum", action="store_true", help="scaled_mm: use_fast_accum=True")
    p.add_argument("--alpha", type=float, default=1.0)
    p.add_argument("--beta", type=float, default=1.0)
    p.add_argument("--memory-format", default="contiguous", choices=("contiguous", "channels_last"))
    p.add_argument("--range", type=float, nargs=2, default=[-1.0, 1.0], metavar=("LO", "HI"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-reduced-precision", action="store_true", help="allow_fp16_reduced_precision_reduction off")
    p.add_argument("--tf32", action="store_true", help="allow TF32 for float32 matmuls and convolutions")
    p.add_argument("--out", help="the capture file (.npz)")
    p.add_argument("--plan", help="a JSON list of cases (the flags' names as keys, shapes under 'shapes')")
    p.add_argument("--out-dir", default=".", help="with --plan: where each case's <name>.npz goes")
    p.add_argument("--omit-operands", action="store_true", help="store generated operands' sha256, not the arrays")
    return p


def _spec_from_args(args) -> dict:
    shapes = {
        n: getattr(args, n) for n in ("A", "B", "C", "input", "weight", "bias", "grad_output") if getattr(args, n)
    }
    if args.bias == [] and args.op in ("linear", "conv2d") and args.weight:
        shapes["bias"] = [args.weight[0]]  # one per output feature / channel
    spec = {"op": args.op, "shapes": shapes, "range": args.range, "seed": args.seed}
    if args.dtype:
        spec["dtype"] = args.dtype
    if args.op == "scaled_mm":
        spec.update(rowwise=args.rowwise, use_fast_accum=args.fast_accum, bias=args.bias is not None)
        for key in ("b_dtype", "scale_a", "scale_b", "scale_range"):
            if getattr(args, key) is not None:
                spec[key] = getattr(args, key)
        if args.out_dtype:
            spec["out_dtype"] = args.out_dtype
        return spec
    spec["memory_format"] = args.memory_format
    spec["allow_fp16_reduced_precision_reduction"] = not args.no_reduced_precision
    spec["allow_tf32"] = args.tf32
    if args.op in CONV_OPS:
        spec.update(stride=args.stride, padding=args.padding, dilation=args.dilation, groups=args.groups)
    if args.input_shape:
        spec["input_shape"] = args.input_shape
    if args.weight_shape:
        spec["weight_shape"] = args.weight_shape
    if args.op == "addmm":
        spec.update(alpha=args.alpha, beta=args.beta)
    if args.out_dtype:
        spec["out_dtype"] = DTYPE_ALIASES.get(args.out_dtype, args.out_dtype)
    return spec


def read_plan(path) -> list[dict]:
    """The checked entries of a JSON plan (a list of objects with the flags' names as keys);
    ValueError naming the entry and its field otherwise."""
    plan = json.loads(Path(path).read_text())
    if not isinstance(plan, list) or not all(isinstance(s, dict) for s in plan):
        _fail(f"--plan: {path} must hold a JSON list of objects (one per case)")
    specs = []
    for i, entry in enumerate(plan):
        try:
            specs.append(_check_spec(entry))
        except ValueError as exc:
            _fail(f"--plan: entry {i} ({entry.get('name', 'unnamed')}): {exc}")
    return specs


def check_plan_entry(entry: dict) -> dict:
    """A plan entry (a dict with the flags' names as keys) checked, with every default filled
    in (for ``scaled_mm``: torch._scaled_mm's contract, see :func:`check_device` for what
    depends on the GPU); ValueError naming the field otherwise."""
    return _check_spec(entry)


def plan_entry_from_argv(argv) -> dict:
    """The checked plan entry a command line (``["scaled_mm", "--A", "64", "4096", …]``)
    describes, with every default filled in; ValueError naming the field otherwise."""
    args = _parser().parse_args(argv)
    if not args.op:
        _fail("op: name an op (one of " + ", ".join(OPS) + ")")
    return _check_spec(_spec_from_args(args))


def _describe(spec: dict) -> str:
    """What a case computes from, for the progress line."""
    if spec["op"] != "scaled_mm":
        return f"{spec['op']} {spec['dtype']}"
    A, B = spec["shapes"]["A"], spec["shapes"]["B"]
    scales = "row-wise scales" if spec["rowwise"] else f"scales {spec['scale_a']:g}, {spec['scale_b']:g}"
    bias = ", bias" if "bias" in spec["shapes"] else ""
    fast = ", fast accum" if spec["use_fast_accum"] else ""
    return (
        f"scaled_mm {A[0]}x{A[1]}x{B[1]} {spec['dtype']} x {spec['b_dtype']} -> {spec['out_dtype']}, {scales}{bias}"
        f"{fast}, seed {spec['seed']}, range {spec['range']}"
    )


def main(argv=None) -> int:
    """The command line (see the module docstring): 0 when every case was captured, 1 when a
    case failed on the GPU (the others are still written), 2 for a bad argument or plan entry,
    a missing GPU, or (single op) an op this GPU cannot run. In a plan, entries this GPU cannot
    run (fp8 dtypes of another vendor, say) are skipped with a line saying why."""
    args = _parser().parse_args(argv)
    try:
        if args.plan:
            specs = read_plan(args.plan)
        elif args.op:
            if not args.out:
                _fail("--out: name the capture file to write")
            specs = [_check_spec(_spec_from_args(args))]
        else:
            _fail("op: name an op (one of " + ", ".join(OPS) + ") or give --plan")
    except (ValueError, OSError, json.JSONDecodeError) as exc:
        print(f"capture_torch: {exc}", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("capture_torch: PyTorch is not installed here (the kit runs where the GPU is)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("capture_torch: no GPU visible to torch (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    runnable = []
    for spec in specs:
        try:
            check_device(torch, spec, "cuda")
            runnable.append(spec)
        except DeviceRefused as exc:
            if not args.plan:
                print(f"capture_torch: {exc}", file=sys.stderr)
                return 2
            print(f"capture_torch: skipped {spec.get('name', '(unnamed)')}: {exc}", file=sys.stderr)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    failed = 0
    for i, spec in enumerate(runnable):
        path = Path(args.out) if args.out and not args.plan else out_dir / f"{spec.get('name', f'case{i}')}.npz"
        try:
            fields = capture_case(torch, spec, omit_operands=args.omit_operands)
        except (RuntimeError, ValueError) as exc:  # torch refused (TORCH_CHECK_VALUE is a ValueError) or failed
            failed += 1
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            print(f"[{i + 1}/{len(runnable)}] {path}: FAILED ({_describe(spec)}): {first_line}", file=sys.stderr)
            continue
        save(path, fields)
        kernels = "; ".join(k[:60] for k in fields["kernels"])
        print(
            f"[{i + 1}/{len(runnable)}] {path}: {_describe(spec)}; out {fields['out'].shape} {fields['out'].dtype}, "
            f"repeat differs {fields['repeat_differs']}, kernels: {kernels}",
            flush=True,
        )
    print(
        f"{len(runnable) - failed} captured on {torch.cuda.get_device_name()} (PyTorch {torch.__version__}), "
        f"{len(specs) - len(runnable)} skipped, {failed} failed",
        flush=True,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
