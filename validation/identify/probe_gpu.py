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

__all__ = ["TILE", "main", "measure", "pack", "torch_backend", "triton_backend", "unpack"]

TILE = 16


class ProbeError(Exception):
    """A bad input file or an unavailable backend: one line on stderr, exit 2."""


def pack(a: np.ndarray, b: np.ndarray, c: np.ndarray, order: np.ndarray | None = None):
    """Tiles (A, B, C) of fp16/fp32 values for rows a, b (R, K) uint16 and c (R,) patterns:
    A (T, 16, K) float16, B (T, K, 16) float16, C (T, 16, 16) float32 (float16 for uint16 c)
    with c on the diagonals and +0 elsewhere; ``order``: the rows in tile order (default 0…R−1;
    the last tile is padded with zero rows)."""
    R, K = a.shape
    order = np.arange(R) if order is None else np.asarray(order)
    T = -(-R // TILE)
    pad = T * TILE - R
    idx = np.concatenate([order, np.full(pad, -1)])
    fp16_acc = c.dtype == np.uint16
    a16 = np.where(idx[:, None] >= 0, a[idx], 0).astype(np.uint16).view(np.float16)
    b16 = np.where(idx[:, None] >= 0, b[idx], 0).astype(np.uint16).view(np.float16)
    cvals = np.where(idx >= 0, c[idx], 0).astype(c.dtype).view(np.float16 if fp16_acc else np.float32)
    A = a16.reshape(T, TILE, K)
    B = np.ascontiguousarray(b16.reshape(T, TILE, K).transpose(0, 2, 1))
    C = np.zeros((T, TILE, TILE), cvals.dtype)
    diag = np.arange(TILE)
    C[:, diag, diag] = cvals.reshape(T, TILE)
    return A, B, C


def unpack(D: np.ndarray, R: int, order: np.ndarray | None = None) -> np.ndarray:
    """The bit patterns of the diagonals of D (T, 16, 16), as rows 0…R−1 (``order`` as in
    :func:`pack`): uint32 for float32 D, uint16 for float16 D."""
    D = np.asarray(D)
    if D.dtype not in (np.float32, np.float16):
        raise ProbeError(f"backend returned {D.dtype}; expected float32 or float16")
    diag = np.arange(TILE)
    flat = D[:, diag, diag].reshape(-1)
    order = np.arange(R) if order is None else np.asarray(order)
    out = np.empty(R, D.dtype)
    out[order] = flat[:R]
    return out.view(np.uint16 if D.dtype == np.float16 else np.uint32)


def measure(a: np.ndarray, b: np.ndarray, c: np.ndarray, backend, seed: int = 0):
    """(d, differing): d (R,) the output bits of every row through ``backend(A, B, C) -> D``
    (numpy in, numpy out; see :func:`pack`), and the rows whose bits changed when the run was
    repeated with the rows shuffled across and within tiles (NaN payloads aside)."""
    R = a.shape[0]
    d = unpack(backend(*pack(a, b, c)), R)
    order = np.random.default_rng(seed).permutation(R)
    d2 = unpack(backend(*pack(a, b, c, order)), R, order)
    differing = np.flatnonzero((d != d2) & ~(_is_nan(d) & _is_nan(d2)))
    return d, differing


def _is_nan(bits: np.ndarray) -> np.ndarray:
    if bits.dtype == np.uint16:
        return ((bits & 0x7C00) == 0x7C00) & ((bits & 0x03FF) != 0)
    return ((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x007FFFFF) != 0)


def torch_backend(device: str = "cuda"):
    """``backend(A, B, C)`` through ``torch.bmm(A, B, out_dtype=torch.float32)`` on ``device``;
    C must be all zero (module docstring). Raises ProbeError when torch, the device or the
    out_dtype overload is missing."""
    try:
        import torch
    except ImportError:
        raise ProbeError("--backend torch: PyTorch is not installed") from None
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ProbeError("--backend torch: no CUDA/ROCm device visible to PyTorch (torch.cuda.is_available() is False)")

    def run(A, B, C):
        if C.dtype != np.float32:
            raise ProbeError("--backend torch: fp16 accumulators need --backend triton")
        if np.any(C.view(np.uint32) != 0):
            raise ProbeError("--backend torch: c must be +0 (a library GEMM adds C outside the instruction)")
        tA = torch.from_numpy(A).to(device)
        tB = torch.from_numpy(B).to(device)
        try:
            D = torch.bmm(tA, tB, out_dtype=torch.float32)
        except (TypeError, RuntimeError) as err:
            raise ProbeError(
                f"--backend torch: torch.bmm(..., out_dtype=torch.float32) failed on {device} "
                f"(needs PyTorch ≥ 2.8): {' '.join(str(err).split())[:200]}"
            ) from None
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return D.cpu().numpy()

    return run


_TRITON_KERNEL = None


def triton_backend(device: str = "cuda"):
    """``backend(A, B, C)`` through a Triton kernel computing ``tl.dot(a, b, acc=c)`` per tile
    (module docstring). Raises ProbeError when Triton, torch or the device is missing."""
    global _TRITON_KERNEL
    try:
        import torch
        import triton
        import triton.language as tl
    except ImportError:
        raise ProbeError("--backend triton: Triton (and PyTorch) are not installed; try --backend torch") from None
    if not torch.cuda.is_available():
        raise ProbeError("--backend triton: no CUDA/ROCm device visible to PyTorch")

    if _TRITON_KERNEL is None:

        @triton.jit
        def _probe_dot(A, B, C, D, K: tl.constexpr, FP16_ACC: tl.constexpr):
            t = tl.program_id(0)
            rm = tl.arange(0, 16)
            rn = tl.arange(0, 16)
            rk = tl.arange(0, K)
            a = tl.load(A + t * 16 * K + rm[:, None] * K + rk[None, :])
            b = tl.load(B + t * K * 16 + rk[:, None] * 16 + rn[None, :])
            c = tl.load(C + t * 256 + rm[:, None] * 16 + rn[None, :])
            if FP16_ACC:
                d = tl.dot(a, b, acc=c, out_dtype=tl.float16)
            else:
                d = tl.dot(a, b, acc=c, out_dtype=tl.float32)
            tl.store(D + t * 256 + rm[:, None] * 16 + rn[None, :], d)

        _TRITON_KERNEL = _probe_dot

    def run(A, B, C):
        T, _, K = A.shape
        if K < 16 or K & (K - 1):
            raise ProbeError(f"--backend triton: K = {K}; tl.dot needs a power of two ≥ 16 (fp16emu probe --k 16)")
        tA, tB, tC = (torch.from_numpy(np.ascontiguousarray(x)).to(device) for x in (A, B, C))
        tD = torch.empty_like(tC)
        _TRITON_KERNEL[(T,)](tA, tB, tC, tD, K=K, FP16_ACC=C.dtype == np.float16)
        torch.cuda.synchronize()
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


def _load(path: str):
    try:
        data = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise ProbeError(f"{path}: no such file") from None
    except (OSError, ValueError) as err:
        raise ProbeError(f"{path}: cannot read as .npz ({' '.join(str(err).split())})") from None
    if not hasattr(data, "files") or any(n not in data.files for n in ("a", "b", "c")):
        raise ProbeError(f"{path}: expected an .npz with arrays a, b, c (fp16emu probe --out)")
    a, b, c = data["a"], data["b"], data["c"]
    if a.dtype != np.uint16 or b.dtype != np.uint16 or a.ndim != 2 or a.shape != b.shape:
        raise ProbeError(
            f"{path}: a, b must be (R, K) uint16 arrays of one shape, got {a.shape} {a.dtype}, {b.shape} {b.dtype}"
        )
    if c.dtype not in (np.uint32, np.uint16) or c.shape != (a.shape[0],):
        raise ProbeError(f"{path}: c must be ({a.shape[0]},) uint32 or uint16, got {c.shape} {c.dtype}")
    extra = {n: data[n] for n in data.files if n not in ("a", "b", "c", "d")}
    return a, b, c, extra


def run_file(path: str, out: str, backend_name: str, device: str = "cuda", backend=None) -> dict:
    """Measure the probe file ``path`` and write ``out``; ``backend``: a callable to use instead of
    ``backend_name`` (tests). Returns a summary dict (rows, backend, kernels, differing rows)."""
    a, b, c, extra = _load(path)
    notes = []
    if backend is None:
        if backend_name == "torch":
            backend = torch_backend(device)
        elif backend_name == "triton":
            backend = triton_backend(device)
        else:
            raise ProbeError(f"--backend: {backend_name!r} is not one of triton, torch")
    if backend_name == "torch":
        if c.dtype == np.uint16:
            raise ProbeError("--backend torch: fp16 accumulators need --backend triton")
        c = np.zeros_like(c)  # the library adds C outside the instruction: measure c = +0
        notes.append("torch backend: c replaced by +0 (library GEMMs add C outside the matrix instruction)")
    d, differing = measure(a, b, c, backend)
    kernels = _kernel_names(backend, *pack(a[:TILE], b[:TILE], c[:TILE])) if backend_name in ("torch", "triton") else []
    checks = notes + [f"invariance: {differing.size} of {a.shape[0]} rows differ when rows are shuffled across tiles"]
    arrays = dict(extra)
    arrays.update(
        a=a,
        b=b,
        c=c,
        d=d,
        backend=np.array(f"{backend_name} on {device}"),
        kernels=np.array(kernels if kernels else ["(not recorded)"]),
        checks=np.array(checks),
        differing_rows=differing.astype(np.int64),
    )
    try:
        np.savez(out, **arrays)
    except OSError as err:
        raise ProbeError(f"--out: cannot write {out!r} ({err.strerror or err})") from None
    return {
        "rows": int(a.shape[0]),
        "k": int(a.shape[1]),
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
    parser = argparse.ArgumentParser(prog="probe_gpu", description="Run an fp16emu probe set on a GPU.")
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
    print(f"wrote {out}: {summary['rows']} rows of K = {summary['k']} through {summary['backend']}")
    for line in summary["checks"]:
        print(f"  {line}")
    if summary["kernels"]:
        print("  kernels launched: " + "; ".join(summary["kernels"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
