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

* many cases from a JSON plan (a list of objects with the same fields as the flags), one file
  each: ``python -m validation.capture_torch --plan plan.json --out-dir captures/``;
* the user's own tensors, from Python::

      from validation.capture_torch import capture
      capture("fail.npz", "linear", input=x, weight=w, bias=b)

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
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

__all__ = ["OPS", "OPERANDS", "capture", "capture_case", "complete", "generate_operands", "main", "run_op", "save"]

#: the ops a capture may hold
OPS = ("mm", "addmm", "bmm", "linear", "conv2d", "conv2d_bwd_data", "conv2d_bwd_weight")

#: per op: the operand arrays it needs (required, optional)
OPERANDS = {
    "mm": (("A", "B"), ()),
    "addmm": (("A", "B", "C"), ()),
    "bmm": (("A", "B"), ()),
    "linear": (("input", "weight"), ("bias",)),
    "conv2d": (("input", "weight"), ("bias",)),
    "conv2d_bwd_data": (("grad_output", "weight"), ()),
    "conv2d_bwd_weight": (("grad_output", "input"), ()),
}

#: dtype names the kit accepts, as torch attribute names
DTYPES = ("float16", "bfloat16", "float32", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")

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
    dtype = spec.setdefault("dtype", "float16")
    if dtype not in DTYPES:
        _fail(f"dtype: {dtype!r} is not one of {', '.join(DTYPES)}")
    rng = spec.setdefault("range", [-1.0, 1.0])
    if len(rng) != 2 or not rng[0] < rng[1]:
        _fail(f"range: expected [lo, hi] with lo < hi, got {rng!r}")
    seed = spec.setdefault("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        _fail(f"seed: expected a whole number ≥ 0, got {seed!r}")
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
    stream, then rounded to ``dtype`` (RNE; float32 for float32 and the fp8 types, which the
    GPU side converts). The same spec gives the same arrays on any machine."""
    spec = _check_spec(spec)
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


def run_op(torch, op: str, tensors: dict, params: dict):
    """The GPU op of a capture on torch tensors; returns the output tensor."""
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
    operands = generate_operands(spec) if operands is None else operands
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
    first = _to_numpy(run_op(torch, spec["op"], tensors, spec))
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        second = run_op(torch, spec["op"], tensors, spec)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    second = _to_numpy(second)
    differs = int(np.count_nonzero(_bits(first) != _bits(second)))
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
    fields["kernels"] = np.asarray(_kernel_names(prof), dtype=str)
    fields["torch"] = torch.__version__
    fields["gpu"] = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    fields["cuda"] = str(torch.version.cuda)
    if omit_operands:
        for name in operands:
            fields.pop(name)
            fields[f"{name}_sha256"] = hashlib.sha256(np.ascontiguousarray(operands[name]).tobytes()).hexdigest()
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


def complete(fields: dict) -> dict:
    """A capture written with ``omit_operands``, with its operands drawn again from its seed and
    checked against the sha256 the GPU machine recorded; ValueError when one differs."""
    fields = dict(fields)
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
    for name in ("A", "B", "C", "input", "weight", "bias", "grad_output"):
        p.add_argument(f"--{name}", type=int, nargs="+", metavar="DIM", help=f"shape of {name}")
    p.add_argument("--input-shape", type=int, nargs=4, help="conv2d_bwd_data: shape of the input")
    p.add_argument("--weight-shape", type=int, nargs=4, help="conv2d_bwd_weight: shape of the weight")
    for name, default in (("stride", 1), ("padding", 0), ("dilation", 1)):
        p.add_argument(f"--{name}", type=int, nargs=2, default=[default, default])
    p.add_argument("--groups", type=int, default=1)
    p.add_argument("--dtype", default="float16", choices=DTYPES)
    p.add_argument("--out-dtype", choices=("float16", "bfloat16", "float32"), help="mm: torch.mm's out_dtype")
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
    spec = {"op": args.op, "dtype": args.dtype, "shapes": shapes, "range": args.range, "seed": args.seed}
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
        spec["out_dtype"] = args.out_dtype
    return spec


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.plan:
            plan = json.loads(Path(args.plan).read_text())
            specs = [_check_spec(s) for s in plan]
        elif args.op:
            if not args.out:
                _fail("--out: name the capture file to write")
            specs = [_check_spec(_spec_from_args(args))]
        else:
            _fail("op: name an op (one of " + ", ".join(OPS) + ") or give --plan")
    except (ValueError, OSError, json.JSONDecodeError) as exc:
        print(f"capture_torch: {exc}", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("capture_torch: no GPU visible to torch (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for i, spec in enumerate(specs):
        path = Path(args.out) if args.out and not args.plan else out_dir / f"{spec.get('name', f'case{i}')}.npz"
        fields = capture_case(torch, spec, omit_operands=args.omit_operands)
        save(path, fields)
        kernels = "; ".join(k[:60] for k in fields["kernels"])
        print(
            f"[{i + 1}/{len(specs)}] {path}: {spec['op']} out {fields['out'].shape} {fields['out'].dtype}, "
            f"repeat differs {fields['repeat_differs']}, kernels: {kernels}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
