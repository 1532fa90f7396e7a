"""GEMM through a unit, with an explicit accumulation order.

``GemmOrder`` says everything about the order that changes the arithmetic:

* ``k_order``: the sequence in which gemmK indices are fed to the unit (a permutation of
  range(K)); the unit then takes consecutive groups of that sequence. A k-reduction instruction
  that spreads its k over input blocks is a permutation (:func:`strided_k_order`).
* ``pad_k``: zero padding of gemmK up to a multiple (padding kernels); zero products only change
  the sign of zero, or, for truncating units, the exponent they align to.
* ``split_k`` and ``combine``: the K sequence is cut into ``split_k`` contiguous chunks, each
  accumulated from +0, and the chunk results are added into a zeroed fp32 workspace one by one
  (atomic adds, RNE): in ascending chunk order (``"ascending"``) or in a seeded random order
  (``"random"``); :func:`split_partials` keeps the chunk results apart, for ensembles of add
  orders (:mod:`emu.atomics`).

M and N never change the arithmetic of an output; their padding is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .atomics import SplitPartials, add_order
from .dot import accumulator_values, compact_c, decode_operands, fp16_operand, run_kernel, unit_params
from .units import Format

__all__ = ["GemmOrder", "gemm", "gemm_decoded", "operand_in_order", "split_partials", "strided_k_order"]


#: Bounds of GemmOrder's integer fields: beyond them no kernel runs, and padding alone would
#: exhaust memory.
MAX_PAD_K = 1 << 16
MAX_SPLIT_K = 1 << 12


@dataclass(frozen=True)
class GemmOrder:
    k_order: tuple[int, ...] | None = None
    pad_k: int = 1
    split_k: int = 1
    combine: str = "ascending"
    combine_seed: int = 0
    notes: str = field(default="", compare=False)

    def __post_init__(self):
        for name in ("pad_k", "split_k", "combine_seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise ValueError(f"{name}: must be a whole number, got {value!r}")
        if not 1 <= self.pad_k <= MAX_PAD_K:
            raise ValueError(f"pad_k: must be in 1..{MAX_PAD_K} (a multiple gemmK is padded to), got {self.pad_k}")
        if not 1 <= self.split_k <= MAX_SPLIT_K:
            raise ValueError(f"split_k: must be in 1..{MAX_SPLIT_K}, got {self.split_k}")
        if self.k_order is not None:
            bad = [k for k in self.k_order if isinstance(k, bool) or not isinstance(k, (int, np.integer))]
            if bad:
                raise ValueError(f"k_order: gemmK indices must be whole numbers, got {bad[0]!r}")
            seq = np.sort(np.asarray(self.k_order, dtype=np.int64))
            if not np.array_equal(seq, np.arange(len(seq))):
                raise ValueError(f"k_order: must be a permutation of range({len(self.k_order)}), each index once")
        if self.combine not in ("ascending", "random"):
            raise ValueError(f"combine: {self.combine!r} is not one of 'ascending', 'random'")

    def sequence(self, K: int) -> np.ndarray:
        """The gemmK indices in accumulation order, −1 marking padding zeros."""
        if self.k_order is None:
            seq = np.arange(K)
        else:
            seq = np.asarray(self.k_order, dtype=np.int64)
            if seq.shape != (K,) or not np.array_equal(np.sort(seq), np.arange(K)):
                raise ValueError(f"k_order: must be a permutation of range({K})")
        padded = -(-K // self.pad_k) * self.pad_k
        return np.concatenate([seq, np.full(padded - K, -1, np.int64)])

    def chunks(self, length: int) -> list[slice]:
        """Contiguous split-K chunks of the accumulation sequence (as even as possible)."""
        bounds = np.linspace(0, length, self.split_k + 1).round().astype(int)
        return [slice(int(b0), int(b1)) for b0, b1 in zip(bounds[:-1], bounds[1:])]


def strided_k_order(K: int, tile: int, group: int) -> tuple[int, ...]:
    """k order of a k-reduction instruction: within each ``tile``-wide k block the unit's groups
    are {b, b + tile/group, b + 2·tile/group, …} (16x16x16f16: tile 16, group 4 → {b, b+4, b+8,
    b+12}). A trailing partial tile keeps its natural order."""
    for name, value in (("K", K), ("tile", tile), ("group", group)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < (0 if name == "K" else 1):
            raise ValueError(f"{name}: must be a whole number ≥ {0 if name == 'K' else 1}, got {value!r}")
    if tile % group:
        raise ValueError(f"tile: {tile} is not a multiple of group {group}")
    stride = tile // group
    order = []
    full = K - K % tile
    for t0 in range(0, full, tile):
        for b in range(stride):
            order.extend(t0 + b + stride * i for i in range(group))
    order.extend(range(full, K))
    return tuple(order)


def _gather(bits: np.ndarray, seq: np.ndarray, axis: int) -> np.ndarray:
    """Operand bit patterns in accumulation order along ``axis``; −1 entries are +0. The
    identity order is the operand itself (a view)."""
    if len(seq) == bits.shape[axis] and np.array_equal(seq, np.arange(len(seq))):
        return bits
    taken = np.take(bits, np.where(seq < 0, 0, seq), axis=axis)
    zero_shape = [1, 1]
    zero_shape[axis] = len(seq)
    return np.where((seq < 0).reshape(zero_shape), np.uint16(0), taken)


def operand_in_order(bits: np.ndarray, seq: np.ndarray, axis: int, flush: bool) -> np.ndarray:
    """float32 values of the fp16 operand ``bits`` (uint16 patterns, 2-D) with its gemmK axis
    (``axis``: 1 for A, 0 for B) in the accumulation order ``seq`` (:meth:`GemmOrder.sequence`;
    −1 entries are +0); with ``flush``, |x| < 2^-14 becomes +0. What :func:`gemm` feeds the
    unit, for callers that run several units on the same operands (:func:`gemm_decoded`)."""
    return decode_operands(_gather(bits, seq, axis), flush)


def _prepare(A, B, unit, order):
    params = unit_params(unit)
    a_bits, b_bits = fp16_operand(A, "A"), fp16_operand(B, "B")
    if a_bits.ndim != 2 or b_bits.ndim != 2 or a_bits.shape[1] != b_bits.shape[0]:
        raise ValueError(f"A, B: need (M, K) and (K, N), got {a_bits.shape} and {b_bits.shape}")
    order = order or GemmOrder()
    seq = order.sequence(a_bits.shape[1])
    flush = bool(params.flush_inputs)
    A_seq = operand_in_order(a_bits, seq, 1, flush)
    B_seq = operand_in_order(b_bits, seq, 0, flush)
    return params, A_seq, B_seq, order


def _partials(params, A_seq, B_seq, order, C):
    if order.split_k == 1:
        return run_kernel(params, A_seq, B_seq, C)[None]
    zero = np.zeros((1, 1), np.float32)
    return np.stack(
        [
            run_kernel(params, np.ascontiguousarray(A_seq[:, s]), np.ascontiguousarray(B_seq[s]), zero)
            for s in order.chunks(A_seq.shape[1])
        ]
    )


def _output(params, out: np.ndarray) -> np.ndarray:
    return out.astype(np.float16) if params.output_format == Format.FP16 else out


def gemm(A, B, C, unit, order: GemmOrder | None = None) -> np.ndarray:
    """C + A·B through ``unit`` in ``order``, the GEMM form of :func:`emu.dot_add` (same argument
    order, same result type).

    A (M, K) and B (K, N) fp16 (or uint16 patterns); C (M, N) or broadcastable to it, float32
    (float16 for a unit with fp16 output), or None for +0. Returns (M, N) float32 (float16 for
    fp16-output units). With split-K the chunk results are added onto C in ascending chunk order,
    or, with ``order.combine == "random"``, in the order :func:`emu.atomics.add_order` draws for
    member 0 of the generator seeded ``order.combine_seed`` (one order for the whole GEMM).
    """
    params, A_seq, B_seq, order = _prepare(A, B, unit, order)
    return _gemm_in_order(params, A_seq, B_seq, C, order)


def gemm_decoded(A_seq: np.ndarray, B_seq: np.ndarray, C, unit, order: GemmOrder | None = None) -> np.ndarray:
    """:func:`gemm` on operands already in the unit's accumulation order: ``A_seq`` (M, K') and
    ``B_seq`` (K', N) float32 fp16 values as :func:`operand_in_order` returns them for
    ``order.sequence(K)`` (K' its length, padding included) and the unit's ``flush_inputs``.
    The same bits as ``gemm(A, B, C, unit, order)``; several units that share an order and a
    flush setting can share one decode."""
    params = unit_params(unit)
    order = order or GemmOrder()
    for name, x in (("A_seq", A_seq), ("B_seq", B_seq)):
        if not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim != 2:
            raise TypeError(f"{name}: expected a 2-D float32 array of fp16 values, got {getattr(x, 'dtype', type(x))}")
    if A_seq.shape[1] != B_seq.shape[0]:
        raise ValueError(f"A_seq, B_seq: need (M, K) and (K, N), got {A_seq.shape} and {B_seq.shape}")
    return _gemm_in_order(params, A_seq, B_seq, C, order)


def _gemm_in_order(params, A_seq, B_seq, C, order):
    shape = (A_seq.shape[0], B_seq.shape[1])
    C0 = (
        np.zeros((1, 1), np.float32)
        if C is None
        else compact_c(accumulator_values(C, params.output_format).astype(np.float32), shape, *shape)
    )
    if order.split_k == 1:
        return _output(params, _partials(params, A_seq, B_seq, order, C0)[0])
    partials = _partials(params, A_seq, B_seq, order, None)
    if order.combine == "random":
        chunk_order = add_order(order.split_k, order.combine_seed, 0)
    else:
        chunk_order = range(order.split_k)
    ws = np.broadcast_to(C0, shape).astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):  # inf + -inf is NaN, a huge sum inf: IEEE, not an error
        for s in chunk_order:
            ws = ws + partials[s]
    return _output(params, ws)


def split_partials(A, B, unit, order: GemmOrder, seed: int = 0) -> SplitPartials:
    """The split-K partial sums of ``gemm(A, B, None, unit, order)``, element (m, n) at m·N + n,
    as :class:`emu.atomics.SplitPartials` whose members are the GEMM with the chunk results added
    in counter-based random orders (``seed``): the run-to-run spread of fp32 atomic adds."""
    params, A_seq, B_seq, order = _prepare(A, B, unit, order)
    partials = _partials(params, A_seq, B_seq, order, None)
    out = SplitPartials(order.split_k, partials[0].size, seed)
    out.parts[:] = partials.reshape(order.split_k, -1)
    return out
