"""GEMM through a unit, with an explicit accumulation order.

``GemmOrder`` says everything about the order that changes the arithmetic:

* ``k_order``: the sequence in which gemmK indices are fed to the unit (a permutation of
  range(K)); the unit then takes consecutive groups of that sequence. A k-reduction instruction
  that spreads its k over input blocks is a permutation (:func:`strided_k_order`).
* ``pad_k``: zero padding of gemmK up to a multiple (padding kernels); zero products only change
  the sign of zero, or, for truncating units, the exponent they align to.
* ``split_k`` (the count :class:`emu.schedule.Schedule` calls ``splits``, the canonical name;
  :attr:`GemmOrder.splits` reads it under that name) and ``combine``: the K sequence is cut into
  ``split_k`` contiguous chunks, each
  accumulated from +0, and the chunk results are added into a zeroed fp32 workspace one by one
  (atomic adds, RNE): in ascending chunk order (``"ascending"``) or in a seeded random order
  (``"random"``); :func:`split_partials` keeps the chunk results apart, for ensembles of add
  orders (:mod:`emu.atomics`).

M and N never change the arithmetic of an output; their padding is not modelled.

``GemmOrder`` is one case of :class:`emu.schedule.Schedule`, the general accumulation schedule
(k tiles, splits as tile ranges, reductions of the partials, instruction K, the fp32 epilogue and
the output rounding); :func:`gemm` takes either.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from .atomics import SplitPartials, add_order
from .blockscale import is_block_scaled, scaled_gemm
from .dot import accumulator_values, compact_c, decode_operands, kernel_dtype, run_kernel, unit_params
from .operands import decode_flush, operand
from .schedule import Chain, Schedule, chain_positions, check_k_order
from .units import Format

__all__ = [
    "GemmOrder",
    "Schedule",
    "as_schedule",
    "chain_operands",
    "chain_params",
    "combine",
    "finish",
    "fma32",
    "fp32_of_odd_sum",
    "reduce_partials",
    "run_reduction_program",
    "gemm",
    "gemm_decoded",
    "operand_in_order",
    "split_partials",
    "split_results",
    "strided_k_order",
]


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
        check_k_order(self.k_order)
        if self.combine not in ("ascending", "random"):
            raise ValueError(f"combine: {self.combine!r} is not one of 'ascending', 'random'")

    @property
    def splits(self) -> int:
        """``split_k`` under the schedule's name (:attr:`emu.schedule.Schedule.splits`)."""
        return self.split_k

    def sequence(self, K: int) -> np.ndarray:
        """The gemmK indices in accumulation order, −1 marking padding zeros."""
        return self.schedule().sequence(K)

    def chunks(self, length: int) -> list[slice]:
        """Contiguous split-K chunks of the accumulation sequence (as even as possible)."""
        return self.schedule().split_ranges(length)

    def schedule(self) -> Schedule:
        """This order as an :class:`emu.schedule.Schedule`, the same bits: k tiles of width 1 split
        as evenly as possible; one split is one chain from C; several are chains from +0 added
        onto a workspace holding C, in ascending or seeded random order."""
        if self.split_k == 1:
            reduction, c_entry = "sequential", "chain"
        else:
            reduction, c_entry = ("workspace" if self.combine == "ascending" else "random"), "workspace"
        return Schedule(
            k_order=self.k_order,
            pad_k=self.pad_k,
            splits=self.split_k,
            reduction=reduction,
            reduction_seed=self.combine_seed,
            c_entry=c_entry,
        )


def as_schedule(order) -> Schedule:
    """``order`` (a :class:`GemmOrder`, a :class:`Schedule` or None for ascending k) as a Schedule."""
    if order is None:
        return Schedule()
    if isinstance(order, GemmOrder):
        return order.schedule()
    if isinstance(order, Schedule):
        return order
    raise TypeError(f"order: expected emu.GemmOrder, emu.Schedule or None, got {type(order).__name__}")


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
    return np.where((seq < 0).reshape(zero_shape), bits.dtype.type(0), taken)


def operand_in_order(bits: np.ndarray, seq: np.ndarray, axis: int, flush: bool) -> np.ndarray:
    """The values the unit takes of an operand (2-D: uint16 fp16 patterns, or float64 values of
    a wide format, as :func:`emu.operands.operand` gives them) with its gemmK axis (``axis``: 1
    for A, 0 for B) in the accumulation order ``seq`` (:meth:`GemmOrder.sequence`; −1 entries
    are +0): float32 fp16 values (with ``flush``, |x| < 2^-14 becomes +0), or the float64 values
    in order. What :func:`gemm` feeds the unit, for callers that run several units on the same
    operands (:func:`gemm_decoded`)."""
    taken = _gather(bits, seq, axis)
    if bits.dtype == np.float64:
        return np.ascontiguousarray(taken)
    return decode_operands(taken, flush)


def _prepare(A, B, unit, order):
    params = unit_params(unit)
    a_bits, b_bits = operand(A, "A", params), operand(B, "B", params, side="b")
    if a_bits.ndim != 2 or b_bits.ndim != 2 or a_bits.shape[1] != b_bits.shape[0]:
        raise ValueError(f"A, B: need (M, K) and (K, N), got {a_bits.shape} and {b_bits.shape}")
    schedule = as_schedule(order)
    seq = schedule.sequence(a_bits.shape[1])
    flush = decode_flush(params)
    A_seq = operand_in_order(a_bits, seq, 1, flush)
    B_seq = operand_in_order(b_bits, seq, 0, flush)
    return params, A_seq, B_seq, schedule


def chain_params(params, schedule: Schedule):
    """The unit as one chain runs it: ``instruction_k`` products fused per step where set."""
    k = schedule.instruction_k
    if not k or k == params.group_size:
        return params
    if k > params.group_size:
        raise ValueError(f"instruction_k: {k} is wider than the unit's group of {params.group_size}")
    return params._replace(group_size=k)


def chain_operands(A_seq: np.ndarray, B_seq: np.ndarray, r: slice | Chain, schedule: Schedule):
    """The operands one chain takes: ``A_seq[:, r]`` and ``B_seq[r]``, contiguous, laid out by
    :func:`emu.schedule.chain_positions` (with a residue tile, the split's k residue first,
    zero-filled: +0 products); ``r`` a slice of the sequence or a :class:`emu.schedule.Chain`."""
    if isinstance(r, Chain):
        pos, r = r.positions(), slice(r.start, r.stop, r.step)
    else:
        pos = chain_positions(r.start, r.stop, r.step or 1, schedule.residue_tile)
    fill = pos < 0
    if not fill.any():
        return np.ascontiguousarray(A_seq[:, r]), np.ascontiguousarray(B_seq[r])
    taken = np.where(fill, 0, pos)
    a, b = A_seq[:, taken], B_seq[taken]
    a[:, fill] = 0
    b[fill] = 0
    return np.ascontiguousarray(a), np.ascontiguousarray(b)


def split_results(chains, results) -> list[np.ndarray]:
    """The splits' partial sums from the results of their chains (:meth:`emu.schedule.Schedule.chains`,
    in that order; ``results`` any iterable of float32 arrays, one per chain): a split of several
    chains (promotion intervals) adds them into fp32 in order (RNE), the first chain's result
    being the accumulator's value."""
    partials: list[np.ndarray] = []
    with np.errstate(invalid="ignore", over="ignore"):
        for ch, part in zip(chains, results):
            if ch.split == len(partials):
                partials.append(part)
            else:
                partials[ch.split] = partials[ch.split] + part
    return partials


def _partials(params, A_seq, B_seq, schedule: Schedule, C0=None):
    """The chain results of each split (split 0 from ``C0`` when given, the others from +0); with
    a promotion interval, each split's intervals from +0 (the first of split 0 from ``C0``),
    added into fp32 in order (RNE)."""
    zero = np.zeros((1, 1), np.float32)
    chain = chain_params(params, schedule)
    chains = schedule.chains(A_seq.shape[1])
    if len(chains) == 1 and not schedule.residue_tile and not schedule.promotion_interval:
        return run_kernel(chain, A_seq, B_seq, zero if C0 is None else C0)[None]
    results = (
        run_kernel(chain, *chain_operands(A_seq, B_seq, ch, schedule), C0 if ch.from_c and C0 is not None else zero)
        for ch in chains
    )
    return np.stack(split_results(chains, results))


def reduce_partials(partials, schedule: Schedule, ws: np.ndarray | None = None) -> np.ndarray:
    """The split partial sums (a sequence of float32 arrays) combined in fp32 (RNE) as
    ``schedule.reduction`` says; ``ws`` is the workspace the ``"workspace"`` and ``"random"``
    reductions add onto (+0 when None)."""
    if ws is None:
        ws = np.zeros_like(partials[0])
    if schedule.partial_format:
        partials = [_output(None, p, schedule.partial_format).astype(np.float32) for p in partials]
    with np.errstate(invalid="ignore", over="ignore"):  # inf + -inf is NaN, a huge sum inf: IEEE, not an error
        if schedule.reduction == "tree":
            level = list(partials)
            while len(level) > 1:
                level = [level[i] + level[i + 1] if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
            return level[0]
        if schedule.reduction == "halving":
            level = list(partials)
            while len(level) > 1:
                h = (len(level) + 1) // 2
                level = [level[i] + level[i + h] if i + h < len(level) else level[i] for i in range(h)]
            return level[0]
        if schedule.reduction == "bisection":
            return _bisection(list(partials))
        if schedule.reduction == "program":
            return run_reduction_program(np.stack(partials), schedule.reduction_program)
        if schedule.reduction == "sequential":
            acc = partials[0]
            for p in partials[1:]:
                acc = acc + p
            return acc
        order = range(len(partials))
        if schedule.reduction == "random":
            order = add_order(len(partials), schedule.reduction_seed, 0)
        for s in order:
            ws = ws + partials[s]
        return ws


def run_reduction_program(x: np.ndarray, program) -> np.ndarray:
    """The partials ``x`` (n, …) float32 reduced by ``program``, a sequence of
    :data:`emu.schedule.REDUCTION_STEPS` (name, width); every add fp32 RNE; the last step must
    leave one entry, which is returned. ValueError where a step does not fit the list."""
    x = np.asarray(x, np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        for name, width in program:
            n = x.shape[0]
            if name in ("chunks", "chunks-first", "fold") and n % width:
                raise ValueError(f"reduction_program: {name} {width} on {n} partials (not a multiple)")
            if name == "merge":
                if width + 1 >= n:
                    raise ValueError(f"reduction_program: merge {width} on {n} partials (needs entry {width + 1})")
                x = np.concatenate([x[:width], (x[width] + x[width + 1])[None], x[width + 2 :]])
            elif name == "strided":
                padded = -(-n // width) * width
                if padded > n:
                    x = np.concatenate([x, np.zeros((padded - n,) + x.shape[1:], np.float32)])
                rows = x.reshape((padded // width, width) + x.shape[1:])
                acc = rows[0]
                for r in rows[1:]:
                    acc = acc + r
                x = acc
            elif name == "fold":
                groups = x.reshape((n // width, width) + x.shape[1:])
                half = width // 2
                x = (groups[:, :half] + groups[:, half:]).reshape((n // 2,) + x.shape[1:])
            else:
                groups = x.reshape((n // width, width) + x.shape[1:])
                acc = np.zeros_like(groups[:, 0]) + groups[:, 0] if name == "chunks" else groups[:, 0]
                for j in range(1, width):
                    acc = acc + groups[:, j]
                x = acc
    if x.shape[0] != 1:
        raise ValueError(f"reduction_program: leaves {x.shape[0]} partials, not one")
    return x[0]


def _bisection(partials: list) -> np.ndarray:
    """The first ⌊n/2⌋ partials reduced, the rest reduced, the two added (fp32, RNE)."""
    if len(partials) == 1:
        return partials[0]
    h = len(partials) // 2
    return _bisection(partials[:h]) + _bisection(partials[h:])


def fma32(a, b, c) -> np.ndarray:
    """RNE32(a·b + c) for float32 arrays, one rounding (the fp32 FMA of an epilogue): the product
    is exact in float64, the sum is taken in float64 with round-to-odd (TwoSum's error term sets
    the sticky bit), and rounding that to fp32 is then correct (53 ≥ 24 + 2)."""
    a, b, c = (np.asarray(x, np.float32).astype(np.float64) for x in (a, b, c))
    with np.errstate(invalid="ignore", over="ignore"):
        p = a * b
        s = p + c
        bb = s - p
        return fp32_of_odd_sum(s, (p - (s - bb)) + (c - bb))


def fp32_of_odd_sum(s: np.ndarray, err: np.ndarray) -> np.ndarray:
    """RNE32 of the exact value s + err, for a float64 sum ``s`` and its exact error ``err``
    (TwoSum's): s rounded to odd (``err`` sets the sticky bit), then to fp32, which is the
    correct rounding since 53 ≥ 24 + 2 (Boldo & Melquiond); inf and NaN pass through."""
    with np.errstate(invalid="ignore", over="ignore"):
        odd = (s.view(np.int64) & 1) == 1
        fix = np.isfinite(s) & (err != 0) & ~odd
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
        return s.astype(np.float32)


def _output(params, out: np.ndarray, output: str | None = None) -> np.ndarray:
    """The result in its output format: RNE, overflow to ±inf (IEEE, not an error)."""
    with np.errstate(over="ignore"):
        if output is None:
            return out.astype(np.float16) if params.output_format == Format.FP16 else out
        if output == "fp16":
            return out.astype(np.float16)
        if output == "bf16":
            return out.astype(ml_dtypes.bfloat16)
        return out.astype(np.float32)


def gemm(A, B, C, unit, order: GemmOrder | Schedule | None = None, *, scale_a=None, scale_b=None) -> np.ndarray:
    """C + A·B through ``unit`` in ``order``, the GEMM form of :func:`emu.dot_add` (same argument
    order, same result type).

    A (M, K) and B (K, N) of the unit's input format (fp16: float16 or uint16 patterns; the
    other formats as :func:`emu.dot_add` takes them); C (M, N) or broadcastable to it, float32
    (float16 for a unit with fp16 output), or None for +0. Returns (M, N) float32 (float16 for
    fp16-output units). With split-K the chunk results are added onto C in ascending chunk order,
    or, with ``order.combine == "random"``, in the order :func:`emu.atomics.add_order` draws for
    member 0 of the generator seeded ``order.combine_seed`` (one order for the whole GEMM).
    With a :class:`emu.schedule.Schedule`, the schedule's splits, reduction, epilogue and output
    rounding (its ``output``, when set, decides the result's dtype: float16, bfloat16 or float32).
    ``scale_a``, ``scale_b``: the fp32 scales of a scaled (fp8) GEMM, a scalar or per row of A
    ((M, 1)) / per column of B ((1, N)), applied in the epilogue as the schedule's
    ``scale_order`` says (:func:`finish`); C then enters the epilogue as a bias would.
    A block-scaled unit (MX, NVFP4) takes instead its block scales along K: ``scale_a`` (M,
    K // block_size) for the rows of A and ``scale_b`` (K // block_size, N) for the columns of B
    (:mod:`emu.blockscale`), each output one chain over K from C (``order`` None).
    """
    params = unit_params(unit)
    if is_block_scaled(params):
        if order is not None:
            raise ValueError(
                "order: a block-scaled unit's GEMM runs each output as one chain over K from C "
                "(order None); split and reordered schedules are not modelled for block scales"
            )
        c32 = np.float32(0.0) if C is None else _c_values(C, params, (np.shape(A)[0], np.shape(B)[-1]))
        return scaled_gemm(params, A, B, c32, scale_a, scale_b)
    params, A_seq, B_seq, schedule = _prepare(A, B, unit, order)
    return _gemm_in_order(params, A_seq, B_seq, C, schedule, scale_a, scale_b)


def gemm_decoded(
    A_seq: np.ndarray, B_seq: np.ndarray, C, unit, order: GemmOrder | Schedule | None = None
) -> np.ndarray:
    """:func:`gemm` on operands already in the unit's accumulation order: ``A_seq`` (M, K') and
    ``B_seq`` (K', N) float32 fp16 values as :func:`operand_in_order` returns them for
    ``order.sequence(K)`` (K' its length, padding included) and the unit's ``flush_inputs``
    (float64 values for a bf16 or tf32 unit). The same bits as ``gemm(A, B, C, unit, order)``;
    several units that share an order and a flush setting can share one decode."""
    params = unit_params(unit)
    schedule = as_schedule(order)
    dtype = np.dtype(kernel_dtype(params))
    for name, x in (("A_seq", A_seq), ("B_seq", B_seq)):
        if not isinstance(x, np.ndarray) or x.dtype != dtype or x.ndim != 2:
            raise TypeError(
                f"{name}: expected a 2-D {dtype.name} array of operand values, got {getattr(x, 'dtype', type(x))}"
            )
    if A_seq.shape[1] != B_seq.shape[0]:
        raise ValueError(f"A_seq, B_seq: need (M, K) and (K, N), got {A_seq.shape} and {B_seq.shape}")
    return _gemm_in_order(params, A_seq, B_seq, C, schedule)


def _c_values(C, params, shape) -> np.ndarray:
    """C as the kernels take it (float32, compacted), with a clear error for a wrong shape."""
    c = accumulator_values(C, params.output_format).astype(np.float32)
    try:
        fits = np.broadcast_shapes(c.shape, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"C: shape {c.shape} does not broadcast to the output's {shape}")
    return compact_c(c, shape, *shape)


def _gemm_in_order(params, A_seq, B_seq, C, schedule: Schedule, scale_a=None, scale_b=None):
    shape = (A_seq.shape[0], B_seq.shape[1])
    C0 = None if C is None else _c_values(C, params, shape)
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s is not None and np.broadcast_shapes(np.shape(s), shape) != shape:
            raise ValueError(f"{name}: shape {np.shape(s)} does not broadcast to the output's {shape}")
    partials = _partials(params, A_seq, B_seq, schedule, C0 if schedule.c_entry == "chain" else None)
    return combine(params, list(partials), C0, schedule, scale_a, scale_b)


def combine(unit, partials, C, schedule: Schedule, scale_a=None, scale_b=None) -> np.ndarray:
    """The output from the split chains' results (float32 arrays of one shape): their reduction
    (onto a workspace holding C when C enters it there), the epilogue and the output rounding. C
    is float32 broadcastable to a partial, or None for +0; ``scale_a``, ``scale_b`` as
    :func:`finish` takes them."""
    if len(partials) == 1 and schedule.reduction not in ("workspace", "random") and not schedule.partial_format:
        acc = partials[0]  # one chain: no reduction to run
    else:
        ws = None
        if schedule.c_entry == "workspace" and C is not None:
            ws = np.broadcast_to(C, partials[0].shape).astype(np.float32)
        acc = reduce_partials(partials, schedule, ws)
    return finish(unit, acc, C, schedule, scale_a, scale_b)


def _scaled(acc: np.ndarray, C, schedule: Schedule, scale_a, scale_b) -> np.ndarray:
    """acc times the scales in ``schedule.scale_order``, C (or None) added to the last product in
    one FMA (``epilogue_fma``) or after it; every step RNE in fp32."""
    one = np.float32(1)
    sa = one if scale_a is None else np.asarray(scale_a, np.float32)
    sb = one if scale_b is None else np.asarray(scale_b, np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        if schedule.scale_order == "product":
            first, last = None, (sa * sb).astype(np.float32)
        elif schedule.scale_order == "a_then_b":
            first, last = sa, sb
        else:
            first, last = sb, sa
        if first is not None:
            acc = (acc * first).astype(np.float32)
        last = np.broadcast_to(last, acc.shape).astype(np.float32)
        if C is None:
            return (acc * last).astype(np.float32)
        c = np.broadcast_to(np.asarray(C, np.float32), acc.shape)
        if schedule.epilogue_fma:
            return fma32(last, acc, c)
        return ((acc * last).astype(np.float32) + c).astype(np.float32)


def finish(unit, acc: np.ndarray, C, schedule: Schedule, scale_a=None, scale_b=None) -> np.ndarray:
    """The epilogue and output rounding of ``schedule`` on a reduced fp32 accumulator ``acc``:
    with ``c_entry="epilogue"`` RNE32(alpha·acc + beta·C) as one FMA (C float32, broadcastable,
    or None for 0; with ``epilogue_fma`` false alpha·acc rounded first, then beta·C added), else
    alpha·acc (rounded) where alpha ≠ 1; then the output rounding; with ``c_entry="output"``
    RN_out(RN_out(alpha·acc) + RN32(beta·C)): C added to the stored result and rounded again. With
    ``scale_a`` / ``scale_b`` (float32, broadcastable to the output: a scalar, (M, 1), (1, N)),
    the scales in ``schedule.scale_order`` instead of alpha, C (in the epilogue) added as
    ``schedule.epilogue_fma`` says (see :mod:`emu.schedule`)."""
    params = unit_params(unit)
    if scale_a is not None or scale_b is not None:
        if schedule.alpha != 1 or schedule.beta != 1:
            raise ValueError("scale_a, scale_b: scaled GEMMs take no alpha or beta (fold them into the scales)")
        c = C if schedule.c_entry == "epilogue" else None
        return _output(params, _scaled(acc, c, schedule, scale_a, scale_b), schedule.output)
    if schedule.c_entry == "output":  # stored in the output format, then C added to it by a second pass
        alpha_acc = acc if schedule.alpha == 1 else (np.float32(schedule.alpha) * acc).astype(np.float32)
        stored = _output(params, alpha_acc, schedule.output).astype(np.float32)
        if C is None:
            return _output(params, stored, schedule.output)
        beta_c = (np.float32(schedule.beta) * np.broadcast_to(np.asarray(C, np.float32), acc.shape)).astype(np.float32)
        return _output(params, (stored + beta_c).astype(np.float32), schedule.output)
    if schedule.c_entry == "epilogue":
        c = np.zeros((1, 1), np.float32) if C is None else np.asarray(C, np.float32)
        beta_c = (np.float32(schedule.beta) * np.broadcast_to(c, acc.shape)).astype(np.float32)
        if schedule.epilogue_fma:  # CUTLASS LinearCombination: beta·C, then alpha·acc added in one FMA
            acc = fma32(np.float32(schedule.alpha), acc, beta_c)
        else:  # a separate multiply and add: RN32(RN32(alpha·acc) + RN32(beta·C))
            acc = ((np.float32(schedule.alpha) * acc).astype(np.float32) + beta_c).astype(np.float32)
    elif schedule.alpha != 1:
        acc = (np.float32(schedule.alpha) * acc).astype(np.float32)
    return _output(params, acc, schedule.output)


def split_partials(A, B, unit, order: GemmOrder, seed: int = 0) -> SplitPartials:
    """The split-K partial sums of ``gemm(A, B, None, unit, order)``, element (m, n) at m·N + n,
    as :class:`emu.atomics.SplitPartials` whose members (shape (M, N)) are the GEMM with the chunk
    results added in counter-based random orders (``seed``): the run-to-run spread of fp32
    atomic adds."""
    params, A_seq, B_seq, schedule = _prepare(A, B, unit, order)
    partials = _partials(params, A_seq, B_seq, schedule, None)
    out = SplitPartials(len(partials), partials[0].size, seed, shape=partials[0].shape)
    out.parts[:] = partials.reshape(len(partials), -1)
    return out
