"""Samples of a capture's outputs on which the search judges thousands of candidates at once.

A :class:`Sample` takes a few outputs of a few of the capture's GEMMs (for fp16 and bf16
outputs, those whose exact value lies nearest a rounding boundary: where schedules part) and
decodes their operands once per variant. The chains each candidate's schedule runs are
:meth:`emu.schedule.Schedule.chains` (what :func:`emu.gemm` runs); a chain shared by several
candidates (the same k range, from the same start, through the same unit) is computed once, and
chains of one length are computed together in one kernel call. A candidate's outputs are then
:func:`emu.gemm.split_results` and :func:`emu.gemm.combine` of its chains' results: the same
bits as :func:`emu.gemm` on those outputs.
"""

from __future__ import annotations

import functools

import numpy as np

from emu.dot import run_kernel
from emu.formats import get_format
from emu.gemm import chain_params, combine, operand_in_order, split_results
from emu.jit import jit, run_tasks
from emu.operands import decode_flush, operand
from emu.schedule import Chain, Schedule
from emu.simt import FMA32_PARAMS, fma32_scalar

from .capture import Capture, GemmJob
from .gemms import (
    Candidate,
    Variant,
    bits,
    full_fp32,
    gemm_dims,
    jobs_of,
    n_jobs,
    operand_values,
    search_unit_params,
    serial_merge,
)

__all__ = ["Sample", "boundary_distance", "output_positions"]


class Sample:
    """A fixed sample of a capture's outputs, decoded once per (variant, flush) and shared by
    every candidate. The chains of every split range the candidates need are computed together,
    ranges of one length per kernel call, one sampled output per column in the kernels'
    one-a-vector-per-output layout (no padding: each column's chain is the range's own).

    For fp16 and bf16 outputs most schedules round most outputs alike, so the sample takes the
    outputs whose exact value (float64) lies nearest a rounding boundary of the output format,
    from a random pool: those are where schedules part."""

    def __init__(self, cap: Capture, size: int, pool: int, seed: int = 0):
        self.cap = cap
        rng = np.random.default_rng(seed)
        M, N, _ = gemm_dims(cap, Variant())
        total = n_jobs(cap)
        pieces = rng.choice(total, size=min(total, 4), replace=False).tolist()
        per = max(1, pool // len(pieces))
        rows_n = min(M, max(1, int(np.sqrt(per * M / N)) if N else 1))
        cols_n = min(N, max(1, per // rows_n))
        candidates = []  # (piece, m, n, score)
        for p in pieces:
            rows = np.sort(rng.choice(M, size=rows_n, replace=False))
            cols = np.sort(rng.choice(N, size=cols_n, replace=False))
            if cap.out_format == "fp32":
                score = rng.random((rows_n, cols_n))
            else:
                score = boundary_distance(cap, jobs_of(cap, Variant(), rows, cols, [p])[0])
            mm, nn = np.meshgrid(rows, cols, indexing="ij")
            candidates.append((np.full(score.size, p), mm.reshape(-1), nn.reshape(-1), score.reshape(-1)))
        piece, m, n, score = (np.concatenate(x) for x in zip(*candidates))
        keep = np.argsort(score, kind="stable")[:size]
        self._take(piece[keep], m[keep], n[keep])

    def _take(self, piece: np.ndarray, m: np.ndarray, n: np.ndarray):
        """Sample the outputs at GEMM positions (piece, m, n) under the default :class:`Variant`."""
        self.elements = {}
        for p in np.unique(piece):
            sel = piece == p
            self.elements[int(p)] = (m[sel], n[sel])
        self.size = int(piece.size)
        self._jobs = {}
        self._chains = {}
        self._joins = {}
        self._ready = set()  # id of each _keys list whose chains are all computed
        self._arrays = {}  # id of a _keys list: its chains' results

    @classmethod
    def of_outputs(cls, cap: Capture, outputs) -> Sample:
        """A sample of the given outputs (flat indices into ``cap.out``), e.g. those a schedule got
        wrong; an output whose GEMM position :func:`output_positions` does not find is left out
        (:attr:`size` says how many are in)."""
        piece, m, n = output_positions(cap, outputs)
        found = piece >= 0
        self = cls.__new__(cls)
        self.cap = cap
        self._take(piece[found], m[found], n[found])
        return self

    def jobs(self, variant: Variant, params):
        """Per sampled GEMM: decoded rows of A (E, K) and columns of B as rows (E, K), one per
        sampled output, C per output (or None), and the GPU's outputs. ``params``: the unit's (its
        input format is the capture's; its flushing decides the decode); :data:`FP32` for fp32
        operands taken whole (float32 values)."""
        if params is FP32:
            return self._fp32_jobs(variant)
        key = (variant, bool(params.flush_inputs))
        flush = decode_flush(params)
        if key not in self._jobs:
            decoded = []
            out = self.cap.out.reshape(-1)
            for p, (m, n) in self.elements.items():
                ur, li = np.unique(m, return_inverse=True)
                uc, lj = np.unique(n, return_inverse=True)
                (job,) = jobs_of(self.cap, variant, ur, uc, [p])
                seq = np.arange(job.A.shape[1])
                A = operand_in_order(operand(job.A, "A", params), seq, 1, flush)[li]
                B = operand_in_order(operand(job.B, "B", params, side="b"), seq, 0, flush).T[lj]
                C = None if job.C is None else np.ascontiguousarray(job.C[li, lj], np.float32)
                decoded.append((A, B, C, out[job.out_index[li, lj]]))
            self._jobs[key] = decoded
        return self._jobs[key]

    def _fp32_jobs(self, variant: Variant):
        key = (variant, "fp32")
        if key not in self._jobs:
            decoded = []
            out = self.cap.out.reshape(-1)
            for p, (m, n) in self.elements.items():
                ur, li = np.unique(m, return_inverse=True)
                uc, lj = np.unique(n, return_inverse=True)
                (job,) = jobs_of(self.cap, variant, ur, uc, [p])
                A = np.ascontiguousarray(job.A.view(np.float32)[li])
                B = np.ascontiguousarray(job.B.view(np.float32).T[lj])
                C = None if job.C is None else np.ascontiguousarray(job.C[li, lj], np.float32)
                decoded.append((A, B, C, out[job.out_index[li, lj]]))
            self._jobs[key] = decoded
        return self._jobs[key]

    def _params(self, unit: str):
        """The unit's parameters, or :data:`FP32` where it takes the operands as whole fp32 values."""
        return FP32 if full_fp32(self.cap, unit) else search_unit_params(unit, self.cap.input)

    def prepare(self, cands: list[Candidate]):
        """Compute, in batches, every chain the candidates need that is not cached yet."""
        need: dict = {}
        ready = []
        for c in cands:
            params = self._params(c.unit)
            jobs = self.jobs(c.variant, params)
            chain = _chain(params, c.schedule.instruction_k)
            has_c = jobs[0][2] is not None
            try:
                keys = _keys(c, chain, jobs[0][0].shape[1], has_c)
            except ValueError:  # a schedule drawn for another gemmK length (a variant that pads it)
                continue
            if id(keys) in self._ready:  # _keys' lists are kept (its cache), so their ids stay theirs
                continue
            for key in keys:
                if key not in self._chains:
                    need.setdefault((c.variant, c.unit, chain), set()).add(key)
            ready.append(keys)
        for (variant, unit, chain), keys in need.items():
            jobs = self.jobs(variant, self._params(unit))
            by_length: dict = {}
            for key in keys:
                by_length.setdefault(key[3].length, []).append(key)
            for length, same in sorted(by_length.items()):
                per = max(1, _BATCH_VALUES // max(1, length * self.size))
                for lo in range(0, len(same), per):
                    self._run_batch(chain, jobs, same[lo : lo + per])
        self._ready.update(id(keys) for keys in ready)

    def _run_batch(self, chain, jobs, keys):
        """The chains of ``keys`` (all of one length) for every sampled output, in one kernel
        call: column (key, e) of each job holds sampled output e's chain, its operands laid out
        as :func:`emu.gemm.chain_operands` lays them out (the chain's positions, −1 a +0
        product), gathered for every key at once."""
        L = keys[0][3].length
        with_c = np.array([k[4] for k in keys])
        pos = np.stack([_positions(key[3]) for key in keys])  # (keys, L), −1 for a +0 product
        a_cols, b_cols, c_cols, sizes = [], [], [], []
        for A, B, C, _ in jobs:
            E, K = A.shape
            at = np.where(pos < 0, K, pos).T  # (L, keys); row K of the padded operands holds the +0
            for X, cols in ((A, a_cols), (B, b_cols)):
                padded = np.concatenate([X.T, np.zeros((1, E), X.dtype)])  # (K + 1, E)
                cols.append(padded[at].reshape(L, -1))  # (L, keys·E): column (key, e)
            cv = np.zeros((len(keys), E), np.float32)
            if C is not None:
                cv[with_c] = C
            c_cols.append(cv.reshape(1, -1))
            sizes.append(E)
        a_all = np.ascontiguousarray(np.concatenate(a_cols, axis=1))
        b_all = np.ascontiguousarray(np.concatenate(b_cols, axis=1))
        c_all = np.ascontiguousarray(np.concatenate(c_cols, axis=1))
        if chain is FP32:
            out = np.empty(a_all.shape[1], np.float32)
            _fp32_chains(a_all, b_all, np.ascontiguousarray(c_all[0]), out)
        else:
            out = run_kernel(chain, a_all[None], b_all, c_all)[0]
        at, per_job = 0, []
        for E in sizes:
            per_job.append(out[at : at + len(keys) * E].reshape(len(keys), E))
            at += len(keys) * E
        for i, key in enumerate(keys):  # one array over every job's sampled outputs, job after job
            self._chains[key] = np.concatenate([block[i] for block in per_job])

    def identical(self, cand: Candidate) -> int:
        """Identical outputs of the candidate on this sample (of :attr:`size`)."""
        params = self._params(cand.unit)
        jobs = self.jobs(cand.variant, params)
        chain = _chain(params, cand.schedule.instruction_k)
        if params is FP32:
            params = FMA32_PARAMS
        s = cand.schedule
        try:
            chains = _chains(s, jobs[0][0].shape[1])
        except ValueError:  # a schedule drawn for another gemmK length (a variant that pads it): none
            return 0
        keys = _keys(cand, chain, jobs[0][0].shape[1], jobs[0][2] is not None)
        C, want = self._joined(jobs)
        # every job's sampled outputs at once: the reduction, epilogue and rounding act output by
        # output, so one call on the joined outputs gives each output the bits it gets alone
        partials = split_results(chains, (self._chains[key] for key in keys))
        got = serial_merge(params, partials, C, s) if cand.merge == "serial" else combine(params, partials, C, s)
        return int(np.count_nonzero(bits(got) == want))

    def counts(self, cands: list[Candidate]) -> list[int]:
        """:meth:`identical` of each candidate (its chains computed: :meth:`prepare`), the
        candidates whose partials reduce and finish alike (the same unit, GEMMs, number of
        partials, merge and :data:`_EPILOGUE_FIELDS`) judged together: the reduction, epilogue
        and rounding act element by element, so a stack of their partials gives each the bits
        it gets alone."""
        out = [0] * len(cands)
        groups: dict = {}
        for i, c in enumerate(cands):
            params = self._params(c.unit)
            jobs = self.jobs(c.variant, params)
            K = jobs[0][0].shape[1]
            try:
                chains = _chains(c.schedule, K)
            except ValueError:  # a schedule drawn for another gemmK length (a variant that pads it): none
                continue
            keys = _keys(c, _chain(params, c.schedule.instruction_k), K, jobs[0][2] is not None)
            arrays = self._arrays.get(id(keys))
            if arrays is None:
                arrays = self._arrays[id(keys)] = [self._chains[key] for key in keys]
            partials = split_results(chains, arrays)
            s = c.schedule
            group = (params, id(jobs), len(partials), c.merge)
            group += tuple(getattr(s, f) for f in _EPILOGUE_FIELDS)
            groups.setdefault(group, (jobs, s, c.merge, []))[3].append((i, partials))
        for (params, _, n_parts, *_), (jobs, s, merge, members) in groups.items():
            C, want = self._joined(jobs)
            unit = FMA32_PARAMS if params is FP32 else params
            per = max(1, _STACK_VALUES // max(1, n_parts * want.size))
            for lo in range(0, len(members), per):
                block = members[lo : lo + per]
                every = np.stack([x for _, p in block for x in p]).reshape(len(block), n_parts, -1)
                stacked = [every[:, j] for j in range(n_parts)]
                merged = serial_merge(unit, stacked, C, s) if merge == "serial" else combine(unit, stacked, C, s)
                same = np.count_nonzero(bits(merged) == want, axis=1)
                for (i, _), n in zip(block, same):
                    out[i] = int(n)
        return out

    def wrong(self, cand: Candidate) -> int | None:
        """Outputs of this sample the candidate gets wrong; None where the sample cannot judge it
        (a schedule drawn for another gemmK length, which :meth:`identical` counts as none right)."""
        try:
            _chains(cand.schedule, self.jobs(cand.variant, self._params(cand.unit))[0][0].shape[1])
        except ValueError:
            return None
        return self.size - self.identical(cand)

    def _joined(self, jobs) -> tuple[np.ndarray | None, np.ndarray]:
        """C of every job's sampled outputs joined (None where the GEMMs have none), and the
        GPU's outputs' bit patterns, in the order of :meth:`_run_batch`'s arrays."""
        key = id(jobs)
        if key not in self._joins:  # kept with the jobs, so that id(jobs) stays theirs
            Cs = [C for _, _, C, _ in jobs]
            if len({C is None for C in Cs}) > 1:  # not met: a capture's GEMMs all have C or none
                raise ValueError("C: some of the sampled GEMMs have C and some not")
            C = None if Cs[0] is None else np.concatenate(Cs)
            self._joins[key] = (jobs, C, bits(np.concatenate([w for _, _, _, w in jobs])))
        return self._joins[key][1:]


def output_positions(cap: Capture, outputs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The GEMM positions (piece, m, n) under the default :class:`Variant` (:func:`jobs_of`) of
    the given outputs (flat indices into ``cap.out``); −1 where none is found. A plain or batched
    GEMM lays its outputs out row by row, matrix by matrix; a convolution's GEMM rows and columns
    each add a fixed offset to the output's index (channels, images and positions: the
    ``out_index`` of :func:`emu.implicit_gemm.conv_pieces`), so each is found from one row and
    one column of each group's ``out_index``. Every position is checked against the
    ``out_index`` of its GEMM, and one that does not hold it is not returned."""
    flat = np.asarray(outputs, np.int64).reshape(-1)
    piece, m, n = (np.full(flat.size, -1, np.int64) for _ in range(3))
    ok = (flat >= 0) & (flat < cap.out.size)
    M, N, _ = gemm_dims(cap, Variant())
    if not (M and N and ok.any()):
        return piece, m, n
    if cap.conv is None:  # one GEMM, or one per output matrix, each row by row
        p, rem = np.divmod(flat, M * N)
        piece[ok], m[ok], n[ok] = p[ok], rem[ok] // N, rem[ok] % N
    else:
        for g in range(n_jobs(cap)):
            left = np.flatnonzero(ok & (piece < 0))
            if not left.size:
                break
            (col0,) = jobs_of(cap, Variant(), np.arange(M), [0], [g])
            (row0,) = jobs_of(cap, Variant(), [0], np.arange(N), [g])
            rows = col0.out_index[:, 0].astype(np.int64) - int(col0.out_index[0, 0])
            cols = row0.out_index[0].astype(np.int64)
            order = np.argsort(cols, kind="stable")
            sorted_cols = cols[order]
            for i in left:
                need = flat[i] - rows  # the column offset each row would need
                at = np.minimum(np.searchsorted(sorted_cols, need), N - 1)
                hit = np.flatnonzero(sorted_cols[at] == need)
                if hit.size:
                    piece[i], m[i], n[i] = g, hit[0], order[at[hit[0]]]
    for p in np.unique(piece[piece >= 0]):  # the check: each position's out_index is its output
        sel = np.flatnonzero(piece == p)
        (job,) = jobs_of(cap, Variant(), m[sel], n[sel], [int(p)])
        wrong = sel[np.diagonal(job.out_index) != flat[sel]]
        piece[wrong] = m[wrong] = n[wrong] = -1
    return piece, m, n


#: the "unit parameters" and chain of the fp32 FMA unit on whole fp32 operands (``emu.simt``)
FP32 = "fp32 fma"


def _fp32_chains(a, b, c, out):
    """out[j] = the chain acc ← RN32(a[k, j]·b[k, j] + acc), k = 0 … L−1, from acc = c[j]: one
    fp32 FMA chain per column (``emu.simt.fma32_scalar``, the IEEE binary32 fusedMultiplyAdd);
    parallel over blocks of columns."""
    run_tasks(lambda t0, t1: _fp32_chains_tasks(a, b, c, out, t0, t1), -(-a.shape[1] // _CHAIN_COLS))


#: columns per task of :func:`_fp32_chains`
_CHAIN_COLS = 1024


@jit
def _fp32_chains_tasks(a, b, c, out, t0, t1):
    """Tasks ``t0`` … ``t1`` − 1 of :func:`_fp32_chains`."""
    L, cols = a.shape
    for j in range(t0 * _CHAIN_COLS, min(t1 * _CHAIN_COLS, cols)):
        acc = c[j]
        for k in range(L):
            acc = fma32_scalar(a[k, j], b[k, j], acc)
        out[j] = acc


_CHAINS: dict = {}
_PLANS: dict = {}
_KEYS: dict = {}


def _chain(params, instruction_k: int):
    if params is FP32:
        return FP32
    key = (params, instruction_k)
    if key not in _CHAINS:
        _CHAINS[key] = chain_params(params, Schedule(instruction_k=instruction_k))
    return _CHAINS[key]


def _plan(s: Schedule, K: int) -> tuple:
    """The fields of ``s`` that decide ``s.chains(K)``, and K."""
    return (s.k_tile, s.splits, s.split_rule, s.split_bounds, s.residue_tile, s.promotion_interval, s.c_entry, K)


def _chains(s: Schedule, K: int) -> list[Chain]:
    """``s.chains(K)``, cached by the fields that decide them."""
    key = _plan(s, K)
    if key not in _PLANS:
        _PLANS[key] = s.chains(K)
    return _PLANS[key]


def _keys(cand: Candidate, chain, K: int, has_c: bool) -> list[tuple]:
    """The cache keys of a candidate's chains (:meth:`emu.schedule.Schedule.chains`): (variant,
    unit, group, the chain without its split index, from C); one chain is computed once for every
    candidate that runs it. Cached by the fields that decide them."""
    s = cand.schedule
    memo = (cand.variant, cand.unit, chain, _plan(s, K), has_c)
    if memo not in _KEYS:
        _KEYS[memo] = [
            (
                cand.variant,
                cand.unit,
                1 if chain is FP32 else chain.group_size,
                ch._replace(split=0, from_c=False),
                ch.from_c and has_c,
            )
            for ch in _chains(s, K)
        ]
    return _KEYS[memo]


@functools.cache
def _positions(chain: Chain) -> np.ndarray:
    """A chain's sequence positions (:meth:`emu.schedule.Chain.positions`), cached."""
    return chain.positions()


#: the Schedule fields the reduction, epilogue and rounding of the partials read
#: (:func:`emu.gemm.combine`, :func:`emu.gemm.finish`, :func:`.gemms.serial_merge`)
_EPILOGUE_FIELDS = (
    "reduction",
    "reduction_seed",
    "partial_format",
    "c_entry",
    "alpha",
    "beta",
    "epilogue_fma",
    "output",
    "scale_order",
)
#: partial values stacked per :meth:`Sample.counts` call
_STACK_VALUES = 1 << 20

#: decoded values per chain batch (a and b): a few hundred MB at most
_BATCH_VALUES = 1 << 24


def boundary_distance(cap: Capture, job: GemmJob) -> np.ndarray:
    """How far each output's exact value (float64, from the operands' values) lies from the
    nearest rounding boundary of the output format, in its ulps (0: on a boundary)."""
    v = operand_values(cap, job.A) @ operand_values(cap, job.B)
    if job.C is not None:
        v = cap.alpha * v + cap.beta * np.asarray(job.C, np.float64)
    else:
        v = cap.alpha * v
    out = get_format(cap.out_format)
    frac_bits, emin = out.fraction_bits, out.emin
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.maximum(np.floor(np.log2(np.abs(v))), emin)
        ulp = np.exp2(e - frac_bits)
        frac = np.mod(v / ulp, 1.0)
    d = np.abs(frac - 0.5)
    return np.where(np.isfinite(d), d, 1.0)
