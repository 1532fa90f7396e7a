"""The capture kit: run a PyTorch op on the GPU and save what it computed as an fp16emu capture.

Runs on any machine with PyTorch and a GPU (NVIDIA or AMD); it needs only numpy and torch, so it
also runs as a plain file where fp16emu is not installed: copy this file and ``format.py`` (the
capture format, :mod:`validation.captures.format`) into one folder and run ``python kit.py …``.
``fp16emu identify CAPTURE.npz`` then searches for the accumulation schedule that reproduces the
output bit for bit.

Three ways in:

* generated inputs, one op from the command line::

      python -m validation.captures.kit mm --A 256 4096 --B 4096 256 --out mm.npz
      python -m validation.captures.kit conv2d --input 2 64 14 14 --weight 64 64 3 3 \\
          --padding 1 1 --memory-format channels_last --out conv.npz
      python -m validation.captures.kit scaled_mm --A 64 4096 --B 4096 64 --dtype e4m3 \\
          --b-dtype e5m2 --rowwise --bias --fast-accum --out fp8.npz
      python -m validation.captures.kit scaled_mm --A 128 1024 --B 1024 128 --dtype e2m1 \\
          --block-scale nvfp4 --out nvfp4.npz

* many cases from a JSON plan (a list of objects with the same fields as the flags), one file
  each: ``python -m validation.captures.kit --plan plan.json --out-dir captures/``; checked
  without torch or a GPU first with ``--check`` (and ``--gpu H100``: :mod:`validation.captures.plan`);
  ``--batch-sweep 1,8,64`` captures each case at those batch sizes, the smaller files holding the
  leading rows of the largest's operands (:func:`sweep`, :func:`sweep_fields`);
* the user's own tensors, from Python::

      from validation.captures.kit import capture
      capture("fail.npz", "linear", input=x, weight=w, bias=b)
      capture("fp8.npz", "scaled_mm", A=a, B=b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

The capture format (an ``.npz``; see ``docs/library.md`` and :mod:`validation.captures.format`): ``op`` (one of :data:`OPS`), the
operands under torch's names (``A``, ``B``, ``C`` of mm, addmm, bmm, baddbmm and matmul; ``input``, ``weight``, ``bias``;
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
GPU accept is checked first (:func:`check_plan_entry`, :func:`check_device`). Block-scaled
``scaled_mm`` (``--block-scale mx`` or ``nvfp4``: MX fp8 / fp4 with E8M0 scales per 32, NVFP4
fp4 with e4m3 scales per 16) draws its scales per block and hands them to torch in the swizzled
layout cuBLASLt reads (:func:`blocked_scales`, torch's ``to_blocked``); fp4 operands go packed
two a byte (``float4_e2m1fn_x2``); the capture keeps the logical arrays (:func:`logical_scales`
undoes the swizzle of a user's own scales).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

try:  # inside the fp16emu package
    from .format import (
        CONV_OPS,
        DTYPE_ALIASES,
        DTYPES,
        FP4_DTYPE,
        FP8_DTYPES,
        OPERANDS,
        OPS,
        batch_axes,
        blocked_scales,
        check_plan_entry,
        complete,
        generate_operands,
        logical_scales,
        operand_digest,
        round_to_patterns,
        save,
        scaled_capture_fields,
        take_batch,
        with_batch,
    )
    from .plan import check_contract, check_gpu, gpu_arch, read_plan
except ImportError:  # a plain file, with format.py and plan.py copied beside it (found even under python -I)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from format import (  # type: ignore[no-redef]
        CONV_OPS,
        DTYPE_ALIASES,
        DTYPES,
        FP4_DTYPE,
        FP8_DTYPES,
        OPERANDS,
        OPS,
        batch_axes,
        blocked_scales,
        check_plan_entry,
        complete,
        generate_operands,
        logical_scales,
        operand_digest,
        round_to_patterns,
        save,
        scaled_capture_fields,
        take_batch,
        with_batch,
    )
    from plan import check_contract, check_gpu, gpu_arch, read_plan  # type: ignore[no-redef]

__all__ = [
    "OPS",
    "OPERANDS",
    "FP8_DTYPES",
    "DeviceRefused",
    "capture",
    "capture_case",
    "check_contract",
    "check_device",
    "check_gpu",
    "check_plan_entry",
    "complete",
    "generate_operands",
    "main",
    "plan_entry_from_argv",
    "read_plan",
    "round_to_patterns",
    "run_op",
    "save",
    "sweep",
    "sweep_fields",
    "scaled_capture_fields",
]


def _fail(message: str):
    raise ValueError(message)


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
    """Refuse (:class:`DeviceRefused`, naming the field) an entry this device cannot run, before
    any tensor reaches it: :func:`check_gpu`'s rules (bfloat16 and TF32 need NVIDIA compute
    capability 8.0+, fp8 8.9+ or AMD MI300 and newer with their own fp8 types) on the device's
    own compute capability or architecture; the CPU runs PyTorch's reference (for tests only, not a
    GPU kernel), unchecked."""
    if spec["op"] == "scaled_mm" and (not hasattr(torch, "_scaled_mm") or not hasattr(torch, spec["dtype"])):
        raise DeviceRefused(f"torch: PyTorch {torch.__version__} has no torch._scaled_mm with {spec['dtype']}")
    if spec.get("block_scale") is not None and not hasattr(torch, "float8_e8m0fnu"):
        raise DeviceRefused(f"torch: PyTorch {torch.__version__} has no block-scaled torch._scaled_mm (float8_e8m0fnu)")
    dev = torch.device(device)
    if dev.type == "cpu":
        return
    if dev.type != "cuda":
        raise DeviceRefused(f"device: the kit runs on CUDA and ROCm GPUs, not {dev.type}")
    props = torch.cuda.get_device_properties(dev)
    if getattr(torch.version, "hip", None):
        arch = ("amd", str(getattr(props, "gcnArchName", "")).split(":")[0])
    else:
        arch = ("nvidia", (props.major, props.minor))
    try:
        check_gpu(spec, arch, field="device", name=props.name)
    except ValueError as exc:
        raise DeviceRefused(str(exc)) from None


def _packed(torch, rows: np.ndarray, dtype: str):
    """(rows, K) patterns as a torch tensor of ``dtype``: fp4 two a byte along K (even k low)."""
    if dtype == FP4_DTYPE:
        rows = (rows[:, 1::2] << 4) | rows[:, 0::2]
    return torch.from_numpy(np.ascontiguousarray(rows, np.uint8)).view(getattr(torch, dtype))


def _block_scaled_tensors(torch, spec: dict, operands: dict[str, np.ndarray], device) -> dict:
    """A block-scaled ``scaled_mm``'s operands as torch takes them: A (M, K) row-major, B through
    ``.t()`` of its (N, K) rows, fp4 packed; each operand's logical (rows, K // block) scales
    swizzled (:func:`blocked_scales`), as float8_e8m0fnu (UE8M0) or float8_e4m3fn (UE4M3)."""
    sdt = getattr(torch, "float8_e8m0fnu" if spec["scale_format"] == "ue8m0" else "float8_e4m3fn")
    out = {"A": _packed(torch, operands["A"], spec["dtype"]).to(device)}
    out["B"] = _packed(torch, operands["B"].T, spec["b_dtype"]).to(device).t()
    for name in ("scale_a", "scale_b"):
        out[name] = torch.from_numpy(blocked_scales(operands[name])).view(sdt).to(device)
    return out


def _scaled_tensors(torch, spec: dict, operands: dict[str, np.ndarray], device) -> dict:
    """``scaled_mm``'s operands on ``device`` as ``torch._scaled_mm`` takes them: A row-major,
    B column-major (B's transpose contiguous, seen through ``.t()``: Hopper's cuBLASLt takes
    no other layout), fp32 scales, the bias in the output dtype."""
    if spec.get("block_scale") is not None:
        return _block_scaled_tensors(torch, spec, operands, device)
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
    if op == "baddbmm":
        return torch.baddbmm(
            tensors["C"], tensors["A"], tensors["B"], beta=params.get("beta", 1.0), alpha=params.get("alpha", 1.0)
        )
    if op == "matmul":
        return torch.matmul(tensors["A"], tensors["B"])
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
    spec = check_contract(spec)
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
        torch.backends.cudnn.benchmark = bool(spec.get("cudnn_benchmark", False))
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
    if torch.backends.cudnn.benchmark:
        fields["cudnn_benchmark"] = True
    fields.update(recorded)
    return _omit(fields, operands) if omit_operands else fields


def _omit(fields: dict, operands: dict[str, np.ndarray]) -> dict:
    """``fields`` with the generated operands replaced by their sha256 (``<name>_sha256``)."""
    for name in operands:
        fields.pop(name)
        fields[f"{name}_sha256"] = operand_digest(operands[name])
    return fields


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

    if name(scale_a.dtype) in ("float8_e8m0fnu", "float8_e4m3fn"):
        spec, operands = _user_block_scaled(torch, A, B, scale_a, scale_b, out_dtype, use_fast_accum, bias)
        return save(path, capture_case(torch, spec, operands, device=device or A.device))
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


def _unpacked(torch, t, dtype: str) -> np.ndarray:
    """A (rows, K) torch operand's patterns, one a byte (fp4 unpacked, even k from the low nibble)."""
    x = t.detach().contiguous().cpu().view(torch.uint8).numpy()
    if dtype != FP4_DTYPE:
        return x
    out = np.empty((x.shape[0], 2 * x.shape[1]), np.uint8)
    out[:, 0::2], out[:, 1::2] = x & 0xF, x >> 4
    return out


def _user_block_scaled(torch, A, B, scale_a, scale_b, out_dtype, use_fast_accum, bias):
    """The plan entry and logical operands of a user's block-scaled ``torch._scaled_mm`` call:
    A (M, K) (fp4: (M, K / 2) packed), B as torch takes it (the ``.t()`` of (N, K) rows), the
    scales swizzled as handed to cuBLASLt (:func:`logical_scales` undoes it)."""
    dt = (_name_of(A.dtype), _name_of(B.dtype))
    block_scale = "mx" if _name_of(scale_a.dtype) == "float8_e8m0fnu" else "nvfp4"
    if bias is not None or use_fast_accum:
        _fail("bias: block-scaled torch._scaled_mm takes no bias and no use_fast_accum")
    a = _unpacked(torch, A, dt[0])
    bt = _unpacked(torch, B.t(), dt[1])
    (M, K), N = a.shape, bt.shape[0]
    block = 32 if block_scale == "mx" else 16
    spec = {"op": "scaled_mm", "dtype": dt[0], "b_dtype": dt[1], "block_scale": block_scale}
    spec.update(shapes={"A": [M, K], "B": [K, N]}, out_dtype=_name_of(out_dtype or torch.bfloat16))
    operands = {"A": a, "B": np.ascontiguousarray(bt.T)}
    for label, s, rows in (("scale_a", scale_a, M), ("scale_b", scale_b, N)):
        flat = s.detach().contiguous().cpu().view(torch.uint8).numpy()
        operands[label] = logical_scales(flat, rows, K // block)
    return spec, operands


def _name_of(dtype) -> str:
    return str(dtype).removeprefix("torch.")


# --- the command line -------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m validation.captures.kit", description=__doc__.split("\n\n")[0])
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
    p.add_argument("--block-scale", choices=("mx", "nvfp4"), help="scaled_mm: MX (e8m0 per 32) or NVFP4 block scales")
    p.add_argument("--scale-exponents", type=int, nargs=2, metavar=("LO", "HI"), help="--block-scale mx: default -4 4")
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
    p.add_argument(
        "--check",
        action="store_true",
        help="check the case or plan without torch or a GPU (shapes, dtypes, torch's contracts; with --gpu what it "
        "accepts) and exit",
    )
    p.add_argument("--gpu", help="with --check: the GPU the plan is for (H100, A100, sm_89, MI300X, gfx942 …)")
    p.add_argument(
        "--batch-sweep",
        metavar="N1,N2,...",
        help="the same op at these batch sizes (M of mm/addmm/linear/scaled_mm, the batch of bmm/baddbmm, N of "
        "convolutions), one file each (NAME_bN.npz), the smaller holding the leading rows of the largest",
    )
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
        for key in ("b_dtype", "scale_a", "scale_b", "scale_range", "block_scale", "scale_exponents"):
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
    if args.op in ("addmm", "baddbmm"):
        spec.update(alpha=args.alpha, beta=args.beta)
    if args.out_dtype:
        spec["out_dtype"] = DTYPE_ALIASES.get(args.out_dtype, args.out_dtype)
    return spec


def plan_entry_from_argv(argv) -> dict:
    """The checked plan entry a command line (``["scaled_mm", "--A", "64", "4096", …]``)
    describes, with every default filled in; ValueError naming the field otherwise."""
    args = _parser().parse_args(argv)
    if not args.op:
        _fail("op: name an op (one of " + ", ".join(OPS) + ")")
    return check_contract(_spec_from_args(args))


def _describe(spec: dict) -> str:
    """What a case computes from, for the progress line."""
    shapes = " ".join(f"{k} {tuple(v)}" for k, v in spec["shapes"].items())
    if spec["op"] != "scaled_mm":
        extra = [f"{k} {spec[k]:g}" for k in ("alpha", "beta") if k in spec and spec[k] != 1]
        extra += ["TF32 allowed"] if spec.get("allow_tf32") else []
        extra += [f"out {spec['out_dtype']}"] if spec.get("out_dtype") else []
        if spec["op"] in CONV_OPS:
            extra += [f"{k} {tuple(spec[k])}" for k in ("stride", "padding", "dilation") if k in spec]
            extra += [f"groups {spec['groups']}", spec["memory_format"]]
        return f"{spec['op']} {spec['dtype']} {shapes}" + "".join(f", {e}" for e in extra)
    if spec.get("block_scale") is not None:
        scales = f"{spec['block_scale']} block scales ({spec['scale_format']} per {spec['block']})"
    else:
        scales = "row-wise scales" if spec["rowwise"] else f"scales {spec['scale_a']:g}, {spec['scale_b']:g}"
    bias = ", bias" if "bias" in spec["shapes"] else ""
    fast = ", fast accum" if spec["use_fast_accum"] else ""
    A, B = spec["shapes"]["A"], spec["shapes"]["B"]
    return (
        f"scaled_mm {A[0]}x{A[1]}x{B[1]} {spec['dtype']} x {spec['b_dtype']} -> {spec['out_dtype']}, {scales}{bias}"
        f"{fast}, seed {spec['seed']}, range {spec['range']}"
    )


def _sizes(text: str) -> list[int]:
    """``--batch-sweep 1,8,64``: distinct whole numbers ≥ 1, ascending."""
    try:
        sizes = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        sizes = []
    if not sizes or sizes[0] < 1:
        _fail(f"--batch-sweep: expected batch sizes ≥ 1 separated by commas (1,8,64), got {text!r}")
    return sizes


def sweep(spec: dict, sizes) -> list[tuple[int, dict]]:
    """A batch sweep of a checked entry: (size, entry) for each of ``sizes``, the entry's swept
    axis (:func:`validation.captures.format.batch_axes`) of that size, each checked by
    :func:`check_contract`; the last is the largest, from which every size's operands are cut."""
    batch_axes(spec)
    return [(n, check_contract(with_batch(spec, n))) for n in sorted(sizes)]


def sweep_fields(torch, cases, names, device="cuda", omit_operands: bool = False) -> list[dict]:
    """The captures of a batch sweep: the largest case's operands drawn once, every size's the
    leading entries of them (:func:`take_batch`), each file told how it relates to the others
    (``batch``, ``batch_sweep``, ``batch_axes``, ``batch_of``; ``spec``: the largest entry, which
    draws the operands again)."""
    big = cases[-1][1]
    drawn = generate_operands(big)
    out = []
    for n, spec in cases:
        operands = take_batch(big, drawn, n)
        fields = capture_case(torch, spec, operands, device=device)
        fields.update(
            batch=n,
            batch_sweep=np.asarray([c[0] for c in cases], np.int64),
            batch_axes=json.dumps(batch_axes(big)),
            batch_of=names[-1],
            spec=json.dumps(big),
            seed=big["seed"],
            range=big["range"],
        )
        out.append(_omit(fields, operands) if omit_operands else fields)
    return out


def _check_only(args, specs) -> int:
    """``--check``: the entries (and their batch sweeps) checked without torch; one line each."""
    for i, spec in enumerate(specs):
        label = spec.get("name", args.out or f"case{i}")
        print(f"ok {label}: {_describe(spec)}")
    where = f"what {args.gpu} accepts" if args.gpu else "torch's contracts (--gpu NAME also checks what a GPU accepts)"
    sweep_text = f", each at batch sizes {args.batch_sweep}" if args.batch_sweep else ""
    print(f"{len(specs)} case(s) checked{sweep_text}: shapes, dtypes, {where}; nothing run")
    return 0


def main(argv=None) -> int:
    """The command line (see the module docstring): 0 when every case was captured (or, with
    ``--check``, checked), 1 when a case failed on the GPU (the others are still written), 2 for a
    bad argument or plan entry, a missing GPU, or (single op) an op this GPU cannot run. In a
    plan, entries this GPU cannot run (fp8 dtypes of another vendor, say) are skipped with a line
    saying why. ``--check`` needs no torch and no GPU."""
    args = _parser().parse_args(argv)
    try:
        if args.gpu:
            gpu_arch(args.gpu)
        if args.plan:
            specs = read_plan(args.plan, gpu=args.gpu, check_gpus=args.check)
        elif args.op:
            if not args.out and not args.check:
                _fail("--out: name the capture file to write")
            specs = [check_contract(_spec_from_args(args))]
            if args.check and args.gpu:
                check_gpu(specs[0], args.gpu)
        else:
            _fail("op: name an op (one of " + ", ".join(OPS) + ") or give --plan")
        sizes = _sizes(args.batch_sweep) if args.batch_sweep else None
        cases = [sweep(spec, sizes) if sizes else [(None, spec)] for spec in specs]
        if sizes and args.check and args.gpu:
            for group in cases:
                for _, spec in group:
                    check_gpu(spec, args.gpu)
    except ValueError as exc:
        print(f"capture_torch: {exc}", file=sys.stderr)
        return 2
    if args.check:
        return _check_only(args, specs)
    try:
        import torch
    except ImportError:
        print(
            "capture_torch: PyTorch is not installed here (the kit runs where the GPU is; --check checks a plan "
            "without it)",
            file=sys.stderr,
        )
        return 2
    if not torch.cuda.is_available():
        print("capture_torch: no GPU visible to torch (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    return _capture_all(torch, args, cases)


def _file_name(args, spec, i: int, n) -> Path:
    if args.out and not args.plan:
        base = Path(args.out)
    else:
        base = Path(args.out_dir) / f"{spec.get('name', f'case{i}')}.npz"
    return base if n is None else base.with_name(f"{base.stem}_b{n}{base.suffix or '.npz'}")


def _capture_all(torch, args, cases) -> int:
    runnable = []
    for i, group in enumerate(cases):
        try:
            for _, spec in group:
                check_device(torch, spec, "cuda")
            runnable.append((i, group))
        except DeviceRefused as exc:
            if not args.plan:
                print(f"capture_torch: {exc}", file=sys.stderr)
                return 2
            print(f"capture_torch: skipped {group[0][1].get('name', '(unnamed)')}: {exc}", file=sys.stderr)
    if args.plan:
        Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    failed = done = 0
    total = sum(len(g) for _, g in runnable)
    for i, group in runnable:
        paths = [_file_name(args, spec, i, n) for n, spec in group]
        try:
            if group[0][0] is None:
                all_fields = [capture_case(torch, group[0][1], omit_operands=args.omit_operands)]
            else:
                all_fields = sweep_fields(torch, group, [p.name for p in paths], omit_operands=args.omit_operands)
        except (RuntimeError, ValueError) as exc:  # torch refused (TORCH_CHECK_VALUE is a ValueError) or failed
            failed += len(group)
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            print(f"{paths[-1]}: FAILED ({_describe(group[-1][1])}): {first_line}", file=sys.stderr)
            continue
        for path, (_, spec), fields in zip(paths, group, all_fields):
            save(path, fields)
            done += 1
            kernels = "; ".join(k[:60] for k in fields["kernels"])
            print(
                f"[{done}/{total}] {path}: {_describe(spec)}; out {fields['out'].shape} {fields['out'].dtype}, "
                f"repeat differs {fields['repeat_differs']}, kernels: {kernels}",
                flush=True,
            )
    print(
        f"{done} captured on {torch.cuda.get_device_name()} (PyTorch {torch.__version__}), "
        f"{len(cases) - len(runnable)} skipped, {failed} failed",
        flush=True,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
