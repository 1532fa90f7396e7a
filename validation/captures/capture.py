"""Reading a library capture (the ``.npz`` the capture kit writes) and turning it into GEMMs.

The format is defined by :mod:`validation.captures.format` (which the kit,
:mod:`validation.captures.kit`, writes by): ``op``, the operands under torch's
names, ``stride``/``padding``/``dilation``/``groups`` for convolutions, ``out`` in torch's
logical order, and optional ``memory_format``, ``gpu``, ``kernels``, ``torch``, ``alpha``,
``beta``. :func:`load_capture` checks every field before any work and raises
:class:`CaptureError` naming the field and what it accepts. A capture written with
``--omit-operands`` (the operands' seed and sha256 instead of the arrays) has its operands drawn
again and checked against the sha256.
"""

from __future__ import annotations

import math
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import ml_dtypes
import numpy as np

from emu.implicit_gemm import ConvShape
from models.libraries import fp32_cuda_core

from ..configs.limits import check_macs, memory_limit
from ..files import ZIP_ERRORS, ZIP_MAGIC, load_npz_file, open_user_file
from .format import BLOCK_SCALINGS, FP4_DTYPE, FP8_DTYPES, FP8_SHORT_NAMES, NEEDS, OPS, complete, logical_scales

__all__ = ["Capture", "CaptureError", "GemmJob", "OPS", "load_capture", "is_capture", "MAX_CAPTURE_BYTES"]

PASS_OF = {"conv2d": "fwd", "conv2d_bwd_data": "bwd_data", "conv2d_bwd_weight": "bwd_weight"}
#: the largest capture file read, and the largest array it may declare (bytes)
MAX_CAPTURE_BYTES = 4 << 30


class CaptureError(ValueError):
    """A capture file that cannot be used, with the field and the reason."""


@dataclass
class Capture:
    """One library capture: the op, its operands (bit patterns of ``input``: uint16 for fp16 and
    bf16, uint32 for tf32), the GPU's output and what the GPU machine recorded."""

    path: str
    op: str
    operands: dict[str, np.ndarray]
    out: np.ndarray
    alpha: float = 1.0
    beta: float = 1.0
    conv: ConvShape | None = None
    memory_format: str = "contiguous"
    gpu: str = ""
    kernels: tuple[str, ...] = ()
    torch: str = ""
    extra: dict = field(default_factory=dict)
    #: the operand format the GPU multiplied: "fp16", "bf16", "tf32" (float32 operands a TF32
    #: kernel took) or "fp32" (float32 operands multiplied whole by fp32 FMAs: TF32 not allowed,
    #: or a CUDA-core kernel); for ``scaled_mm`` an fp8 format or a pair of them, A's then B's
    #: ("e4m3xe5m2")
    input: str = "fp16"

    @property
    def out_format(self) -> str:
        return {"float16": "fp16", "float32": "fp32", "bfloat16": "bf16"}[self.out.dtype.name]

    def describe(self) -> str:
        shapes = ", ".join(f"{k} {tuple(v.shape)}" for k, v in self.operands.items())
        conv = ""
        if self.conv is not None:
            c = self.conv
            conv = f", stride {c.stride}, padding {c.padding}, dilation {c.dilation}, groups {c.groups}"
        fmt = f" ({self.input} operands)" if self.input != "fp16" else ""
        return f"{self.op}{fmt}: {shapes}{conv} → out {tuple(self.out.shape)} {self.out.dtype.name}"


def is_capture(path) -> bool:
    """Whether ``path`` is an ``.npz`` holding an ``op`` member (a library capture rather than
    probe rows); read through the checked loader (a FIFO or device is not one, and never blocks)."""
    try:
        with open_user_file(path, "capture", max_bytes=MAX_CAPTURE_BYTES) as (fh, _):
            if fh.read(4) != ZIP_MAGIC:
                return False
            fh.seek(0)
            with zipfile.ZipFile(fh) as z:
                return "op.npy" in z.namelist()
    except (ValueError, *ZIP_ERRORS):
        return False


def _fail(field_name: str, message: str):
    raise CaptureError(f"{field_name}: {message}")


def _read_members(path: Path) -> dict[str, np.ndarray]:
    """Every member of an npz, through the checked loader (:mod:`validation.files`): one open file
    descriptor of a regular file, pickles refused, each member's declared size checked against the
    file, :data:`MAX_CAPTURE_BYTES` and the memory limit before it is allocated, two members of one
    name refused."""

    def fail(why):
        return CaptureError(f"capture: {path} {why}")

    return load_npz_file(
        path,
        "capture",
        fail=fail,
        max_bytes=MAX_CAPTURE_BYTES,
        limit=min(MAX_CAPTURE_BYTES, memory_limit()[0]),
        member_fail=lambda name, why: CaptureError(f"{name}: {why}"),
    )


def _text(members, name, default=""):
    if name not in members:
        return default
    v = members[name]
    if v.dtype.kind not in "UScO" or v.ndim != 0:
        _fail(name, f"expected a string, got a {v.dtype} array of shape {v.shape}")
    return str(v)


def _ints(members, name, count, low):
    """Field ``name`` as ``count`` whole numbers ≥ ``low`` (one number: a 0-d array or one element)."""
    v = np.asarray(members[name])
    if count == 1 and v.size == 1:
        v = v.reshape(1)
    if v.dtype.kind not in "iu" or v.shape != (count,) or (v < low).any():
        shown = repr(v.tolist()) if v.size <= 8 else f"a {v.dtype} array of shape {v.shape}"
        what = "a whole number" if count == 1 else f"{count} whole numbers"
        _fail(name, f"expected {what} ≥ {low}, got {shown[:80]}")
    return tuple(int(x) for x in v)


#: the operand formats the capture search runs (``Capture.input``)
INPUTS = ("fp16", "bf16", "tf32", "fp32")
#: the bit-pattern dtype the search keeps each format's operands in (what ``emu.gemm`` and
#: ``emu.simt.fma_gemm`` take)
_PATTERN = {"fp16": np.uint16, "bf16": np.uint16, "tf32": np.uint32, "fp32": np.uint32}


def _as_dtype(v: np.ndarray, name: str) -> np.ndarray:
    """``v`` seen as the ml_dtypes type ``name`` when it is its raw bytes (``np.savez`` writes
    bfloat16 arrays as void ``|V2`` members; float8 ones as ``<f1``, which numpy cannot read
    back, so the kit stores them as uint8 bit patterns, or ``|V1``; the kit's ``scaled_mm``
    captures hold bfloat16 outputs and biases as uint16 patterns, written without ml_dtypes)."""
    if (name in FP8_DTYPES and v.dtype == np.uint8) or (name == "bfloat16" and v.dtype == np.uint16):
        return v.view(getattr(ml_dtypes, name))
    if v.dtype.kind == "V" and v.dtype.fields is None and name in ("bfloat16",) + FP8_DTYPES:
        want = np.dtype(getattr(ml_dtypes, name))
        if v.dtype.itemsize == want.itemsize:
            return v.view(want)
    return v


def _fp8_operand(m: dict, name: str) -> np.ndarray:
    """A ``scaled_mm`` operand as its ml_dtypes float8 values (its own ``{name}_dtype`` field, or
    ``dtype``, says which: np.savez writes them as raw bytes); CaptureError otherwise."""
    declared = _text(m, f"{name}_dtype", "") or _text(m, "dtype", "")
    v = _as_dtype(m[name], declared)
    if v.dtype.name not in FP8_DTYPES:
        _fail(name, f"scaled_mm takes fp8 operands ({', '.join(FP8_DTYPES)}), got {declared or v.dtype}")
    return v


def _scaled_mm(m: dict, cap_path: str, out: np.ndarray, kernels) -> Capture:
    """A ``torch._scaled_mm`` capture: fp8 A (M, K) and B (K, N), each in its own format; fp32
    scales per tensor (a scalar or one element), per row of A ((M, 1)) or per column of B ((1, N));
    an optional bias (N,) of any float dtype, added in fp32; ``use_fast_accum``. Block-scaled
    (a ``block`` field): :func:`_block_scaled_mm`."""
    if "block" in m:
        return _block_scaled_mm(m, cap_path, out, kernels)
    A, B = _fp8_operand(m, "A"), _fp8_operand(m, "B")
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        _fail("A", f"scaled_mm needs A (M, K) and B (K, N), got {A.shape} and {B.shape}")
    M, N = A.shape[0], B.shape[1]
    fam = {a.dtype.name.endswith("fnuz") for a in (A, B)}
    if len(fam) != 1:
        _fail("B", f"{B.dtype.name} with A {A.dtype.name}: an OCP fp8 format pairs with an OCP one, fnuz with fnuz")
    extra = {}
    for name, shapes in (("scale_a", ((), (1,), (1, 1), (M, 1))), ("scale_b", ((), (1,), (1, 1), (1, N)))):
        v = np.asarray(m[name])
        if v.dtype != np.float32 or v.shape not in shapes:
            _fail(name, f"expected float32 of shape {' or '.join(map(str, shapes))}, got {v.dtype} {v.shape}")
        if not np.isfinite(v).all():
            _fail(name, "expected finite scales")
        extra[name] = v.reshape(-1, 1) if name == "scale_a" and v.size == M and M > 1 else v.reshape(1, -1)
    if "bias" in m:
        bias = _as_dtype(m["bias"], _text(m, "bias_dtype", ""))
        if bias.dtype.name not in ("float16", "bfloat16", "float32") or bias.shape != (N,):
            _fail("bias", f"expected float16, bfloat16 or float32 of shape ({N},), got {bias.dtype} {bias.shape}")
        extra["bias"] = bias.astype(np.float32).reshape(1, N)  # every one exact in fp32
    flag = np.asarray(m.get("use_fast_accum", False))
    if flag.size != 1 or flag.dtype.kind not in "biu":
        _fail("use_fast_accum", f"expected true or false, got {flag!r}")
    extra["use_fast_accum"] = bool(flag.reshape(-1)[0])
    if out.shape != (M, N):
        _fail("out", f"expected shape {(M, N)} for these operands, got {out.shape}")
    a_fmt, b_fmt = FP8_SHORT_NAMES[A.dtype.name], FP8_SHORT_NAMES[B.dtype.name]
    fmt = a_fmt if a_fmt == b_fmt else f"{a_fmt}x{b_fmt}"
    ops = {"A": A.view(np.uint8), "B": B.view(np.uint8)}
    return Capture(cap_path, "scaled_mm", ops, out, input=fmt, kernels=kernels, extra=extra)


def _block_scaled_mm(m: dict, cap_path: str, out: np.ndarray, kernels) -> Capture:
    """A block-scaled ``torch._scaled_mm`` capture (MX, NVFP4; :data:`format.BLOCK_SCALINGS`):
    A (M, K) and B (K, N) uint8 patterns of ``A_dtype`` / ``B_dtype`` (fp8, or fp4 one value a
    byte below 16), ``scale_format`` and ``block`` one of the scalings', ``scale_a``
    (M, K // block) and ``scale_b`` (N, K // block) uint8 patterns in logical order, or with
    ``scale_layout = "swizzled"`` flat in the layout torch hands to cuBLASLt (read back by
    :func:`format.logical_scales`). The capture's ``extra`` holds the logical scales,
    ``scale_format`` and ``block``."""
    scale, block = _text(m, "scale_format", ""), np.asarray(m["block"])
    pairs = {(s, b): dts for s, b, dts in BLOCK_SCALINGS.values()}
    if block.size != 1 or block.dtype.kind not in "iu" or (scale, int(block.reshape(-1)[0])) not in pairs:
        have = ", ".join(f"{s} per {b}" for s, b in pairs)
        _fail("block", f"expected one of the block scalings ({have}), got {scale or 'no scale_format'} per {block!r}")
    block = int(block.reshape(-1)[0])
    ops, fmts = {}, []
    for name in ("A", "B"):
        v, declared = np.asarray(m[name]), _text(m, f"{name}_dtype", "") or _text(m, "dtype", "")
        if declared not in pairs[(scale, block)] or v.dtype != np.uint8 or v.ndim != 2:
            dts = ", ".join(pairs[(scale, block)])
            _fail(
                name,
                f"expected uint8 patterns (2-D) of {dts} with {scale} scales, got {declared or '?'} {v.dtype} {v.shape}",
            )
        if declared == FP4_DTYPE and v.size and int(v.max()) > 15:
            _fail(name, f"fp4 (e2m1) patterns are 4 bits, one a byte (below 16), got {int(v.max())}")
        ops[name], fmts = v, fmts + [FP8_SHORT_NAMES[declared]]
    (M, K), (K2, N) = ops["A"].shape, ops["B"].shape
    if K2 != K or K % block:
        _fail("B", f"expected A (M, K) and B (K, N) with K a multiple of {block}, got {(M, K)} and {(K2, N)}")
    if (fmts[0] == "e2m1") != (fmts[1] == "e2m1"):
        _fail("B_dtype", f"fp4 pairs with fp4, fp8 with fp8: got A {fmts[0]}, B {fmts[1]}")
    extra = {"scale_format": scale, "block": block, "use_fast_accum": False}
    layout = _text(m, "scale_layout", "logical")
    if layout not in ("logical", "swizzled"):
        _fail("scale_layout", f"expected 'logical' or 'swizzled' (cuBLASLt's block layout), got {layout!r}")
    for name, rows in (("scale_a", M), ("scale_b", N)):
        v = np.asarray(m[name])
        if layout == "swizzled" and v.dtype == np.uint8:
            try:
                v = logical_scales(v, rows, K // block)
            except ValueError as exc:
                _fail(name, str(exc))
        if v.dtype != np.uint8 or v.shape != (rows, K // block):
            _fail(
                name,
                f"expected uint8 {scale} patterns of shape {(rows, K // block)} (logical order), got {v.dtype} {v.shape}",
            )
        extra[name] = v
    if out.shape != (M, N):
        _fail("out", f"expected shape {(M, N)} for these operands, got {out.shape}")
    fmt = fmts[0] if fmts[0] == fmts[1] else f"{fmts[0]}x{fmts[1]}"
    return Capture(cap_path, "scaled_mm", ops, out, input=fmt, kernels=kernels, extra=extra)


def _input_format(m: dict, op: str, kernels) -> str:
    """The operand format of a capture: fp16 for float16 operands, bf16 for bfloat16 ones; for
    float32 operands tf32 where a TF32 kernel multiplied them (the capture records
    ``allow_tf32``, or a kernel name says tf32/xf32) and fp32 otherwise: TF32 not allowed, or a
    CUDA-core kernel (SIMT sgemm, gemv, cuDNN's ``ffma`` and direct kernels:
    :func:`models.libraries.fp32_cuda_core`) that multiplies fp32 whole even where TF32 is
    allowed. CaptureError naming what the search takes otherwise."""
    first = next(n for n in ("A", "input", "grad_output") if n in m)
    declared = _text(m, "dtype", "")
    dt = _as_dtype(m[first], declared).dtype
    if declared in FP8_DTYPES or dt.name in FP8_DTYPES:
        _fail(
            first,
            f"{declared or dt.name} operands in {op}: fp8 GEMMs are captured as scaled_mm (torch._scaled_mm); "
            "the other ops take fp16, bf16 and fp32 (tf32) operands",
        )
    if dt == np.float16:
        return "fp16"
    if dt.name == "bfloat16":
        return "bf16"
    if dt == np.float32:
        flag = np.asarray(m.get("allow_tf32", False))
        tf32 = flag.size == 1 and flag.dtype.kind in "biu" and bool(flag.reshape(-1)[0])
        tf32 = tf32 or any("tf32" in k.lower() or "xf32" in k.lower() for k in kernels)
        return "tf32" if tf32 and not fp32_cuda_core(kernels) else "fp32"
    _fail(first, f"expected float16, bfloat16 or float32 values, got {dt}")


def _operand(members, name, fmt: str):
    """Operand ``name`` as the bit patterns of ``fmt`` (uint16 for fp16 and bf16, uint32 for
    tf32 and fp32: the float32 patterns; a tf32 unit drops their 13 low fraction bits)."""
    want = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "tf32": np.float32, "fp32": np.float32}[fmt]
    v = _as_dtype(members[name], np.dtype(want).name)
    if v.dtype != np.dtype(want):
        _fail(name, f"expected {np.dtype(want).name} values like the other operands ({fmt}), got {v.dtype}")
    return v.view(_PATTERN[fmt])


def load_capture(path) -> Capture:
    """Read and check a capture; :class:`CaptureError` (naming the field) when it cannot be used."""
    path = Path(path)
    m = _read_members(path)
    if any(k.endswith("_sha256") for k in m):  # written with --omit-operands: draw them again from the seed
        try:
            m = complete(m, max_bytes=min(MAX_CAPTURE_BYTES, memory_limit()[0]))
        except (ValueError, KeyError) as exc:
            raise CaptureError(
                f"{exc}" if isinstance(exc, ValueError) else f"{exc.args[0]}: needed to draw the omitted operands"
            ) from None
    op = _text(m, "op")
    if op not in OPS:
        _fail("op", f"{op!r} is not one of {', '.join(OPS)}")
    for name in NEEDS[op] + ("out",):
        if name not in m:
            _fail(name, f"{op} needs it (the capture has {', '.join(sorted(m))})")
    kernels: tuple[str, ...] = ()
    if "kernels" in m:
        k = m["kernels"]
        if k.dtype.kind not in "US":
            _fail("kernels", f"expected strings, got {k.dtype}")
        kernels = tuple(str(x) for x in np.atleast_1d(k))
    out = _as_dtype(m["out"], _text(m, "out_dtype", "") or _text(m, "dtype", ""))
    if out.dtype.name not in ("float16", "float32", "bfloat16"):
        if out.dtype.itemsize == 2 and out.dtype.kind in "Vu":  # np.savez writes bfloat16 as 2-byte voids
            _fail(
                "out",
                f"2-byte values of no float type ({out.dtype}): np.savez stores bfloat16 so; add the field "
                'dtype = "bfloat16" (or out_dtype) to the capture',
            )
        _fail("out", f"expected float16, float32 or bfloat16 values, got {out.dtype} (fp8 outputs: not modelled)")
    if op == "scaled_mm":
        cap = _scaled_mm(m, str(path), out, kernels)
        _check_macs(cap)
        cap.gpu = _text(m, "gpu")
        cap.torch = _text(m, "torch")
        return cap
    fmt = _input_format(m, op, kernels)
    ops = {n: _operand(m, n, fmt) for n in ("A", "B", "C", "input", "weight", "bias", "grad_output") if n in m}
    cap = Capture(str(path), op, ops, out, input=fmt, kernels=kernels)
    cap.gpu = _text(m, "gpu")
    cap.torch = _text(m, "torch")
    if "repeat_differs" in m:  # outputs that differed when the kit ran the op again (run-to-run variation)
        v = np.asarray(m["repeat_differs"])
        if v.size != 1 or v.dtype.kind not in "iu" or int(v.reshape(-1)[0]) < 0:
            _fail("repeat_differs", f"expected a whole number ≥ 0, got {v!r}")
        cap.extra["repeat_differs"] = int(v.reshape(-1)[0])
    cap.memory_format = _text(m, "memory_format", "contiguous")
    if cap.memory_format not in ("contiguous", "channels_last"):
        _fail("memory_format", f"{cap.memory_format!r} is not one of contiguous, channels_last")
    for name in ("alpha", "beta"):
        if name in m:
            v = m[name]
            if v.ndim or v.dtype.kind not in "fiu" or not np.isfinite(v):
                _fail(name, f"expected a finite number, got {v!r}")
            setattr(cap, name, float(v))
    _check_shapes(cap, m)
    return cap


def _check_shapes(cap: Capture, m):
    o = cap.operands
    want = None
    if cap.op in ("mm", "addmm"):
        A, B = o["A"], o["B"]
        if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
            _fail("A", f"{cap.op} needs A (M, K) and B (K, N), got {A.shape} and {B.shape}")
        want = (A.shape[0], B.shape[1])
        if cap.op == "addmm":
            try:
                if np.broadcast_shapes(o["C"].shape, want) != want:
                    raise ValueError
            except ValueError:
                _fail("C", f"shape {o['C'].shape} does not broadcast to the output's {want}")
    elif cap.op in ("bmm", "baddbmm"):
        A, B = o["A"], o["B"]
        if A.ndim != 3 or B.ndim != 3 or A.shape[0] != B.shape[0] or A.shape[2] != B.shape[1]:
            _fail("A", f"{cap.op} needs A (b, M, K) and B (b, K, N), got {A.shape} and {B.shape}")
        want = (A.shape[0], A.shape[1], B.shape[2])
        if cap.op == "baddbmm":
            try:
                if np.broadcast_shapes(o["C"].shape, want) != want:
                    raise ValueError
            except ValueError:
                _fail("C", f"shape {o['C'].shape} does not broadcast to the output's {want}")
    elif cap.op == "matmul":  # torch.matmul of 2-D or more: batch dims broadcast
        A, B = o["A"], o["B"]
        if A.ndim < 2 or B.ndim < 2 or A.shape[-1] != B.shape[-2]:
            _fail("A", f"matmul needs A (…, M, K) and B (…, K, N), got {A.shape} and {B.shape}")
        try:
            want = np.broadcast_shapes(A.shape[:-2], B.shape[:-2]) + (A.shape[-2], B.shape[-1])
        except ValueError:
            _fail("B", f"batch dims {B.shape[:-2]} do not broadcast with A's {A.shape[:-2]}")
    elif cap.op == "linear":
        x, w = o["input"], o["weight"]
        if x.ndim < 1 or w.ndim != 2 or x.shape[-1] != w.shape[1]:
            _fail("input", f"linear needs input (…, in) and weight (out, in), got {x.shape} and {w.shape}")
        want = x.shape[:-1] + (w.shape[0],)
        if "bias" in o and o["bias"].shape != (w.shape[0],):
            _fail("bias", f"expected shape ({w.shape[0]},), got {o['bias'].shape}")
    else:
        for name in ("stride", "padding", "dilation"):
            if name not in m:
                _fail(name, f"{cap.op} needs it (two whole numbers)")
        stride = _ints(m, "stride", 2, 1)
        padding = _ints(m, "padding", 2, 0)
        dilation = _ints(m, "dilation", 2, 1)
        groups = _ints(m, "groups", 1, 1)[0] if "groups" in m else 1
        if cap.op == "conv2d":
            xs, ws = o["input"].shape, o["weight"].shape
        elif cap.op == "conv2d_bwd_data":
            xs, ws = _ints(m, "input_shape", 4, 1), o["weight"].shape
        else:
            xs, ws = o["input"].shape, _ints(m, "weight_shape", 4, 1)
        if len(xs) != 4 or len(ws) != 4:
            _fail("input", f"conv2d needs 4-D input and weight, got {xs} and {ws}")
        try:
            shape = ConvShape(xs[0], xs[1], xs[2], xs[3], ws[0], ws[2], ws[3], stride, padding, dilation, groups)
        except ValueError as exc:
            _fail("weight", str(exc))
        if ws[1] != shape.Cg:
            _fail("weight", f"shape {ws} does not fit {xs[1]} input channels in {groups} groups")
        cap.conv = shape
        want = shape.out_shape(PASS_OF[cap.op])
        if cap.op != "conv2d" and o["grad_output"].shape != shape.out_shape("fwd"):
            _fail("grad_output", f"expected shape {shape.out_shape('fwd')}, got {o['grad_output'].shape}")
        if "bias" in o and o["bias"].shape != (ws[0],):
            _fail("bias", f"expected shape ({ws[0]},), got {o['bias'].shape}")
    for name, v in o.items():  # a size-0 dimension (K = 0): nothing to multiply
        if v.size == 0:
            _fail(name, f"has a dimension of size 0 (shape {tuple(v.shape)}): nothing to multiply")
    if tuple(cap.out.shape) != tuple(want):
        _fail("out", f"expected shape {tuple(want)} for these operands, got {tuple(cap.out.shape)}")
    if cap.out.size == 0:
        _fail("out", "is empty: nothing to compare")
    _check_macs(cap)


def _check_macs(cap: Capture) -> None:
    """The capture's multiply-adds (one emulation of its op) against the work limit
    (``FP16EMU_MAX_MACS``), counted in Python integers before any GEMM is built."""
    o = cap.operands
    if cap.conv is not None:
        c = cap.conv
        reduce = (c.C // c.groups) * c.R * c.S
        macs = math.prod(c.out_shape("fwd")) * reduce
    elif cap.op == "linear":
        macs = math.prod(o["input"].shape) * o["weight"].shape[0]
    else:  # mm, addmm, bmm: the output's elements times K
        macs = cap.out.size * o["A"].shape[-1]
    try:
        check_macs(macs, f"the capture ({cap.op})")
    except ValueError as err:
        raise CaptureError(f"out: {err}") from None


@dataclass(frozen=True)
class GemmJob:
    """One GEMM of a capture: A (M, K) and B (K, N) bit patterns of the capture's input format, C (broadcastable to
    (M, N), float32) or None, and ``out_index`` (M, N): where each result lies in the capture's
    flattened output."""

    A: np.ndarray
    B: np.ndarray
    C: np.ndarray | None
    out_index: np.ndarray
