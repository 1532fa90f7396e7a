"""fp32 GEMMs on the CUDA cores (SIMT): one chain of fp32 fused multiply-adds per output.

A SIMT GEMM such as CUTLASS's ``cutlass_80_simt_sgemm_128x64_8x5_nn_align1`` (the kernel cuBLAS
runs for fp32 operands without TF32: PyTorch's ``allow_tf32 = False``) gives every thread a
block of outputs and keeps one fp32 accumulator per output. Its thread-level MMA
(``include/cutlass/gemm/thread/mma_sm50.h``, github.com/NVIDIA/cutlass, ``MmaGeneric``: ``for k``
outermost, then n, then m) calls ``arch::Mma<GemmShape<1, 1, 1>, 1, float, …>``
(``include/cutlass/arch/mma_sm50.h``), ``d = a * b + c``, which nvcc contracts to one ``FFMA``
(its default ``--fmad=true``): per output

    c ← RN32(a_k·b_k + c)        (one rounding, to nearest even, per k)

for k ascending through the warp's k slices, the threadblock's k tiles (8 wide for ``_8x5``)
and the mainloop over K. The order in which the k tiles reach one output is therefore K
ascending; k tiles, stages and the thread's m/n serpentine change nothing in an output's bits.

**Split-K** (``GemmSplitKParallel``, and cuBLAS's ``splitKreduce_kernel`` after the sgemm): K is
cut into splits, each split's chain starts from +0 and is written to a workspace slice; the
reduction kernel (CUTLASS ``include/cutlass/reduction/kernel/reduce_split_k.h``,
``ReduceSplitK::reduce``) clears an fp32 accumulator (+0), adds the partitions in partition
order (``reduction_op``: ``thread/reduction_operators.h`` ``ReduceAdd``, one fp32 add each) and
applies the output operator (``epilogue/thread/linear_combination.h``: RN32(alpha·acc + beta·C)
with beta·C rounded first). In :class:`emu.schedule.Schedule` words: ``reduction="workspace"``
(partials added onto +0 in split order), ``c_entry="epilogue"``, ``alpha``, ``beta``. cuBLAS's
``splitKreduce_kernel`` is closed source; its public counterpart in cuBLASLt is the
``CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE`` split-K reduction (docs.nvidia.com/cuda/cublas,
``cublasLtReductionScheme_t``: partial results kept in the compute type, fp32 here, in a
workspace and reduced in a separate step). The partition order of CUTLASS's reduction is
assumed for it, and its split count and split boundaries are the schedule's (found from
outputs, as for the tensor-core GEMMs). CUTLASS's device-level driver of the two kernels is
``include/cutlass/gemm/device/gemm_splitk_parallel.h``.

The arithmetic is exact: fp32 products have 48 significant bits, exact in float64; the sum
c + a·b is taken in float64 with its error (TwoSum, Knuth TAOCP vol. 2 §4.2.2) and rounded to
fp32 once, correcting the one case where rounding twice differs (the float64 sum lands exactly
on a midpoint between two fp32 values while the exact sum does not). So every step is the IEEE
754 fusedMultiplyAdd of binary32 operands, subnormals, signed zeros, infinities and NaN
included (:func:`fma_gemm`).

The FMA unit also multiplies fp16, bf16, tf32 and fp8 operands (``emu.kernels.fma``); this module
is the fp32-operand case, whose products do not fit in fp32 (so the float32 multiply-then-add of
that kernel would round twice). :func:`is_fp32_fma` says whether a unit is the FMA unit, whose
arithmetic on fp32 operands this is.
"""

from __future__ import annotations

import numpy as np

from .dot import unit_params
from .gemm import GemmOrder, as_schedule, chain_operands, combine
from .jit import jit, run_tasks
from .schedule import Schedule
from .units import Family, Rounding, UnitParams

__all__ = [
    "fma32_scalar",
    "fma_gemm",
    "fma_gemm_in_order",
    "fp32_values",
    "is_fp32_fma",
    "splitk_schedule",
    "FMA32_PARAMS",
    "SGEMM_K_TILE",
]

#: the threadblock k tile of CUTLASS's ``cutlass_80_simt_sgemm_128x64_8x5`` (the ``8`` of ``8x5``)
SGEMM_K_TILE = 8

#: the parameters of the fp32 FMA unit (what :func:`emu.gemm.combine` needs of it: fp32 output)
FMA32_PARAMS = UnitParams(family=int(Family.FMA), group_size=1, output_rounding=int(Rounding.RNE))

_FLT_MAX = float(np.finfo(np.float32).max)
_OVERFLOW_MID = 2.0**128 - 2.0**103  # halfway between FLT_MAX and 2^128: RNE sends it to infinity


@jit
def _fma(a, b, c):
    """RN32(a·b + c) of three float32 scalars, one rounding (see the module docstring)."""
    p = np.float64(a) * np.float64(b)  # exact: 48 significant bits, exponents within float64's
    cc = np.float64(c)
    s = p + cc
    r = np.float32(s)
    if not np.isfinite(s):
        return r
    bb = s - p
    err = (p - (s - bb)) + (cc - bb)  # TwoSum: s + err = p + c exactly
    if err == 0.0:
        return r
    if np.isinf(r):  # s at or past the overflow midpoint
        if s == _OVERFLOW_MID and err < 0.0:
            return np.float32(_FLT_MAX)
        if s == -_OVERFLOW_MID and err > 0.0:
            return np.float32(-_FLT_MAX)
        return r
    r64 = np.float64(r)
    if r64 == s:  # s is an fp32 value; p + c lies within half a float64 ulp of it: RN32 is r
        return r
    other = np.nextafter(r, np.float32(np.inf) if s > r64 else np.float32(-np.inf))
    o64 = np.float64(other)
    if np.isinf(other) or s != (r64 + o64) * 0.5:  # not a midpoint: RN32(s) = RN32(p + c)
        return r
    # s is exactly the midpoint; the exact sum lies on err's side of it
    if (err > 0.0) == (o64 > r64):
        return other
    return r


@jit
def fma32_scalar(a, b, c):
    """RN32(a·b + c) of three float32 scalars: the IEEE binary32 fusedMultiplyAdd."""
    return _fma(a, b, c)


def _chains(A, B, C, out):
    """out[m, n] = the chain c ← RN32(A[m, k]·B[k, n] + c), k = 0 … K−1, from c = C[m, n]
    (C of out's shape); parallel over rows."""
    run_tasks(lambda t0, t1: _chains_tasks(A, B, C, out, t0, t1), A.shape[0])


@jit
def _chains_tasks(A, B, C, out, t0, t1):
    """Tasks ``t0`` … ``t1`` − 1 of :func:`_chains`."""
    M, K = A.shape
    N = B.shape[1]
    for m in range(t0, min(t1, M)):
        acc = np.empty(N, np.float32)
        for n in range(N):
            acc[n] = C[m, n]
        for k in range(K):
            a = A[m, k]
            Bk = B[k]
            for n in range(N):
                acc[n] = _fma(a, Bk[n], acc[n])
        for n in range(N):
            out[m, n] = acc[n]


def fp32_values(x, name: str) -> np.ndarray:
    """``x`` (float32 values or uint32 fp32 bit patterns) as float32 values; TypeError otherwise
    (a float64 array is never rounded silently)."""
    x = np.asarray(x)
    if x.dtype == np.uint32:
        return x.view(np.float32)
    if x.dtype != np.float32:
        raise TypeError(f"{name}: expected float32 values or uint32 bit patterns, got dtype {x.dtype}")
    return x


def is_fp32_fma(unit) -> bool:
    """Whether ``unit`` (an ``emu.UnitParams`` or anything with ``params``) is the fp32 FMA unit
    (family FMA, one product per step, RNE, no flushes): the unit whose arithmetic on fp32
    operands this module computes. Its input-format tag names what it multiplies in fp16, bf16
    or fp8 problems; fp32 operands reach ``FFMA`` / ``v_fma_f32`` whole."""
    p = unit_params(unit)
    return (
        p.family == Family.FMA
        and p.group_size == 1
        and p.output_rounding == Rounding.RNE
        and not (p.flush_inputs or p.flush_c or p.flush_output)
    )


def splitk_schedule(
    splits: int = 1,
    *,
    k_tile: int = SGEMM_K_TILE,
    alpha: float = 1.0,
    beta: float = 0.0,
    split_bounds: tuple[int, ...] | None = None,
) -> Schedule:
    """The accumulation schedule of a SIMT sgemm (:func:`fma_gemm`) with parallel split-K:
    ``splits`` ranges of ``k_tile``-wide k tiles (as even as possible, or at ``split_bounds``,
    tile indices), each chain from +0, the partials added onto +0 in split order and the
    epilogue RN32(alpha·acc + RN32(beta·C)): CUTLASS's ``GemmSplitKParallel`` with
    ``ReduceSplitK`` (``include/cutlass/reduction/kernel/reduce_split_k.h``) and, by assumption
    (closed source), cuBLAS's sgemm + ``splitKreduce_kernel``. One split: one chain, then the
    same epilogue."""
    if splits == 1 and split_bounds is None:
        return Schedule(k_tile=k_tile, c_entry="epilogue", alpha=alpha, beta=beta)
    return Schedule(
        k_tile=k_tile,
        splits=splits,
        split_bounds=split_bounds,
        reduction="workspace",
        c_entry="epilogue",
        alpha=alpha,
        beta=beta,
    )


def _run_chain(A, B, C0) -> np.ndarray:
    out = np.empty((A.shape[0], B.shape[1]), np.float32)
    if out.size:
        C0 = np.ascontiguousarray(np.broadcast_to(C0, out.shape), np.float32)
        _chains(np.ascontiguousarray(A, np.float32), np.ascontiguousarray(B, np.float32), C0, out)
    return out


def fma_gemm_in_order(A_seq: np.ndarray, B_seq: np.ndarray, C=None, order: GemmOrder | Schedule | None = None):
    """:func:`fma_gemm` on operands already in accumulation order: ``A_seq`` (M, K') and
    ``B_seq`` (K', N) float32, column/row i holding gemmK index ``order.sequence(K)[i]`` (+0 for
    padding), as :func:`emu.gemm.operand_in_order` lays them out."""
    schedule = as_schedule(order)
    if schedule.instruction_k > 1:
        raise ValueError(f"instruction_k: the FMA unit takes one product per step, got {schedule.instruction_k}")
    A_seq, B_seq = fp32_values(A_seq, "A_seq"), fp32_values(B_seq, "B_seq")
    if A_seq.ndim != 2 or B_seq.ndim != 2 or A_seq.shape[1] != B_seq.shape[0]:
        raise ValueError(f"A, B: need (M, K) and (K, N), got {A_seq.shape} and {B_seq.shape}")
    shape = (A_seq.shape[0], B_seq.shape[1])
    C0 = None
    if C is not None:
        C0 = np.asarray(fp32_values(C, "C"))
        if np.broadcast_shapes(C0.shape, shape) != shape:
            raise ValueError(f"C: shape {C0.shape} does not broadcast to the output's {shape}")
        C0 = np.ascontiguousarray(np.broadcast_to(C0, shape))
    zero = np.zeros((1, 1), np.float32)
    partials = []
    for i, s in enumerate(schedule.split_ranges(A_seq.shape[1])):
        acc = None
        for j, r in enumerate(schedule.promotion_ranges(s)):
            start = C0 if (i == 0 and j == 0 and C0 is not None and schedule.c_entry == "chain") else zero
            part = _run_chain(*chain_operands(A_seq, B_seq, r, schedule), start)
            with np.errstate(invalid="ignore", over="ignore"):
                acc = part if acc is None else acc + part
        partials.append(acc)
    return combine(FMA32_PARAMS, partials, C0, schedule)


def fma_gemm(A, B, C=None, order: GemmOrder | Schedule | None = None) -> np.ndarray:
    """C + A·B as a SIMT fp32 GEMM computes it: per output a chain of IEEE fp32 fused
    multiply-adds (c ← RN32(a_k·b_k + c)) in the accumulation order of ``order``
    (:class:`emu.GemmOrder`, :class:`emu.schedule.Schedule`, or None: k ascending, one chain
    from C).

    A (M, K), B (K, N): float32 values or uint32 fp32 patterns, used whole (no tf32 rounding);
    C (float32, broadcastable to (M, N)) or None for +0. With splits, each split's chain starts
    from +0 (split 0 from C when ``c_entry="chain"``), the partials are reduced as
    ``schedule.reduction`` says, and the epilogue is the schedule's (:func:`emu.gemm.finish`):
    CUTLASS's split-K sgemm with ``ReduceSplitK`` (and cuBLAS's sgemm + ``splitKreduce_kernel``)
    is ``Schedule(splits=s, k_tile=8, reduction="workspace", c_entry="epilogue", alpha=…,
    beta=…)``. Returns (M, N) float32 (or the schedule's ``output`` format)."""
    A, B = fp32_values(A, "A"), fp32_values(B, "B")
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"A, B: need (M, K) and (K, N), got {A.shape} and {B.shape}")
    seq = as_schedule(order).sequence(A.shape[1])
    idx = np.where(seq < 0, 0, seq)
    pad = seq < 0
    A_seq, B_seq = A[:, idx], B[idx]
    if pad.any():
        A_seq[:, pad] = 0
        B_seq[pad] = 0
    return fma_gemm_in_order(A_seq, B_seq, C, order)
