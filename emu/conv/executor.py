"""The executor: one loop over a convolution's sub-GEMMs, groups and gemmN chunks, and the passes
that run in it.

:meth:`ConvGemm.execute` gathers A once per (sub-GEMM, group) and B once per chunk of gemmN
columns, and hands them to each :class:`Step`: ``group`` (a sub-GEMM's group begins, A
gathered), ``chunk`` (B's columns of one chunk) and ``sub_done`` (every group of a sub-GEMM
done). The passes written on it:

* :meth:`ConvGemm.run`: a caller's ``gemm(A, B)`` per chunk (:func:`conv`);
* :meth:`ConvGemm.compute`: many kernel models (:class:`ConvArithmetic`) in one pass, their
  operands decoded once per gemmK order, flush setting and operand kind (fp16, bf16, fp32
  tensors through a tf32 unit or the fp32 FMA unit of :mod:`emu.simt`); per model the hooks
  ``operands`` (the GEMM reads other operands: mutants), ``gemm`` (the GEMM replaced: mutants)
  and ``keep_partials`` (split-K partial sums kept apart for atomic add orders, with their
  output tiles); models with ``inbounds_only`` (the backward-weight CPU loops that skip padding
  taps) run in a pass of their own with wider chunks.

A GEMM order is passed through to :func:`emu.gemm.gemm` / :func:`emu.gemm.gemm_decoded` as it
is; the executor reads it in one place only, :func:`order_view` (its gemmK sequence and its
split-K chunks), which is what a richer accumulation schedule has to answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from ..atomics import SplitPartials
from ..dot import unit_params
from ..gemm import as_schedule, gemm_decoded, operand_in_order
from ..gemm import gemm as _unit_gemm
from ..operands import TF32_ROUNDINGS, input_name, operand, tf32_operands
from ..simt import fma_gemm, fma_gemm_in_order, is_fp32_fma
from ..units import InputFormat
from .geometry import ConvProblem, SubGemm
from .indexing import bwd_weight_taps
from .kernels import taken_decoded
from .layout import FORMATS
from .operands import ConvOperands

__all__ = [
    "DECODED_A_BYTES",
    "INBOUNDS_B_BYTES",
    "TF32_ROUNDINGS",
    "ConvArithmetic",
    "ConvGemm",
    "Step",
    "order_view",
    "conv",
]

#: decoded A operands kept across a group's gemmN chunks (one per gemmK order and flush setting)
#: while they take no more than this; beyond it A is decoded again for each chunk
DECODED_A_BYTES = 256 * 2**20
#: Bytes of B (fp16 gemmK × gemmN) gathered at once by the in-bounds pass: wider than the usual
#: chunks, so each filter tap's A columns are gathered once and not once per chunk it spans.
INBOUNDS_B_BYTES = 1 << 30


def order_view(order, k: int) -> tuple[np.ndarray, list[slice]]:
    """What the executor needs of a GEMM order on a sub-GEMM of gemmK ``k``: the gemmK indices
    in accumulation order (−1: padding zeros) and the split-K chunks of that sequence (one slice
    when there is no split). The only place the executor looks inside an order: an
    :class:`emu.GemmOrder` or an :class:`emu.Schedule` (or None, ascending k)."""
    schedule = as_schedule(order)
    seq = schedule.sequence(k)
    return seq, schedule.split_ranges(len(seq))


class ConvArithmetic(NamedTuple):
    """What :meth:`ConvGemm.compute` needs of one kernel model, per sub-GEMM of
    :func:`emu.conv.sub_gemms`: the unit (an ``emu.UnitParams`` or anything with ``params``)
    and the GEMM order (:class:`emu.gemm.GemmOrder`, passed through to :func:`emu.gemm.gemm`).

    ``inbounds_only``: add only the products whose input pixel lies inside the image, in the
    order's sequence (backward weight's CPU loops skip out-of-bounds taps; a grouped unit then
    counts only those products into its groups). ``keep_partials``: keep split-K partial sums
    apart (:class:`emu.atomics.SplitPartials`, for atomic add orders), with ``tiles`` giving each
    sub-GEMM's output tile (m_per_block, n_per_block) for orders keyed per tile, and ``seed``
    the order generator's seed.

    Hooks, per chunk (shared passes only; A and B never modified in place):
    ``operands(sub, group, n_start, a, b)`` returns the (A, B) this model's GEMM uses in place
    of the gathered chunk (a kernel that reads the wrong operands); ``gemm(sub, a, b)`` returns
    the float32 C (gemmM × chunk columns) that replaces the unit's GEMM (a kernel with other
    arithmetic; not with ``keep_partials``).

    The units multiply the tensors' format (fp16 or bf16 tensors: units of that input format).
    fp32 tensors take either the fp32 FMA unit (:func:`emu.simt.is_fp32_fma`: a SIMT kernel,
    each product a whole-fp32 FMA, :func:`emu.simt.fma_gemm`) or a tf32 unit, whose operands
    the kernel first makes tf32 as ``tf32_rounding`` says (:data:`emu.operands.TF32_ROUNDINGS`;
    default ``"rne"``, as GEMMs do; ``"rna"`` for code built for sm_80). Layout transposes
    (NCHW ↔ NHWC kernels) move values, never change them, and are not modelled."""

    units: tuple
    orders: tuple
    inbounds_only: bool = False
    keep_partials: bool = False
    tiles: tuple | None = None
    seed: int = 0
    operands: Callable | None = None
    gemm: Callable | None = None
    tf32_rounding: str = "rne"


class Step:
    """What runs inside :meth:`ConvGemm.execute`'s loop; each method is a no-op unless
    overridden. ``a``: A (gemmM × gemmK) of the (sub-GEMM, group); ``b``: B's gemmN columns
    ``start`` … ``start + b.shape[1] − 1``; both values of the tensors' format (float16,
    bfloat16 or float32), C-contiguous, not to be modified."""

    def group(self, sub: int, group: int, a: np.ndarray) -> None:
        """Group ``group`` of sub-GEMM ``sub`` begins (A gathered)."""

    def chunk(self, sub: int, group: int, start: int, a: np.ndarray, b: np.ndarray) -> None:
        """One chunk of gemmN columns of the (sub-GEMM, group)."""

    def sub_done(self, sub: int) -> None:
        """Every group of sub-GEMM ``sub`` is done."""


def _kind(unit, fmt: str, tf32_rounding: str = "rne") -> str:
    """How the unit takes the tensors' values: ``"fp16"`` (the fp16 decode), ``"wide"`` (the
    unit's float64 values: bf16, or tf32 from raw fp32 bits), ``"tf32-rne"`` / ``"tf32-rna"``
    (fp32 rounded to tf32 first, ties to even or away, then the unit's values) or ``"fp32"`` (the
    fp32 FMA unit: float32 values whole)."""
    if fmt == "fp32":
        if is_fp32_fma(unit):
            return "fp32"
        return f"tf32-{tf32_rounding}" if tf32_rounding else "wide"
    return "fp16" if fmt == "fp16" else "wide"


def _unit_values(values: np.ndarray, kind: str, params, flush: bool) -> np.ndarray:
    """Gathered values (float16 / bfloat16 / float32, 2-D) as the unit multiplies them: float64
    for ``"wide"`` and the tf32 roundings, float32 for ``"fp32"`` (not for ``"fp16"``: its decode
    is fused with the reorder)."""
    if kind == "fp32":
        return np.asarray(values, np.float32)
    if kind.startswith("tf32-"):
        values = tf32_operands(np.asarray(values, np.float32), kind[5:])
    return operand(values, "operand", params._replace(flush_inputs=int(flush)))


def _values_in_order(values: np.ndarray, seq: np.ndarray, axis: int, flush: bool, params, kind: str) -> np.ndarray:
    """An operand's values as the unit's kernels take them, gemmK (``axis``) in the order
    ``seq``: fp16 through the fp16 decode (:func:`emu.gemm.operand_in_order`, ``flush`` below
    2^-14); the others as :func:`_unit_values` gives them (bf16 and tf32 flushed below 2^-126
    with ``flush``), then reordered."""
    if kind == "fp16":
        return operand_in_order(values.view(np.uint16), seq, axis, flush)
    if kind == "fp32":  # reordered as float64 values (exact), handed on as float32
        return np.ascontiguousarray(operand_in_order(values.astype(np.float64), seq, axis, False), np.float32)
    return operand_in_order(_unit_values(values, kind, params, flush), seq, axis, False)


def _taken_values(values, rows, cols, flush: bool, transpose: bool, params, kind: str) -> np.ndarray:
    """``values[rows][:, cols]`` as the unit's kernels take them (its transpose with
    ``transpose``): the fp16 decoding gather, or :func:`_unit_values`."""
    if kind == "fp16":
        return taken_decoded(values.view(np.uint16), rows, cols, flush, transpose=transpose)
    taken = _unit_values(values[np.ix_(rows, cols)], kind, params, flush)
    return np.ascontiguousarray(taken.T if transpose else taken)


def _gemm_in_order(a_seq, b_seq, unit, order, kind: str) -> np.ndarray:
    """The GEMM on operands in order (:func:`emu.gemm.gemm_decoded`; the fp32 FMA chains of
    :func:`emu.simt.fma_gemm_in_order` for ``"fp32"``)."""
    if kind == "fp32":
        return fma_gemm_in_order(a_seq, b_seq, None, order)
    return gemm_decoded(a_seq, b_seq, None, unit, order)


def _gemm_values(a, b, unit, order, kind: str) -> np.ndarray:
    """The GEMM on gathered values of the tensors' format (:func:`emu.gemm.gemm`, after the
    tf32 rounding of a ``"tf32-…"`` kind; :func:`emu.simt.fma_gemm` for ``"fp32"``)."""
    if kind == "fp32":
        return fma_gemm(a, b, None, order)
    if kind.startswith("tf32-"):
        a, b = tf32_operands(a, kind[5:]), tf32_operands(b, kind[5:])
    return _unit_gemm(a, b, None, unit, order)


def operand_key(params, kind: str) -> tuple:
    """What a decode of kind ``kind`` depends on beyond the order and the flush: the unit's
    operand formats for wide values (bf16 and tf32 units decode alike only within a format)."""
    return () if kind in ("fp16", "fp32") else (params.input_format, params.b_input_format)


def _check_units(units, fmt: str) -> None:
    """ValueError unless every unit multiplies tensors of format ``fmt``: a unit of that input
    format; for fp32 tensors the fp32 FMA unit or a tf32 unit."""
    for u in units:
        params = unit_params(u)
        if fmt == "fp32":
            if not (is_fp32_fma(u) or params.input_format == InputFormat.TF32):
                raise ValueError(
                    f"ConvArithmetic: a unit multiplying {input_name(params.input_format)} on fp32 tensors; fp32 "
                    "tensors take the fp32 FMA unit (fp32 without TF32) or a tf32 unit (input='tf32')"
                )
        elif input_name(params.input_format) != fmt:
            raise ValueError(
                f"ConvArithmetic: its units multiply {input_name(params.input_format)}; the tensors are "
                f"{fmt} (build the units with input={fmt!r})"
            )


def _check_c(c, shape: tuple[int, int], what: str) -> None:
    if not isinstance(c, np.ndarray) or c.dtype != np.float32 or c.shape != shape:
        raise TypeError(
            f"{what} must return a float32 array of shape {shape}, got {getattr(c, 'dtype', type(c))} "
            f"{getattr(c, 'shape', '')}"
        )


class _Callable(Step):
    """:meth:`ConvGemm.run`: ``gemm(A, B)`` per chunk, scattered into ``out``."""

    def __init__(self, op: ConvGemm, gemm: Callable, out: np.ndarray):
        self.op, self.gemm, self.out = op, gemm, out

    def chunk(self, sub, group, start, a, b):
        c = self.gemm(a, b)
        _check_c(c, (self.op.subs[sub].m, b.shape[1]), "gemm")
        self.op.scatter(self.out, c, sub, group, start)


class _Shared(Step):
    """The models of a shared pass. Those that run the whole gemmK through one GEMM on the
    gathered operands are grouped by what their decode depends on (gemmK sequence, flush): each
    group decodes B once per chunk and A once for all chunks (while small), one group at a time.
    The others (split-K partials kept apart, or a hook) run their own GEMMs."""

    def __init__(self, op: ConvGemm, models: Sequence[ConvArithmetic], outs: list, inert: bool):
        self.op, self.models, self.outs, self.inert = op, models, outs, inert

    def group(self, sub, group, a):
        k = a.shape[1]
        self.by_decode: dict[tuple, tuple[np.ndarray, list[int]]] = {}
        self.own: list[tuple[int, list[slice]]] = []
        for i, m in enumerate(self.models):
            seq, splits = order_view(m.orders[sub], k)
            if m.operands is None and m.gemm is None and (not m.keep_partials or len(splits) < 2):
                params = unit_params(m.units[sub])
                flush = bool(params.flush_inputs) and not self.inert
                kind = _kind(m.units[sub], self.op.format, m.tf32_rounding)
                key = (seq.tobytes(), flush, kind, operand_key(params, kind))
                self.by_decode.setdefault(key, (seq, [], params))[1].append(i)
            else:
                self.own.append((i, splits))
        self.a_decoded: dict[tuple, np.ndarray] = {}
        self.a_bytes = 0
        self.held: np.ndarray | None = None

    def chunk(self, sub, group, start, a0, b0):
        op = self.op
        for key, (seq, idx, params) in self.by_decode.items():
            flush, kind = key[1], key[2]
            a_seq = self.a_decoded.get(key)
            if a_seq is None:
                a_seq = _values_in_order(a0, seq, 1, flush, params, kind)
                if self.a_bytes + a_seq.nbytes <= DECODED_A_BYTES:
                    self.a_decoded[key] = a_seq
                    self.a_bytes += a_seq.nbytes
            b_seq = _values_in_order(b0, seq, 0, flush, params, kind)
            for i in idx:
                m, out = self.models[i], self.outs[i]
                res = _gemm_in_order(a_seq, b_seq, m.units[sub], m.orders[sub], kind)
                op.scatter(out.parts[0] if m.keep_partials else out, res, sub, group, start)
                # Held until the next C exists (as the inline loop did): freed first, glibc hands
                # its pages back and the next chunk faults in fresh ones (the largest suite test:
                # twice the page faults, 4 % more CPU).
                self.held = res
            del a_seq, b_seq
        for i, splits in self.own:
            m, out = self.models[i], self.outs[i]
            unit, order = m.units[sub], m.orders[sub]
            kind = _kind(unit, op.format, m.tf32_rounding)
            a, b = (a0, b0) if m.operands is None else m.operands(sub, group, start, a0, b0)
            if m.gemm is not None:
                c = m.gemm(sub, a, b)
                _check_c(c, (a.shape[0], b.shape[1]), "ConvArithmetic.gemm")
                op.scatter(out, c, sub, group, start)
                continue
            if not m.keep_partials or len(splits) < 2:
                res = _gemm_values(a, b, unit, order, kind)
                op.scatter(out.parts[0] if m.keep_partials else out, res, sub, group, start)
                continue
            seq, splits = order_view(order, a.shape[1])
            for si, sl in enumerate(splits):
                idx = seq[sl]
                a_chunk, b_chunk = np.ascontiguousarray(a[:, idx]), np.ascontiguousarray(b[idx, :])
                if (idx < 0).any():  # gemmK padding: zero products in the chunk
                    a_chunk[:, idx < 0] = 0
                    b_chunk[idx < 0, :] = 0
                part = _gemm_values(a_chunk, b_chunk, unit, None, kind)  # each chunk from +0, in sequence
                op.scatter(out.parts[si], part, sub, group, start)


class _Inbounds(Step):
    """The models that count only in-bounds products (backward weight's CPU loops that skip
    out-of-bounds taps): per filter tap, the products whose input pixel lies inside the image,
    in each model's gemmK order. A tap's gathered operands are shared by the models with the
    same order (e.g. one validator with and without input flush)."""

    def __init__(self, op: ConvGemm, models: Sequence[ConvArithmetic], outs: list, inert: bool):
        self.op, self.models, self.outs, self.inert = op, models, outs, inert

    def group(self, sub, group, a):
        self.by_order: list[tuple[np.ndarray, list[int]]] = []  # (gemmK order, the models with it)
        for i, m in enumerate(self.models):
            full = order_view(m.orders[sub], a.shape[1])[0]
            full = full[full >= 0]  # gemmK padding zeros are no products of a loop
            same = next((idx for order, idx in self.by_order if np.array_equal(order, full)), None)
            if same is None:
                self.by_order.append((full, [i]))
            else:
                same.append(i)
        self.all_rows = np.arange(a.shape[0], dtype=np.int64)

    def chunk(self, sub, group, start, a, b):
        op, models = self.op, self.models
        sg = op.subs[sub]
        stop = start + b.shape[1]
        res = [np.zeros((sg.m, stop - start), np.float32) for _ in models]
        for cols, kin in bwd_weight_taps(op.problem, sg.k, start, stop):
            inside = np.zeros(a.shape[1], np.bool_)
            inside[kin] = True
            cols = cols.astype(np.int64)
            # A tap has few columns (the channels of one filter tap): computed as (B^T A^T)^T,
            # the tap's outputs run along the kernels' lanes. The same bits: every unit forms
            # each exact product a_k·b_k (commutative) and adds an output's products in the same
            # k order.
            flip = cols.size < sg.m
            for full, idx in self.by_order:
                seq = full[inside[full]].astype(np.int64)  # the model's order, in-bounds products only
                decoded: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}  # (flush, kind, …) → (A, B) of the tap
                for i in idx:
                    unit = models[i].units[sub]
                    params = unit_params(unit)
                    flush = bool(params.flush_inputs) and not self.inert
                    kind = _kind(unit, op.format, models[i].tf32_rounding)
                    key = (flush, kind, operand_key(params, kind))
                    if key not in decoded:
                        decoded[key] = (
                            _taken_values(a, self.all_rows, seq, flush, flip, params, kind),
                            _taken_values(b, seq, cols, flush, flip, params, kind),
                        )
                    a_tap, b_tap = decoded[key]
                    if flip:
                        res[i][:, cols] = _gemm_in_order(b_tap, a_tap, unit, None, kind).T
                    else:
                        res[i][:, cols] = _gemm_in_order(a_tap, b_tap, unit, None, kind)
                del decoded
        for i in range(len(models)):
            op.scatter(self.outs[i], res[i], sub, group, start)


class ConvGemm(ConvOperands):
    """A convolution's GEMMs over given tensors (:class:`emu.conv.operands.ConvOperands`: gathers
    A and chunks of B, scatters C) and the executor that runs kernel models over them."""

    def _n_chunk(self, n_chunk: int | None) -> int:
        chunk = self.default_n_chunk() if n_chunk is None else int(n_chunk)
        if chunk < 1:
            raise ValueError(f"n_chunk: must be ≥ 1, got {n_chunk}")
        return chunk

    def execute(
        self,
        steps: Sequence[Step],
        n_chunk: int | Callable[[SubGemm], int] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        """The loop: per sub-GEMM, per group, A gathered once, then B in chunks of ``n_chunk``
        gemmN columns (default :meth:`default_n_chunk`; a callable gives it per sub-GEMM), every
        step called in turn (:class:`Step`). ``progress`` gets each chunk's column count."""
        if not steps:
            return
        for sub, sg in enumerate(self.subs):
            chunk = self._n_chunk(n_chunk(sg) if callable(n_chunk) else n_chunk)
            for group in range(self.problem.groups):
                a = self.a(sub, group)
                for s in steps:
                    s.group(sub, group, a)
                for start in range(0, sg.n, chunk):
                    stop = min(start + chunk, sg.n)
                    b = self.b(sub, group, start, stop)
                    for s in steps:
                        s.chunk(sub, group, start, a, b)
                    if progress is not None:
                        progress(stop - start)
            for s in steps:
                s.sub_done(sub)

    def run(self, gemm: Callable[[np.ndarray, np.ndarray], np.ndarray], n_chunk: int | None = None) -> np.ndarray:
        """The convolution with ``gemm``; float32, flat, in the result tensor's memory order."""
        out = self.new_result()
        self.execute([_Callable(self, gemm, out)], self._n_chunk(n_chunk))
        return out

    def same_arithmetic(self, first: ConvArithmetic, second: ConvArithmetic) -> bool:
        """Whether two models compute the same bits on these operands: equal unit parameters per
        sub-GEMM (input flushing ignored where :attr:`flush_inert`), equal orders and counting
        rule, no hooks."""
        if any(x is not None for x in (first.operands, second.operands, first.gemm, second.gemm)):
            return False
        if first == second:
            return True
        if (first.orders, first.inbounds_only, first.keep_partials, first.tiles, first.seed, first.tf32_rounding) != (
            second.orders,
            second.inbounds_only,
            second.keep_partials,
            second.tiles,
            second.seed,
            second.tf32_rounding,
        ):
            return False
        if len(first.units) != len(second.units):
            return False
        pairs = [(unit_params(u), unit_params(v)) for u, v in zip(first.units, second.units)]
        if all(p == q for p, q in pairs):
            return True
        # the scan of the sources only when the units differ, and only in input flushing
        unflushed = all(p._replace(flush_inputs=False) == q._replace(flush_inputs=False) for p, q in pairs)
        return unflushed and self.flush_inert

    def compute(
        self,
        models: Sequence[ConvArithmetic],
        n_chunk: int | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> list:
        """Every model over the convolution in one pass: each operand chunk is gathered once and
        fed to every model's GEMMs.

        Returns, per model, the flat float32 result in the result tensor's memory order, or, for a
        model with ``keep_partials``, its :class:`emu.atomics.SplitPartials` (partial sums kept
        apart, each split-K chunk accumulated from +0 with its gemmK padding as zero products;
        tile ids filled where ``model.tiles`` gives the tiles, numbered with :meth:`tile_ids`
        with the groups of a sub-GEMM sharing numbers; generator seeded with ``model.seed``).
        Models with ``inbounds_only`` run in a pass of their own, in chunks of about
        :data:`INBOUNDS_B_BYTES` of B. ``progress`` is called with the number of gemmN columns
        each chunk finished (shared pass only)."""
        for m in models:
            if len(m.units) != len(self.subs) or len(m.orders) != len(self.subs):
                raise ValueError(
                    f"ConvArithmetic: {len(m.units)} units and {len(m.orders)} orders for {len(self.subs)} sub-GEMMs"
                )
            if m.gemm is not None and (m.keep_partials or m.inbounds_only):
                raise ValueError("ConvArithmetic: a gemm hook replaces the whole GEMM: no partials, no in-bounds count")
            if m.tf32_rounding not in TF32_ROUNDINGS:
                raise ValueError(f"ConvArithmetic.tf32_rounding: {m.tf32_rounding!r} is not one of {TF32_ROUNDINGS}")
            _check_units(m.units, self.format)
        n_splits = [[len(order_view(o, s.k)[1]) for o, s in zip(m.orders, self.subs)] for m in models]
        size = self.problem.tensor_size(self.problem.result_role)
        outs: list = [
            SplitPartials(max(splits), size, m.seed) if m.keep_partials else self.new_result()
            for m, splits in zip(models, n_splits)
        ]

        def inert(idx: list[int]) -> bool:  # the scan of the sources only where some model flushes its inputs
            return any(unit_params(u).flush_inputs for i in idx for u in models[i].units) and self.flush_inert

        inbounds = [i for i, m in enumerate(models) if m.inbounds_only]
        if inbounds:
            step = _Inbounds(self, [models[i] for i in inbounds], [outs[i] for i in inbounds], inert(inbounds))
            size = FORMATS[self.format].itemsize
            self.execute([step], lambda sg: max(self.default_n_chunk(), INBOUNDS_B_BYTES // max(1, size * sg.k)))
        shared = [i for i, m in enumerate(models) if not m.inbounds_only]
        if not shared:
            return outs
        step = _Shared(self, [models[i] for i in shared], [outs[i] for i in shared], inert(shared))
        self.execute([step], self._n_chunk(n_chunk), progress)
        for i in shared:
            m = models[i]
            if m.keep_partials and m.tiles is not None:
                split_subs = [sub for sub, n in enumerate(n_splits[i]) if n >= 2]
                self.tile_ids(m.tiles, groups_apart=False, subs=split_subs, out=outs[i].tiles)
        return outs


def conv(
    problem: ConvProblem,
    x=None,
    w=None,
    dy=None,
    *,
    gemm: Callable[[np.ndarray, np.ndarray], np.ndarray],
    n_chunk: int | None = None,
    fmt: str | None = None,
) -> np.ndarray:
    """A convolution as the kernel's GEMMs: fwd x, w → y; bwd_data w, dy → dx; bwd_weight
    x, dy → dw.

    ``gemm(A, B)`` takes A (M × K) and B (K × N) values of the tensors' format (float16,
    bfloat16 or float32; ``fmt`` saying what uint16 patterns are), C-contiguous, k in the kernel's gemmK
    order, and returns C (M × N) float32; it supplies the arithmetic and the accumulation order.
    It is called once per group, sub-GEMM and chunk of ``n_chunk`` gemmN columns (default: about
    64 MiB of B and C per chunk). Returns float32 of shape ``problem.tensor_shape(result)`` in the
    result layout; pixels no GEMM writes (bwd_data) are +0.0.
    """
    out = ConvGemm(problem, x, w, dy, fmt=fmt).run(gemm, n_chunk)
    return out.reshape(problem.tensor_shape(problem.result_role))
