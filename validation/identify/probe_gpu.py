"""Run an fp16emu probe set on a GPU and write the outputs beside the inputs.

Usage (on the machine with the GPU; needs numpy and PyTorch, optionally Triton — not fp16emu)::

    python probe_gpu.py PROBES.npz [--out RESULTS.npz] [--backend triton|torch] [--device cuda]
    python -m validation.identify.probe_gpu PROBES.npz ...          # the same, from an fp16emu checkout

then, anywhere fp16emu is installed: ``fp16emu identify RESULTS.npz``.

PROBES.npz (``fp16emu probe --out PROBES.npz``) holds a, b (R, K) uint16 fp16 patterns and c
(R,) uint32 fp32 patterns (uint16: an fp16 accumulator). RESULTS.npz holds the same arrays plus
d (R,) uint32 (uint16 for an fp16 accumulator), ``backend`` (what ran), ``kernels`` (the GPU
kernels the run launched, when the profiler could see them) and ``checks``.

What it measures. Rows are packed 16 at a time into tiles: A (16, K) holds 16 rows' a, B (K, 16)
their b as columns, and D = A·B (+ C) is computed on the GPU; d[i] is the diagonal D[i, i] =
c_i + Σ_k a_ik·b_ik. The off-diagonal outputs are computed and discarded.

* ``--backend triton`` (the default when Triton imports): one Triton program per tile computes
  ``tl.dot(a, b, acc=c)`` with C holding c_i on its diagonal, so c enters the matrix instruction
  as its accumulator, as in ``d = c + Σ a·b`` of one instruction. K must be ≥ 16 (Triton's
  smallest dot). fp16 accumulators use ``out_dtype=tl.float16``.
* ``--backend torch``: ``torch.bmm(A, B, out_dtype=torch.float32)`` (PyTorch ≥ 2.8; on ROCm
  builds the same call reaches hipBLASLt/rocBLAS). A library GEMM initialises its accumulators to
  +0 and adds C, if at all, in an epilogue outside the matrix instruction, so this backend
  measures c = +0 only: it writes c = +0 for every row (the rows' own c are not used) and says so
  in ``checks``. fp32 accumulators only.

Operand formats (the probe file's ``input`` entry, fp16 when absent; ``fp16emu probe --input``):

* ``bf16``: uint16 patterns become ``torch.bfloat16``. Triton: ``tl.dot`` of bf16 tiles (NVIDIA
  ``mma.sync m16n8k16`` / ``wgmma``; AMD ``v_mfma_f32_*_bf16``). torch: ``torch.bmm(…,
  out_dtype=torch.float32)``, c = +0 only.
* ``tf32``: uint32 patterns are float32 values with the 13 low bits clear (exact tf32 values, so
  whether a kernel rounds or cuts its fp32 operands to tf32 does not matter and is **not
  probed**). Triton: ``tl.dot(…, input_precision="tf32")`` (``mma … .tf32`` k8 on NVIDIA; on AMD
  MI300 Triton's tf32 dot reaches ``v_mfma_f32_*_xf32`` only where its AMD backend lowers tf32,
  else it raises and the script says so); tl.dot needs K ≥ 16, so tf32 rows of K = 8 (the
  instruction K) run with ``--backend torch`` only, or write them with ``--k 16`` (two k8
  instructions chained). torch: ``torch.bmm`` of float32 with ``allow_tf32`` (cuBLAS's tf32
  kernels; on ROCm hipBLASLt's xf32 where the build enables it), c = +0 only.
* ``e4m3``, ``e5m2`` (OCP; NVIDIA sm_89+, AMD gfx950) and ``e4m3fnuz``, ``e5m2fnuz`` (AMD
  gfx942, MI300): uint8 patterns become ``torch.float8_*``. ``torch.mm`` has no fp8 path, so
  Triton is the way: ``tl.dot(a, b, acc=c)`` on 64-row tiles (64 rows per tile on the diagonal,
  4 warps), so that Hopper lowers it to ``wgmma m64nNk32`` (a 16-row tile would take the
  ``mma.sync`` path, which Hopper lacks for fp8) and MI300 to ``v_mfma_f32_*_fp8``; fp16
  accumulators (``out_dtype=tl.float16``) where Triton offers them. ``--backend torch`` runs
  ``torch._scaled_mm`` (scales 1, one 16×K by K×16 GEMM per tile): a whole cuBLASLt/hipBLASLt
  kernel that starts its accumulators at 0 and adds no C, so c = +0 only, fp32 outputs only, and
  which wgmma variant and what promotion (cuBLAS adds the tensor core's partial sums into fp32
  registers every few k-blocks unless fast accumulation is on) the library picks is not under
  the script's control; with K = 32 one instruction does the sum.
* A format the GPU or the installed torch lacks (no ``torch.float8_e4m3fn``, an NVIDIA GPU below
  sm_80 for bf16/tf32 or sm_89 for fp8, fnuz formats on NVIDIA, OCP fp8 on MI300) is refused
  with a one-line error (exit 2) before anything runs.

How to check that one instruction does the work (the identification assumes each row is one
instruction's d = c + Σ a·b, or a chain of instructions over consecutive k):

1. K: make the probe's K the instruction's K or a small multiple of it (``fp16emu probe --k``:
   16 fits every NVIDIA fp16 mma from Ampere on and the AMD 16x16x16 / 32x32x8 MFMAs).
   A GEMM of K = 16 leaves a library nothing to split.
2. Invariance (automatic, ``checks``): every tile is run twice, the second time with the rows
   shuffled across tiles and across positions inside a tile; a library that treats some outputs
   differently (split-K, a different kernel for edge tiles) shows up as rows whose bits differ.
3. Kernels (``kernels``): with ``torch.profiler`` available the names of the launched GPU
   kernels are recorded. Expect one GEMM kernel per call (NVIDIA: names with ``gemm``/``mma``/
   ``xmma``; AMD: ``Cijk_…_MT…`` for rocBLAS/Tensile, or the Triton kernel ``_probe_dot``); a
   second kernel (``splitK``, ``reduce``) means K was split. For the instruction itself,
   disassemble: ``cuobjdump -sass`` (HMMA) on NVIDIA, or ``roc-obj``/``llvm-objdump`` (v_mfma) on
   AMD, or Triton's ``kernel.asm['sass']`` / ``['amdgcn']``.

The script needs no GPU to be tested: :func:`measure` takes any ``backend(A, B, C) -> D``
callable on numpy arrays (fp16emu's tests pass their own emulation as the device).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

__all__ = [
    "FORMATS",
    "FP8_TILE",
    "TILE",
    "check_support",
    "main",
    "measure",
    "pack",
    "torch_backend",
    "triton_backend",
    "unpack",
]

TILE = 16
FP8_TILE = 64  # rows per tile for fp8 through Triton: a 64-row dot is what Hopper lowers to wgmma

#: operand format → (numpy dtype of its bit patterns, torch dtype name). tf32 travels as float32.
FORMATS = {
    "fp16": (np.uint16, "float16"),
    "bf16": (np.uint16, "bfloat16"),
    "tf32": (np.uint32, "float32"),
    "e4m3": (np.uint8, "float8_e4m3fn"),
    "e5m2": (np.uint8, "float8_e5m2"),
    "e4m3fnuz": (np.uint8, "float8_e4m3fnuz"),
    "e5m2fnuz": (np.uint8, "float8_e5m2fnuz"),
}
FP8 = ("e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz")


class ProbeError(Exception):
    """A bad input file or an unavailable backend: one line on stderr, exit 2."""


def _save_atomically(path, arrays: dict) -> None:
    """``np.savez`` into a temporary file of a random name made exclusively beside ``path``
    (mode ``"x"``: ``O_CREAT|O_EXCL``, never an existing file or link), its mode the umask's, then
    renamed over it: a link at ``path`` is replaced, never written through, and a failed write
    leaves the old file whole (as ``validation.files.write_atomically``; this script runs
    without fp16emu)."""
    import os

    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)[:80]}.{os.urandom(6).hex()}.tmp")
    try:
        with open(tmp, "xb") as fh:
            np.savez(fh, **arrays)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def pack(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, order: np.ndarray | None = None, *, tile: int = TILE, input="fp16"
):
    """Tiles (A, B, C) for rows a, b (R, K) bit patterns of ``input`` and c (R,) patterns:
    A (T, tile, K), B (T, K, tile) — float16 values for fp16, float32 for tf32, else the bit
    patterns (uint16 bf16, uint8 fp8: numpy has no such dtypes) — and C (T, tile, tile) float32
    (float16 for uint16 c) with c on the diagonals and +0 elsewhere; ``order``: the rows in tile
    order (default 0…R−1; the last tile is padded with zero rows)."""
    R, K = a.shape
    order = np.arange(R) if order is None else np.asarray(order)
    T = -(-R // tile)
    pad = T * tile - R
    idx = np.concatenate([order, np.full(pad, -1)])
    fp16_acc = c.dtype == np.uint16
    patterns = FORMATS[input][0]
    values = {"fp16": np.float16, "tf32": np.float32}.get(input, patterns)
    a_t = np.where(idx[:, None] >= 0, a[idx], 0).astype(patterns).view(values)
    b_t = np.where(idx[:, None] >= 0, b[idx], 0).astype(patterns).view(values)
    cvals = np.where(idx >= 0, c[idx], 0).astype(c.dtype).view(np.float16 if fp16_acc else np.float32)
    A = a_t.reshape(T, tile, K)
    B = np.ascontiguousarray(b_t.reshape(T, tile, K).transpose(0, 2, 1))
    C = np.zeros((T, tile, tile), cvals.dtype)
    diag = np.arange(tile)
    C[:, diag, diag] = cvals.reshape(T, tile)
    return A, B, C


def unpack(D: np.ndarray, R: int, order: np.ndarray | None = None) -> np.ndarray:
    """The bit patterns of the diagonals of D (T, 16, 16), as rows 0…R−1 (``order`` as in
    :func:`pack`): uint32 for float32 D, uint16 for float16 D."""
    D = np.asarray(D)
    if D.dtype not in (np.float32, np.float16):
        raise ProbeError(f"backend returned {D.dtype}; expected float32 or float16")
    diag = np.arange(D.shape[1])
    flat = D[:, diag, diag].reshape(-1)
    order = np.arange(R) if order is None else np.asarray(order)
    out = np.empty(R, D.dtype)
    out[order] = flat[:R]
    return out.view(np.uint16 if D.dtype == np.float16 else np.uint32)


def measure(a: np.ndarray, b: np.ndarray, c: np.ndarray, backend, seed: int = 0, *, tile: int = TILE, input="fp16"):
    """(d, differing): d (R,) the output bits of every row through ``backend(A, B, C) -> D``
    (numpy in, numpy out; see :func:`pack`, rows of operand format ``input`` in tiles of
    ``tile`` rows), and the rows whose bits changed when the run was repeated with the rows
    shuffled across and within tiles (NaN payloads aside)."""
    R = a.shape[0]
    d = unpack(backend(*pack(a, b, c, tile=tile, input=input)), R)
    order = np.random.default_rng(seed).permutation(R)
    d2 = unpack(backend(*pack(a, b, c, order, tile=tile, input=input)), R, order)
    differing = np.flatnonzero((d != d2) & ~(_is_nan(d) & _is_nan(d2)))
    return d, differing


def _is_nan(bits: np.ndarray) -> np.ndarray:
    if bits.dtype == np.uint16:
        return ((bits & 0x7C00) == 0x7C00) & ((bits & 0x03FF) != 0)
    return ((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x007FFFFF) != 0)


def _to_torch(torch, X: np.ndarray, fmt: str, device: str):
    """A numpy tile array (:func:`pack`) as a torch tensor of the format's dtype on ``device``."""
    X = np.ascontiguousarray(X)
    if fmt in ("fp16", "tf32") or X.dtype in (np.float16, np.float32):
        return torch.from_numpy(X).to(device)
    if fmt == "bf16":
        return torch.from_numpy(X.view(np.int16)).to(device).view(torch.bfloat16)
    return torch.from_numpy(X).to(device).view(getattr(torch, FORMATS[fmt][1]))


def check_support(torch, fmt: str, device: str = "cuda", option: str = "--backend") -> None:
    """ProbeError (one line) when the installed torch or the visible GPU lacks operand format
    ``fmt``: no torch dtype; an NVIDIA GPU below sm_80 (bf16, tf32) or sm_89 (OCP fp8); the fnuz
    formats on NVIDIA; on AMD, OCP fp8 off gfx950/gfx12 and fnuz/tf32 off gfx942."""
    if fmt not in FORMATS:
        raise ProbeError(f"input: {fmt!r} is not one of {', '.join(FORMATS)}")
    if not hasattr(torch, FORMATS[fmt][1]):
        raise ProbeError(f"{option}: this PyTorch ({torch.__version__}) has no torch.{FORMATS[fmt][1]} ({fmt})")
    if not device.startswith("cuda") or fmt == "fp16":
        return
    props = torch.cuda.get_device_properties(torch.device(device))
    if getattr(torch.version, "hip", None):
        arch = str(getattr(props, "gcnArchName", "")).split(":")[0]
        need = {"e4m3": ("gfx950", "gfx12"), "e5m2": ("gfx950", "gfx12"), "e4m3fnuz": ("gfx942",)}
        need.update({"e5m2fnuz": ("gfx942",), "tf32": ("gfx942",)})
        if fmt in need and not arch.startswith(need[fmt]):
            raise ProbeError(
                f"input: {fmt} has no matrix instruction on {props.name} ({arch}); it needs {' or '.join(need[fmt])}"
            )
        return
    cap = (props.major, props.minor)
    if fmt in ("e4m3fnuz", "e5m2fnuz"):
        raise ProbeError(f"input: {fmt} is AMD MI300's fp8; {props.name} (NVIDIA) multiplies e4m3/e5m2")
    need = (8, 9) if fmt in FP8 else (8, 0)
    if cap < need:
        raise ProbeError(
            f"input: {fmt} needs an NVIDIA GPU of sm_{need[0]}{need[1]} or later; {props.name} is sm_{cap[0]}{cap[1]}"
        )


def torch_backend(device: str = "cuda", input: str = "fp16"):
    """``backend(A, B, C)`` through PyTorch on ``device``: ``torch.bmm(A, B, out_dtype=float32)``
    for fp16 and bf16, ``torch.bmm`` of float32 with ``allow_tf32`` for tf32, and
    ``torch._scaled_mm`` (scales 1) per tile for fp8; C must be all zero (module docstring).
    Raises ProbeError when torch, the device, the format or the call is missing."""
    try:
        import torch
    except ImportError:
        raise ProbeError("--backend torch: PyTorch is not installed") from None
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ProbeError("--backend torch: no CUDA/ROCm device visible to PyTorch (torch.cuda.is_available() is False)")
    check_support(torch, input, device, "--backend torch")

    def run(A, B, C):
        if C.dtype != np.float32:
            raise ProbeError("--backend torch: fp16 accumulators need --backend triton")
        if np.any(C.view(np.uint32) != 0):
            raise ProbeError("--backend torch: c must be +0 (a library GEMM adds C outside the instruction)")
        tA = _to_torch(torch, A, input, device)
        tB = _to_torch(torch, B, input, device)
        try:
            if input == "tf32":
                before = torch.backends.cuda.matmul.allow_tf32
                torch.backends.cuda.matmul.allow_tf32 = True
                try:
                    D = torch.bmm(tA, tB)
                finally:
                    torch.backends.cuda.matmul.allow_tf32 = before
            elif input in FP8:
                one = torch.ones((), dtype=torch.float32, device=device)
                D = torch.stack(
                    [
                        torch._scaled_mm(
                            tA[t], tB[t].t().contiguous().t(), scale_a=one, scale_b=one, out_dtype=torch.float32
                        )
                        for t in range(tA.shape[0])
                    ]
                )
            else:
                D = torch.bmm(tA, tB, out_dtype=torch.float32)
        except (TypeError, RuntimeError) as err:
            call = {"tf32": "torch.bmm (allow_tf32)"}.get(
                input, "torch._scaled_mm" if input in FP8 else "torch.bmm(..., out_dtype=torch.float32) (PyTorch ≥ 2.8)"
            )
            raise ProbeError(
                f"--backend torch: {call} failed for {input} on {device}: {' '.join(str(err).split())[:200]}"
            ) from None
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return D.float().cpu().numpy()

    return run


_TRITON_KERNEL = None


def triton_backend(device: str = "cuda", input: str = "fp16"):
    """``backend(A, B, C)`` through a Triton kernel computing ``tl.dot(a, b, acc=c)`` per tile
    (module docstring: tf32 with ``input_precision="tf32"``). Raises ProbeError when Triton,
    torch, the device or the format is missing, or the kernel does not compile."""
    global _TRITON_KERNEL
    try:
        import torch
        import triton
        import triton.language as tl
    except ImportError:
        raise ProbeError("--backend triton: Triton (and PyTorch) are not installed; try --backend torch") from None
    if not torch.cuda.is_available():
        raise ProbeError("--backend triton: no CUDA/ROCm device visible to PyTorch")
    check_support(torch, input, device, "--backend triton")

    if _TRITON_KERNEL is None:

        @triton.jit
        def _probe_dot(A, B, C, D, K: tl.constexpr, T: tl.constexpr, FP16_ACC: tl.constexpr, TF32: tl.constexpr):
            t = tl.program_id(0)
            rm = tl.arange(0, T)
            rn = tl.arange(0, T)
            rk = tl.arange(0, K)
            a = tl.load(A + t * T * K + rm[:, None] * K + rk[None, :])
            b = tl.load(B + t * K * T + rk[:, None] * T + rn[None, :])
            c = tl.load(C + t * T * T + rm[:, None] * T + rn[None, :])
            if FP16_ACC:
                d = tl.dot(a, b, acc=c, out_dtype=tl.float16)
            elif TF32:
                d = tl.dot(a, b, acc=c, input_precision="tf32", out_dtype=tl.float32)
            else:
                d = tl.dot(a, b, acc=c, out_dtype=tl.float32)
            tl.store(D + t * T * T + rm[:, None] * T + rn[None, :], d)

        _TRITON_KERNEL = _probe_dot

    def run(A, B, C):
        T, tile, K = A.shape
        if K < 16 or K & (K - 1):
            raise ProbeError(
                f"--backend triton: K = {K}; tl.dot needs a power of two ≥ 16 (fp16emu probe --k 16"
                + (", two chained k8 instructions; or --backend torch)" if input == "tf32" else ")")
            )
        tA, tB = _to_torch(torch, A, input, device), _to_torch(torch, B, input, device)
        tC = torch.from_numpy(np.ascontiguousarray(C)).to(device)
        tD = torch.empty_like(tC)
        try:
            _TRITON_KERNEL[(T,)](
                tA, tB, tC, tD, K=K, T=tile, FP16_ACC=C.dtype == np.float16, TF32=input == "tf32", num_warps=4
            )
            torch.cuda.synchronize()
        except Exception as err:  # noqa: BLE001 (a compile error of this format on this GPU: say which)
            raise ProbeError(
                f"--backend triton: tl.dot of {input} ({'fp16' if C.dtype == np.float16 else 'fp32'} accumulator) "
                f"failed on this GPU: {type(err).__name__}: {' '.join(str(err).split())[:200]}"
            ) from None
        return tD.cpu().numpy()

    return run


def _kernel_names(backend, A, B, C) -> list[str]:
    """Names of the GPU kernels one backend call launches (empty when the profiler is missing)."""
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
    except ImportError:
        return []
    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            backend(A, B, C)
            torch.cuda.synchronize()
        names = [
            e.name
            for e in prof.events()
            if getattr(e, "device_type", None) is not None and "cuda" in str(e.device_type).lower()
        ]
    except Exception as err:  # noqa: BLE001 (the profiler is optional: report why, measure anyway)
        return [f"(profiler unavailable: {type(err).__name__})"]
    return sorted(set(names))


#: the largest probe file read (a probe set of 10^6 rows of K = 256 is about 1 GiB)
MAX_PROBE_BYTES = 4 << 30


def _read_npz(path: str) -> dict:
    """Every array of the probe file ``path``: through fp16emu's checked loader
    (``validation.files.load_npz_file``) where fp16emu is installed; beside the script alone, the
    same checks in short: opened once without blocking (a FIFO or device is refused, never read),
    a regular file of at most :data:`MAX_PROBE_BYTES`, each member's declared size within the
    file and within deflate's largest ratio, no pickles, two members of one name refused."""

    def fail(why):
        return ProbeError(f"{path}: {why}")

    try:
        from validation.files import load_npz_file
    except ImportError:  # the script copied alone to the GPU machine
        return _read_npz_alone(path, fail)
    try:
        return load_npz_file(path, "probes", fail=fail, max_bytes=MAX_PROBE_BYTES)
    except ValueError as err:  # a member's own refusal (a ValueError naming it)
        raise ProbeError(f"{path}: {' '.join(str(err).split())}") from None


def _read_npz_alone(path: str, fail) -> dict:
    import io
    import os
    import stat
    import zipfile

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise fail("no such file") from None
    except OSError as err:
        raise fail(f"cannot be opened ({err.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise fail("is not a regular file (a FIFO, device or folder is not read)")
        if not 0 < st.st_size <= MAX_PROBE_BYTES:
            raise fail(f"is {st.st_size} bytes; a probe file holds 1 to {MAX_PROBE_BYTES} bytes")
        os.set_blocking(fh.fileno(), True)
        try:
            with zipfile.ZipFile(fh) as zf:
                infos = zf.infolist()
                names = [i.filename for i in infos]
                if len(set(names)) != len(names):
                    raise fail("holds two members of one name")
                out = {}
                for info in infos:
                    if info.file_size > min(MAX_PROBE_BYTES, 1100 * (info.compress_size + 64)):
                        raise fail(f"member {info.filename!r} declares {info.file_size} bytes: a damaged archive")
                    with zf.open(info) as member:
                        data = member.read(info.file_size + 1)
                    out[info.filename.removesuffix(".npy")] = np.load(io.BytesIO(data), allow_pickle=False)
                return out
        except ProbeError:
            raise
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError, RuntimeError) as err:
            raise fail(f"cannot read as .npz ({' '.join(str(err).split())[:120]})") from None


def _load(path: str):
    data = _read_npz(path)
    if any(n not in data for n in ("a", "b", "c")):
        raise ProbeError(f"{path}: expected an .npz with arrays a, b, c (fp16emu probe --out)")
    a, b, c = data["a"], data["b"], data["c"]
    inp = data.get("input")
    if inp is not None and (inp.ndim != 0 or inp.dtype.kind not in "US"):
        raise ProbeError(f"{path}: input: expected a format name, got a {inp.dtype} array of shape {inp.shape}")
    fmt = str(inp) if inp is not None else "fp16"
    if fmt not in FORMATS:
        raise ProbeError(f"{path}: input: {fmt[:40]!r} is not one of {', '.join(FORMATS)}")
    want = np.dtype(FORMATS[fmt][0])
    if a.dtype != want or b.dtype != want or a.ndim != 2 or a.shape != b.shape:
        raise ProbeError(
            f"{path}: a, b must be (R, K) {want} arrays of {fmt} patterns of one shape, "
            f"got {a.shape} {a.dtype}, {b.shape} {b.dtype}"
        )
    if c.dtype not in (np.uint32, np.uint16) or c.shape != (a.shape[0],):
        raise ProbeError(f"{path}: c must be ({a.shape[0]},) uint32 or uint16, got {c.shape} {c.dtype}")
    extra = {n: data[n] for n in data if n not in ("a", "b", "c", "d")}
    return a, b, c, extra, fmt


def run_file(path: str, out: str, backend_name: str, device: str = "cuda", backend=None) -> dict:
    """Measure the probe file ``path`` and write ``out``; ``backend``: a callable to use instead of
    ``backend_name`` (tests). Returns a summary dict (rows, backend, kernels, differing rows)."""
    a, b, c, extra, fmt = _load(path)
    notes = []
    if backend is None:
        if backend_name == "torch":
            backend = torch_backend(device, fmt)
        elif backend_name == "triton":
            backend = triton_backend(device, fmt)
        else:
            raise ProbeError(f"--backend: {backend_name!r} is not one of triton, torch")
    tile = FP8_TILE if fmt in FP8 and backend_name == "triton" else TILE
    if backend_name == "torch":
        if c.dtype == np.uint16:
            raise ProbeError("--backend torch: fp16 accumulators need --backend triton")
        c = np.zeros_like(c)  # the library adds C outside the instruction: measure c = +0
        notes.append("torch backend: c replaced by +0 (library GEMMs add C outside the matrix instruction)")
    d, differing = measure(a, b, c, backend, tile=tile, input=fmt)
    kernels = (
        _kernel_names(backend, *pack(a[:tile], b[:tile], c[:tile], tile=tile, input=fmt))
        if backend_name in ("torch", "triton")
        else []
    )
    checks = notes + [f"invariance: {differing.size} of {a.shape[0]} rows differ when rows are shuffled across tiles"]
    arrays = dict(extra)
    arrays.update(
        a=a,
        b=b,
        c=c,
        d=d,
        input=np.array(fmt),
        backend=np.array(f"{backend_name} on {device}, {fmt} operands, {tile}-row tiles"),
        kernels=np.array(kernels if kernels else ["(not recorded)"]),
        checks=np.array(checks),
        differing_rows=differing.astype(np.int64),
    )
    try:
        _save_atomically(out, arrays)
    except OSError as err:
        raise ProbeError(f"--out: cannot write {out!r} ({err.strerror or err})") from None
    return {
        "rows": int(a.shape[0]),
        "k": int(a.shape[1]),
        "input": fmt,
        "backend": backend_name,
        "kernels": kernels,
        "differing_rows": int(differing.size),
        "checks": checks,
    }


def _default_backend() -> str:
    try:
        import triton  # noqa: F401
    except ImportError:
        return "torch"
    return "triton"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="probe_gpu",
        description="Run an fp16emu probe set (fp16, bf16, tf32, e4m3, e5m2, e4m3fnuz or e5m2fnuz operands, "
        "named by its input entry) on a GPU. Triton (default when installed): one tl.dot per tile with c as "
        "the instruction's accumulator (fp8 on 64-row tiles, so Hopper uses wgmma; tf32 needs K >= 16). torch: "
        "torch.bmm (fp16, bf16; tf32 with allow_tf32) or torch._scaled_mm (fp8), whole library kernels that "
        "add no C: c = +0 only, fp32 outputs only. Formats the GPU or torch lacks are refused (exit 2).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("probes", help="the probe .npz (fp16emu probe --out)")
    parser.add_argument("--out", default=None, help="results .npz (default: PROBES with .out.npz)")
    parser.add_argument("--backend", default=None, help="triton (default when installed) or torch")
    parser.add_argument("--device", default="cuda", help="torch device (default cuda; ROCm builds also say cuda)")
    args = parser.parse_args(argv)
    out = args.out or (args.probes.removesuffix(".npz")) + ".out.npz"
    try:
        summary = run_file(args.probes, out, args.backend or _default_backend(), args.device)
    except ProbeError as err:
        print(f"probe_gpu: error: {err}", file=sys.stderr)
        return 2
    print(
        f"wrote {out}: {summary['rows']} rows of K = {summary['k']}, {summary['input']} operands, "
        f"through {summary['backend']}"
    )
    for line in summary["checks"]:
        print(f"  {line}")
    if summary["kernels"]:
        print("  kernels launched: " + "; ".join(summary["kernels"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
