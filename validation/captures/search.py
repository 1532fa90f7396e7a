"""The schedule search: which unit, gemmK order and accumulation schedule reproduce a capture.

The space, per capture: the unit (the GPU's matrix unit, from ``--hw`` or the capture's ``gpu``,
and fp32 FMA for the non-tensor-core kernels); for convolutions the gemmK order (``rsc``/``crs``,
channel blocks, a rotated filter for backward data); the splits (one chain, or k tiles of 16 …
256 cut into 2 … :data:`MAX_SPLITS` splits, ⌈tiles/splits⌉ each or as even as possible); the
reduction of the partials (in split order, or a pairwise tree); 8 products per instruction
where the unit's group is 16; where C enters (chain, workspace, epilogue). Every unit runs with
the capture's operand format (``Capture.input``: fp16, bf16, tf32), and a tf32 capture is also
tried with its operands rounded to tf32 to nearest-even first (:data:`TF32_ROUNDINGS`). The kernel names
(``models.libraries``) only order the space: the named families are tried first and every
candidate is judged by the bits alone.

The search runs in three stages so that a million outputs take seconds: every candidate on a
tiny sample (a few outputs of a few GEMMs), the survivors on a larger sample, then the last
survivors on every output through :func:`emu.gemm` itself. When nothing survives the first
stage, the candidates nearest on the samples are run in full and the differing elements reported.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

import emu
import models
from emu.dot import run_kernel, unit_params
from emu.formats import get_format
from emu.gemm import chain_params, combine, finish, operand_in_order
from emu.implicit_gemm import K_ORDERS, conv_pieces
from emu.operands import decode_flush, multiplied_values, operand, round_to_tf32, value_dtype
from emu.schedule import SCALE_ORDERS, Schedule, chain_positions
from models.kernels import ATOMIC_ORDERS
from models.libraries import k_tile_from_name, matching, not_modelled, unit_from_gpu

from .capture import PASS_OF, Capture, CaptureError, GemmJob

__all__ = [
    "Variant",
    "Candidate",
    "SearchResult",
    "search",
    "search_scaled",
    "scaled_candidates",
    "scaled_split_schedules",
    "run_scaled",
    "jobs_of",
    "MAX_SPLITS",
    "MAX_CANDIDATES",
]

#: the most splits tried per k-tile width, and the most candidates judged in all
MAX_SPLITS = 128
MAX_CANDIDATES = 60000
K_TILES = (64, 128, 32, 16, 8, 256)
#: lanes of strided splits (threads that each take every n-th k, then reduce)
STRIDED = (32, 64, 128, 256, 16, 8)
#: outputs per GEMM in the first and second stages, and GEMMs sampled
#: (outputs, pool they are chosen from) of the first and second stages; fp32 outputs need few
STAGE1 = (64, 4096)
STAGE1_FP32 = (32, 32)
STAGE2 = (512, 65536)
STAGE2_FP32 = (256, 256)
#: candidates run on every output at most
MAX_FULL = 6


#: how a kernel rounds fp32 operands to tf32 before its mma: ``"rne"`` to nearest, ties to even
#: (CUTLASS's ``NumericConverter<tfloat32_t, float>``; measured on the H200 tf32 captures), or
#: ``""``: the raw fp32 bits reach the unit, which drops the 13 low ones (RZ, the unit's model)
TF32_ROUNDINGS = ("rne", "")


@dataclass(frozen=True)
class Variant:
    """How a convolution becomes GEMMs (see :func:`emu.implicit_gemm.conv_pieces`); the default
    for a plain GEMM. ``tf32_rounding``: the kernel's own rounding of fp32 operands to tf32
    before the unit (:data:`TF32_ROUNDINGS`)."""

    k_order: str | None = None
    channel_block: int = 0
    flip: bool = False
    tf32_rounding: str = ""

    def describe(self) -> str:
        if self.k_order is None:
            return "operands rounded to tf32 (RNE) before the unit" if self.tf32_rounding else ""
        if self.channel_block:
            axis = "c" if self.k_order in ("rsc", "crs") else "k"
            text = f"gemmK ({axis} // {self.channel_block}, r, s, {axis} % {self.channel_block})"
        else:
            text = "gemmK (" + ", ".join(self.k_order) + ")"
        return text + (", filter rotated (taps descending)" if self.flip else "")


@dataclass(frozen=True)
class Candidate:
    unit: str
    variant: Variant
    schedule: Schedule
    family: str = "generic"

    def describe(self) -> str:
        parts = [f"unit {self.unit}"]
        if self.variant.describe():
            parts.append(self.variant.describe())
        parts.append(self.schedule.describe())
        return "; ".join(parts)

    def fields(self) -> dict:
        out = {"unit": self.unit, "family": self.family, **self.schedule.fields()}
        if self.variant.k_order:
            out.update(k_order=self.variant.k_order, channel_block=self.variant.channel_block, flip=self.variant.flip)
        if self.variant.tf32_rounding:
            out["tf32_rounding"] = self.variant.tf32_rounding
        return out


@dataclass
class SearchResult:
    """What the search found (see ``docs/library.md`` for the JSON fields)."""

    answer: str
    n: int
    n_identical: int
    best: Candidate | None
    reproducing: list[Candidate]
    emulated: np.ndarray | None
    searched: int
    seconds: float
    stages: list[tuple[str, int, int]] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)
    unit: str = ""


def jobs_of(cap: Capture, variant: Variant, rows=None, columns=None, pieces=None) -> list[GemmJob]:
    """The capture's GEMMs under ``variant``; ``rows``/``columns`` (per-GEMM index arrays) and
    ``pieces`` (which GEMMs) restrict them to a sample."""
    o = cap.operands
    if variant.tf32_rounding:  # the kernel rounds the fp32 operands (not C or a bias) to tf32 first
        o = {
            k: round_to_tf32(np.asarray(v, np.uint32)) if k in ("A", "B", "input", "weight") else v
            for k, v in o.items()
        }
    if cap.op in ("mm", "addmm"):
        M, N = cap.out.shape
        idx = np.arange(M * N).reshape(M, N)
        C = None
        if cap.op == "addmm":
            C = np.broadcast_to(_c_values(cap, o["C"]), (M, N))
        return [_restrict(GemmJob(o["A"], o["B"], C, idx), rows, columns)]
    if cap.op == "bmm":
        b, M, N = cap.out.shape
        sel = range(b) if pieces is None else pieces
        return [
            _restrict(GemmJob(o["A"][i], o["B"][i], None, (i * M * N + np.arange(M * N)).reshape(M, N)), rows, columns)
            for i in sel
        ]
    if cap.op == "linear":
        x, w = o["input"], o["weight"]
        A = x.reshape(-1, x.shape[-1])
        N = w.shape[0]
        idx = np.arange(A.shape[0] * N).reshape(A.shape[0], N)
        C = None
        if "bias" in o:
            C = np.broadcast_to(_c_values(cap, o["bias"])[None], idx.shape)
        return [_restrict(GemmJob(A, w.T, C, idx), rows, columns)]
    pass_ = PASS_OF[cap.op]
    first, second = {
        "fwd": (o.get("input"), o.get("weight")),
        "bwd_data": (o.get("grad_output"), o.get("weight")),
        "bwd_weight": (o.get("grad_output"), o.get("input")),
    }[pass_]
    groups = range(cap.conv.groups) if pieces is None else pieces
    out = []
    for g in groups:
        (piece,) = conv_pieces(
            pass_,
            cap.conv,
            first,
            second,
            variant.k_order,
            flip=variant.flip,
            channel_block=variant.channel_block,
            rows=rows,
            columns=columns,
            groups=[g],
        )
        C = None
        if pass_ == "fwd" and "bias" in o:
            bias = _c_values(cap, o["bias"])
            r = np.arange(cap.conv.Kg) if rows is None else np.asarray(rows)
            C = np.broadcast_to(bias[g * cap.conv.Kg + r][:, None], piece.out_index.shape)
        out.append(GemmJob(piece.A, piece.B, C, piece.out_index))
    return out


def _c_values(cap: Capture, bits: np.ndarray) -> np.ndarray:
    """C or a bias (bit patterns of the capture's operand format) as float32 values: fp32 adds
    them whole (a tf32 capture's C is float32, never cut to tf32)."""
    return bits.view(value_dtype(cap.input)).astype(np.float32)


def _operand_values(cap: Capture, bits: np.ndarray) -> np.ndarray:
    """Operand values (float64) as the unit multiplies them (:func:`emu.operands.multiplied_values`)."""
    return multiplied_values(bits.view(value_dtype(cap.input)), cap.input)


def _restrict(job: GemmJob, rows, columns) -> GemmJob:
    if rows is None and columns is None:
        return job
    r = slice(None) if rows is None else np.asarray(rows)
    c = slice(None) if columns is None else np.asarray(columns)
    C = None if job.C is None else job.C[r][:, c]
    return GemmJob(job.A[r], job.B[:, c], C, job.out_index[r][:, c])


def _n_jobs(cap: Capture) -> int:
    if cap.op == "bmm":
        return cap.out.shape[0]
    return cap.conv.groups if cap.conv is not None else 1


def _gemm_dims(cap: Capture, variant: Variant) -> tuple[int, int, int]:
    if cap.conv is not None:
        return cap.conv.gemm_size(PASS_OF[cap.op])
    if cap.op == "bmm":
        return cap.out.shape[1], cap.out.shape[2], cap.operands["A"].shape[2]
    if cap.op == "linear":
        return int(np.prod(cap.out.shape[:-1])), cap.out.shape[-1], cap.operands["weight"].shape[1]
    return cap.out.shape[0], cap.out.shape[1], cap.operands["A"].shape[1]


# --- the space ----------------------------------------------------------------------------------


def _variants(cap: Capture, named) -> list[Variant]:
    if cap.conv is None:
        return [Variant(tf32_rounding=r) for r in TF32_ROUNDINGS] if cap.input == "tf32" else [Variant()]
    pass_ = PASS_OF[cap.op]
    if cap.conv.R * cap.conv.S == 1 and pass_ != "bwd_weight":  # a 1×1 filter: every order is the channel order
        return [Variant(K_ORDERS[pass_][0])]
    channels = cap.conv.Cg if pass_ == "fwd" else cap.conv.Kg
    flips = (False, True) if pass_ == "bwd_data" else (False,)
    seen, out = set(), []

    def add(order, block, flip):
        block = block if 1 < block < channels and channels % block == 0 else 0
        key = ("blk", block, flip) if block else (order, 0, flip)
        if key not in seen:
            seen.add(key)
            out.append(Variant(order, block, flip))

    for fam in named:
        for order in fam.k_orders or K_ORDERS[pass_]:
            if order in K_ORDERS[pass_]:
                for block in fam.channel_blocks:
                    for flip in fam.flip:
                        add(order, block, flip)
    for order in K_ORDERS[pass_]:
        for block in (0, 64, 32, 16, 8, 128, 256):
            for flip in flips:
                add(order, block, flip)
    return out


def _split_schedules(K: int, tiles_first: tuple[int, ...], output: str) -> list[Schedule]:
    """One chain, then splits of k tiles: ⌈tiles/splits⌉ tiles each (CUTLASS's and cuBLAS's
    ``gemm_k_size``: ⌈K/splits⌉ rounded up to the k tile) for tiles of 8 … 256, then single k
    values as even as possible (``emu.GemmOrder``'s split); each distinct set of bounds once."""
    out = [Schedule(output=output)]
    seen = set()
    for lanes in STRIDED:
        if lanes < K:
            out.append(Schedule(splits=lanes, split_rule="strided", output=output))
    widths = tiles_first + tuple(t for t in K_TILES if t not in tiles_first)
    for rule, tile_widths in (("ceil", widths), ("even", (1,))):
        for kt in tile_widths:
            tiles = -(-K // kt)
            for s in range(2, min(tiles, MAX_SPLITS) + 1):
                try:
                    sch = Schedule(k_tile=kt, splits=s, split_rule=rule, output=output)
                    ranges = tuple((r.start, r.stop) for r in sch.split_ranges(K))
                except ValueError:
                    continue
                if ranges in seen:
                    continue
                seen.add(ranges)
                out.append(sch)
    return out


def _shapes(base: Schedule, reductions, c_entries, K: int, residue_tiles, group: int, partials=(None,)):
    """(reduction, C entry, residue tile) per split schedule: the residue-first variants
    (CUTLASS 2.x) only where they move the unit's group boundaries (a zero fill of whole groups
    in front of a chain from +0 changes nothing)."""
    lengths = [r.stop - r.start for r in base.split_ranges(K)]
    if base.split_rule == "strided":
        residue_tiles = ()
    tiles = [t for t in residue_tiles if any(n % t and (t - n % t) % group for n in lengths)]
    formats = partials if base.splits > 1 else (None,)
    for red in reductions:
        for ce in c_entries:
            for pf in formats:
                yield red, ce, 0, pf
                for tile in tiles:
                    yield red, ce, tile, pf


def candidates(cap: Capture, unit_name: str) -> tuple[list[Candidate], list[str]]:
    """Every candidate for the capture, the named families' first (see the module docstring);
    and the names of the families the kernel names matched."""
    named = matching(cap.kernels, cap.op)
    hinted_tile = k_tile_from_name(cap.kernels)
    variants = _variants(cap, named)
    _, _, K = _gemm_dims(cap, variants[0])
    units = [unit_name, "fma32"]
    fp16_acc = cap.input == "fp16" and cap.out_format == "fp16"
    if fp16_acc and _unit_params(unit_name, cap.input).family == emu.Family.TRUNCATED_FUSED:
        units.insert(1, f"{unit_name}/fp16")  # NVIDIA units also accumulate in fp16 (…_f16_s161616gemm_f16)
    if any(f.unit == "fma32" for f in named):
        units = ["fma32"] + [u for u in units if u != "fma32"]
    image = _image_tile(cap)
    tiles_first = tuple(
        dict.fromkeys(
            ([image] if image else [])
            + ([hinted_tile] if hinted_tile else [])
            + [t for f in named for t in f.k_tiles if t > 1]
        )
    )
    splits = _split_schedules(K, tiles_first, cap.out_format)
    residue_tiles = tuple(dict.fromkeys(tiles_first + (64, 32, 128, 16)))
    partials = (None, cap.out_format) if cap.out_format != "fp32" else (None,)
    has_c = cap.op == "addmm" or "bias" in cap.operands
    c_entries = ("epilogue", "chain") if has_c else ("chain",)
    if cap.alpha != 1 or cap.beta != 1:
        c_entries = ("epilogue",)
    out: list[Candidate] = []
    seen = set()
    for u in units:
        group = _unit_params(u, cap.input).group_size
        iks = (0, group // 2) if u != "fma32" and group >= 8 else (0,)
        for variant in variants:
            for ik in iks:
                for base in splits:
                    reductions = (
                        ("sequential", "tree") if base.splits > 3 else ("sequential",)
                    )  # 3: (p0+p1)+p2 either way
                    if base.split_rule == "strided":
                        reductions = ("halving", "tree", "sequential")
                    for red, ce, tile, pf in _shapes(
                        base, reductions, c_entries, K, residue_tiles, ik or group, partials
                    ):
                        sch = Schedule(
                            k_tile=base.k_tile,
                            splits=base.splits,
                            split_rule=base.split_rule,
                            reduction=red,
                            instruction_k=ik,
                            residue_tile=tile,
                            partial_format=pf,
                            c_entry=ce,
                            alpha=cap.alpha,
                            beta=cap.beta,
                            output=cap.out_format,
                        )
                        key = (u, variant, sch)
                        if key not in seen:
                            seen.add(key)
                            out.append(Candidate(u, variant, sch))
    hints = [f.name for f in named]
    if len(out) > MAX_CANDIDATES:
        hints.append(f"space cut to its first {MAX_CANDIDATES} of {len(out)} candidates")
    return out[:MAX_CANDIDATES], hints


# --- judging --------------------------------------------------------------------------------------


class _Sample:
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
        M, N, _ = _gemm_dims(cap, Variant())
        total = _n_jobs(cap)
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
                score = _boundary_distance(cap, jobs_of(cap, Variant(), rows, cols, [p])[0])
            mm, nn = np.meshgrid(rows, cols, indexing="ij")
            candidates.append((np.full(score.size, p), mm.reshape(-1), nn.reshape(-1), score.reshape(-1)))
        piece, m, n, score = (np.concatenate(x) for x in zip(*candidates))
        keep = np.argsort(score, kind="stable")[:size]
        self.elements = {}
        for p in np.unique(piece[keep]):
            sel = keep[piece[keep] == p]
            self.elements[int(p)] = (m[sel], n[sel])
        self.size = int(keep.size)
        self._jobs = {}
        self._chains = {}

    def jobs(self, variant: Variant, params):
        """Per sampled GEMM: decoded rows of A (E, K) and columns of B as rows (E, K), one per
        sampled output, C per output (or None), and the GPU's outputs. ``params``: the unit's (its
        input format is the capture's; its flushing decides the decode)."""
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

    def prepare(self, cands: list[Candidate]):
        """Compute, in batches, every chain the candidates need that is not cached yet."""
        need: dict = {}
        for c in cands:
            params = _unit_params(c.unit, self.cap.input)
            jobs = self.jobs(c.variant, params)
            chain = _chain(params, c.schedule.instruction_k)
            has_c = jobs[0][2] is not None
            for key in _keys(c, chain, jobs[0][0].shape[1], has_c):
                if key not in self._chains:
                    need.setdefault((c.variant, c.unit, chain), set()).add(key)
        for (variant, unit, chain), keys in need.items():
            jobs = self.jobs(variant, _unit_params(unit, self.cap.input))
            by_length: dict = {}
            for key in keys:
                by_length.setdefault(_chain_length(key), []).append(key)
            for length, same in sorted(by_length.items()):
                per = max(1, _BATCH_VALUES // max(1, length * self.size))
                for lo in range(0, len(same), per):
                    self._run_batch(chain, jobs, same[lo : lo + per])

    def _run_batch(self, chain, jobs, keys):
        """The chains of ``keys`` (all of one length) for every sampled output, in one kernel
        call: column (key, e) of each job holds sampled output e's chain over the key's k range."""
        L = _chain_length(keys[0])
        idx = np.stack([_chain_indices(key) for key in keys])  # (keys, L), -1: a +0 product
        with_c = np.array([k[5] for k in keys])
        a_cols, b_cols, c_cols, sizes = [], [], [], []
        for A, B, C, _ in jobs:
            E = A.shape[0]
            A0 = np.concatenate([A, np.zeros((E, 1), np.float32)], axis=1)  # index -1 is +0
            B0 = np.concatenate([B, np.zeros((E, 1), np.float32)], axis=1)
            a_cols.append(A0[:, idx].transpose(2, 1, 0).reshape(L, -1))  # (L, keys·E)
            b_cols.append(B0[:, idx].transpose(2, 1, 0).reshape(L, -1))
            cv = np.zeros((len(keys), E), np.float32)
            if C is not None:
                cv[with_c] = C
            c_cols.append(cv.reshape(1, -1))
            sizes.append(E)
        a_all = np.ascontiguousarray(np.concatenate(a_cols, axis=1))
        b_all = np.ascontiguousarray(np.concatenate(b_cols, axis=1))
        c_all = np.ascontiguousarray(np.concatenate(c_cols, axis=1))
        out = run_kernel(chain, a_all[None], b_all, c_all)[0]
        at, per_job = 0, []
        for E in sizes:
            per_job.append(out[at : at + len(keys) * E].reshape(len(keys), E))
            at += len(keys) * E
        for i, key in enumerate(keys):
            self._chains[key] = [block[i] for block in per_job]

    def identical(self, cand: Candidate) -> int:
        """Identical outputs of the candidate on this sample (of :attr:`size`)."""
        params = _unit_params(cand.unit, self.cap.input)
        jobs = self.jobs(cand.variant, params)
        chain = _chain(params, cand.schedule.instruction_k)
        s = cand.schedule
        keys = _keys(cand, chain, jobs[0][0].shape[1], jobs[0][2] is not None)
        same = 0
        for j, (_, _, C, want) in enumerate(jobs):
            partials = [self._chains[key][j] for key in keys]
            got = combine(params, partials, C, s)
            same += int(np.count_nonzero(_bits(got) == _bits(want)))
        return same


_RANGES: dict = {}
_CHAINS: dict = {}


def _chain(params, instruction_k: int):
    key = (params, instruction_k)
    if key not in _CHAINS:
        _CHAINS[key] = chain_params(params, Schedule(instruction_k=instruction_k))
    return _CHAINS[key]


def _keys(cand: Candidate, chain, K: int, has_c: bool) -> list[tuple]:
    """The chain keys of a candidate's splits: (variant, unit, group, start, stop, from C,
    residue tile)."""
    s = cand.schedule
    rk = (s.k_tile, s.splits, s.split_rule, s.split_bounds, K)
    if rk not in _RANGES:
        _RANGES[rk] = [(r.start, r.stop, r.step or 1) for r in s.split_ranges(K)]
    out = []
    for i, (k0, k1, step) in enumerate(_RANGES[rk]):
        with_c = i == 0 and s.c_entry == "chain" and has_c
        tile = s.residue_tile if (s.residue_tile and (k1 - k0) % s.residue_tile) else 0
        out.append((cand.variant, cand.unit, chain.group_size, k0, k1, with_c, tile, step))
    return out


def _chain_indices(key) -> np.ndarray:
    """The k indices one chain reads, −1 for the zero fill of a residue-first tile."""
    return chain_positions(key[3], key[4], key[7], key[6])


def _chain_length(key) -> int:
    length, tile = len(range(key[3], key[4], key[7])), key[6]
    return length + ((tile - length % tile) if tile else 0)


#: decoded values per chain batch (a and b): a few hundred MB at most
_BATCH_VALUES = 1 << 24
_UNITS: dict = {}


def _boundary_distance(cap: Capture, job: GemmJob) -> np.ndarray:
    """How far each output's exact value (float64, from the operands' values) lies from the
    nearest rounding boundary of the output format, in its ulps (0: on a boundary)."""
    v = _operand_values(cap, job.A) @ _operand_values(cap, job.B)
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


def _unit_params(name: str, fmt: str = "fp16"):
    if (name, fmt) not in _UNITS:
        _UNITS[name, fmt] = unit_params(_model_unit(name, fmt))
    return _UNITS[name, fmt]


def _model_unit(name: str, fmt: str = "fp16"):
    """``models.unit`` for a search unit name, ``NAME`` or ``NAME/fp16`` (the fp16-accumulator
    variant of an NVIDIA unit), with operands of ``fmt`` (the capture's input format)."""
    base, _, acc = name.partition("/")
    return models.unit(base, output=acc or "fp32", input=fmt)


def _bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(np.dtype(f"u{x.dtype.itemsize}"))


def _inside_ensemble(cap: Capture, cand: Candidate) -> tuple[bool, int]:
    """Whether every output of ``cap`` is the fp16 outcome of some order of fp32 atomic adds of
    the candidate's split partials (the run-to-run spread of a split-K kernel with atomics): the
    closest outcome over the ensemble's orders (``models.kernels.ATOMIC_ORDERS``) equals the GPU's
    value. Returns (inside, outputs equal to the ascending order's)."""
    unit = _model_unit(cand.unit, cap.input)
    order = emu.Schedule(
        k_order=cand.schedule.k_order,
        pad_k=cand.schedule.pad_k,
        k_tile=cand.schedule.k_tile,
        splits=cand.schedule.splits,
        split_rule=cand.schedule.split_rule,
        residue_tile=cand.schedule.residue_tile,
        instruction_k=cand.schedule.instruction_k,
    )
    flat = cap.out.reshape(-1)
    reached = np.zeros(flat.size, bool)
    for job in jobs_of(cap, cand.variant):
        parts = emu.split_partials(job.A, job.B, unit, order, seed=ATOMIC_ORDERS.seed)
        gpu = flat[job.out_index.reshape(-1)].astype(np.float64)
        count = ATOMIC_ORDERS.envelope_order_count(ATOMIC_ORDERS.members, parts.parts.size)
        near, _ = parts.envelope(np.where(np.isnan(gpu), 0.0, gpu), count, "element")
        reached[job.out_index.reshape(-1)] = _bits(np.asarray(near, np.float16)) == _bits(gpu.astype(np.float16))
    return bool(reached.all()), int(reached.sum())


def run_candidate(cap: Capture, cand: Candidate) -> np.ndarray:
    """The capture's whole output as the candidate computes it (through :func:`emu.gemm`)."""
    unit = _model_unit(cand.unit, cap.input)
    out = np.zeros(cap.out.size, cap.out.dtype)
    for job in jobs_of(cap, cand.variant):
        res = emu.gemm(job.A, job.B, job.C, unit, cand.schedule)
        out[job.out_index.reshape(-1)] = res.reshape(-1)
    return out.reshape(cap.out.shape)


def resolve_unit(cap: Capture, hw: str | None) -> str:
    """The unit to search with: ``hw`` (a unit name or alias) or the one the capture's ``gpu``
    names; CaptureError when neither says."""
    if hw:
        try:
            models.unit(hw, input=cap.input)
        except ValueError as exc:
            raise CaptureError(f"--hw: {exc}") from None
        return hw
    name = unit_from_gpu(cap.gpu)
    if name is None:
        raise CaptureError(
            f"gpu: {cap.gpu or 'not recorded'!r} is not a GPU fp16emu models; name the unit with --hw "
            f"(one of {', '.join(models.UNIT_NAMES)})"
        )
    try:
        models.unit(name, input=cap.input)
    except ValueError as exc:
        raise CaptureError(f"gpu: {cap.gpu!r} (unit {name}): {exc}") from None
    return name


def _image_tile(cap: Capture) -> int:
    """Backward weight's gemmK runs over (n, p, q): P·Q, the k tile of splits at image bounds
    (a batched GEMM per image, its partials reduced after, as cuDNN's reduce_wgrad kernels do)."""
    if cap.conv is None or PASS_OF[cap.op] != "bwd_weight" or cap.conv.N < 2:
        return 0
    return cap.conv.P * cap.conv.Q


def _fits(fam, cand: Candidate, unit_name: str, image: int = 0) -> bool:
    """Whether a candidate lies in a named family's part of the space."""
    want_unit = "fma32" if fam.unit == "fma32" else unit_name
    s, v = cand.schedule, cand.variant
    if cand.unit != want_unit:
        return False
    if s.splits > 1:
        if s.split_rule != fam.split_rule or not fam.k_tiles:
            return False
        width = s.splits if s.split_rule == "strided" else s.k_tile
        if width not in fam.k_tiles and not (image and width == image):
            return False
        if s.reduction not in (fam.reduction, "sequential"):
            return False
    if s.instruction_k not in (0, fam.instruction_k):
        return False
    if v.k_order is not None and fam.k_orders:
        if v.channel_block not in fam.channel_blocks and v.channel_block:
            return False
        if not v.channel_block and v.k_order not in fam.k_orders:
            return False
        if v.flip not in fam.flip:
            return False
    return True


def tiers(cap: Capture, unit_name: str, cands: list[Candidate]) -> list[tuple[str, list[Candidate]]]:
    """The space in the order it is searched: the kernel names' families; the GPU's matrix unit
    (fp32 accumulator) with plain splits; the same with residue-first tiles or a narrower
    instruction; the other units (fp32 FMA, an fp16 accumulator). The search stops after the
    first tier in which some candidate reproduces every output."""
    named = matching(cap.kernels, cap.op)
    image = _image_tile(cap)
    groups: dict[str, list[Candidate]] = {}
    for c in cands:
        fams = [f for f in named if _fits(f, c, unit_name, image)]
        if fams:
            groups.setdefault("kernel-name families", []).append(Candidate(c.unit, c.variant, c.schedule, fams[0].name))
        elif c.unit != unit_name:
            groups.setdefault("other units", []).append(c)
        elif c.schedule.residue_tile or c.schedule.instruction_k or c.schedule.partial_format:
            groups.setdefault(f"unit {unit_name}, residue tiles, narrow instructions, fp16 partials", []).append(c)
        else:
            groups.setdefault(f"unit {unit_name}", []).append(c)
    order = [
        "kernel-name families",
        f"unit {unit_name}",
        f"unit {unit_name}, residue tiles, narrow instructions, fp16 partials",
        "other units",
    ]
    return [(name, groups[name]) for name in order if name in groups]


#: the k of one fp8 wgmma (m64nNk32): the k tile the promotion interval counts
FP8_K_TILE = 32
#: promotion intervals tried, in wgmma k-blocks (CUTLASS's default mma_promotion_interval is 4)
PROMOTION_INTERVALS = (1, 2, 4, 8, 16, 32, 64, 128)
#: rows of A the first stage of a scaled_mm search runs (every column)
SCALED_ROWS = 8


def scaled_candidates(cap: Capture, unit_name: str) -> list[Candidate]:
    """Every schedule of a ``scaled_mm`` capture: one chain of the unit (fast accumulation) or
    two-level accumulation at each promotion interval that leaves more than one interval, times
    the scale orders (``emu.schedule.SCALE_ORDERS``) and, with a bias, its FMA or separate add.
    ``use_fast_accum`` only decides which come first: the output decides."""
    K = cap.operands["A"].shape[1]
    intervals = [0] + [n for n in PROMOTION_INTERVALS if n * FP8_K_TILE < K]
    if not cap.extra.get("use_fast_accum"):
        intervals = intervals[1:] + intervals[:1]
    has_bias = "bias" in cap.extra
    out = []
    for n in intervals:
        for order in SCALE_ORDERS:
            for fma in (True, False) if has_bias else (True,):
                sch = Schedule(
                    k_tile=FP8_K_TILE if n else 1,
                    promotion_interval=n,
                    scale_order=order,
                    epilogue_fma=fma,
                    c_entry="epilogue" if has_bias else "chain",
                    output=cap.out_format,
                )
                out.append(Candidate(unit_name, Variant(), sch, "fp8-promotion" if n else "fp8-fast-accum"))
    return out


#: k-tile widths a split-K fp8 kernel cuts K into (whole CTA k tiles of 4, 2 or 8 wgmma k-blocks)
FP8_SPLIT_TILES = (128, 64, 256)
#: the most splits tried per tile width
MAX_FP8_SPLITS = 64


def scaled_split_schedules(K: int) -> list[Schedule]:
    """The accumulation schedules of split-K fp8 kernels (no epilogue, fp32 output): K cut into
    k tiles of :data:`FP8_SPLIT_TILES`, ⌈tiles/splits⌉ per split (cuBLAS's rule, as for its
    fp16 nvjet split-K), 2 … :data:`MAX_FP8_SPLITS` splits, each distinct set of bounds once;
    in each split one chain of the unit (fast accumulation) or two-level accumulation at each
    promotion interval shorter than the longest split (intervals counted from the split's
    start); the partials added in fp32 in split order, as ``splitKreduce`` does. The bounds are
    given in 32-wide k-blocks (``split_bounds``) so the promotion interval counts wgmma k-blocks."""
    blocks = -(-K // FP8_K_TILE)
    seen, out = set(), []
    for width in FP8_SPLIT_TILES:
        step = width // FP8_K_TILE
        tiles = -(-K // width)
        for splits in range(2, min(tiles, MAX_FP8_SPLITS) + 1):
            per = -(-tiles // splits)
            bounds = tuple(sorted({min(blocks, i * per * step) for i in range(splits + 1)}))
            if len(bounds) != splits + 1 or bounds in seen:
                continue
            seen.add(bounds)
            longest = max(b1 - b0 for b0, b1 in zip(bounds[:-1], bounds[1:]))
            for n in (0,) + tuple(n for n in PROMOTION_INTERVALS if n < longest):
                out.append(
                    Schedule(k_tile=FP8_K_TILE, splits=splits, split_bounds=bounds, promotion_interval=n, output="fp32")
                )
    return out


def _epilogues(cap: Capture) -> list[tuple[str, bool]]:
    """(scale order, bias in one FMA) pairs :func:`scaled_candidates` tries."""
    return [(order, fma) for order in SCALE_ORDERS for fma in ((True, False) if "bias" in cap.extra else (True,))]


def _with_epilogue(cap: Capture, acc: Schedule, order: str, fma: bool) -> Schedule:
    return replace(
        acc,
        scale_order=order,
        epilogue_fma=fma,
        c_entry="epilogue" if "bias" in cap.extra else "chain",
        output=cap.out_format,
    )


def _scaled_split_tier(cap: Capture, unit_name: str, rows: np.ndarray, want_rows: np.ndarray, progress=None):
    """The split-K tier of a ``scaled_mm`` search on the sample ``rows``: each accumulation
    schedule of :func:`scaled_split_schedules` run once (its reduced fp32 accumulator), every
    epilogue applied to it (``emu.gemm.finish``: the epilogue follows the reduction). Returns
    (the candidates that reproduce the rows, grouped by accumulation schedule; how many were
    tried; the nearest (accumulation schedule, candidate) and how many of the rows it reproduces)."""
    unit = _model_unit(unit_name, cap.input)
    sa, sb = cap.extra["scale_a"], cap.extra["scale_b"]
    sa = sa[rows] if sa.shape[0] > 1 else sa
    accs = scaled_split_schedules(cap.operands["A"].shape[1])
    groups: dict[Schedule, list[Candidate]] = {}
    tried, nearest, nearest_same = 0, None, -1
    for i, sch in enumerate(accs):
        acc = emu.gemm(cap.operands["A"][rows], cap.operands["B"], None, unit, sch)
        for order, fma in _epilogues(cap):
            cand = Candidate(unit_name, Variant(), _with_epilogue(cap, sch, order, fma), "fp8-split-k")
            got = finish(unit, acc, cap.extra.get("bias"), cand.schedule, sa, sb)
            same = int(np.count_nonzero(_bits(np.asarray(got)).reshape(-1) == want_rows))
            tried += 1
            if same == want_rows.size:
                groups.setdefault(sch, []).append(cand)
            if same > nearest_same:
                nearest, nearest_same = (sch, cand), same
        if progress:
            progress("fp8 split-K schedules, first rows", i + 1, len(accs))
    return groups, tried, nearest, nearest_same


def run_scaled(cap: Capture, cand: Candidate, rows=None) -> np.ndarray:
    """A ``scaled_mm`` capture's output (its ``rows`` of A only, when given) as the candidate
    computes it: ``emu.gemm`` with the scales and bias of the capture."""
    A, B = cap.operands["A"], cap.operands["B"]
    sa, sb = cap.extra["scale_a"], cap.extra["scale_b"]
    if rows is not None:
        A = A[rows]
        sa = sa[rows] if sa.shape[0] > 1 else sa
    unit = _model_unit(cand.unit, cap.input)
    return emu.gemm(A, B, cap.extra.get("bias"), unit, cand.schedule, scale_a=sa, scale_b=sb)


def search_scaled(cap: Capture, hw: str | None = None, progress=None) -> SearchResult:
    """The search for a ``scaled_mm`` (fp8) capture: every :func:`scaled_candidates` schedule on
    the first :data:`SCALED_ROWS` rows, the survivors on every output; when none reproduces,
    the split-K tier (:func:`scaled_split_schedules` times the epilogues) the same way, at most
    :data:`MAX_FULL` accumulations in full."""
    t0 = time.perf_counter()
    unit_name = resolve_unit(cap, hw)
    cands = scaled_candidates(cap, unit_name)
    want = _bits(cap.out).reshape(-1)
    rows = np.arange(min(SCALED_ROWS, cap.out.shape[0]))
    want_rows = _bits(cap.out[rows]).reshape(-1)
    scored = []
    for i, c in enumerate(cands):
        scored.append(int(np.count_nonzero(_bits(run_scaled(cap, c, rows)).reshape(-1) == want_rows)))
        if progress:
            progress("fp8 schedules, first rows", i + 1, len(cands))
    survivors = [c for c, n in zip(cands, scored) if n == want_rows.size]
    stages = [(f"fp8 schedules: first {rows.size} rows ({want_rows.size} outputs)", len(cands), len(survivors))]
    reproducing, best, best_same, best_out = [], None, -1, None

    for c in survivors or [cands[int(np.argmax(scored))]]:
        got = run_scaled(cap, c)
        same = int(np.count_nonzero(_bits(got).reshape(-1) == want))
        if same == want.size:
            reproducing.append(c)
        if same > best_same:
            best, best_same, best_out = c, same, got
    stages.append((f"every output ({want.size})", max(1, len(survivors)), len(reproducing)))
    hints = []
    searched = len(cands)
    if not reproducing:  # a split-K kernel: splitKreduce after fp8 chains
        groups, tried, nearest, nearest_same = _scaled_split_tier(cap, unit_name, rows, want_rows, progress)
        searched += tried
        n_rows = sum(len(g) for g in groups.values())
        stages.append((f"fp8 split-K schedules: first {rows.size} rows", tried, n_rows))
        if not groups and nearest_same > max(scored):
            groups = {nearest[0]: [nearest[1]]}  # nothing reproduces: the nearest in full, for the report
        unit = _model_unit(unit_name, cap.input)
        for acc_schedule in list(groups)[:MAX_FULL]:  # each accumulator once in full, then its epilogues
            acc = emu.gemm(cap.operands["A"], cap.operands["B"], None, unit, acc_schedule)
            for c in groups[acc_schedule]:
                got = finish(unit, acc, cap.extra.get("bias"), c.schedule, cap.extra["scale_a"], cap.extra["scale_b"])
                same = int(np.count_nonzero(_bits(np.asarray(got)).reshape(-1) == want))
                if same == want.size:
                    reproducing.append(c)
                if same > best_same:
                    best, best_same, best_out = c, same, np.asarray(got)
        stages.append((f"fp8 split-K: every output ({want.size})", min(MAX_FULL, len(groups)), len(reproducing)))
        if len(groups) > MAX_FULL:
            hints.append(
                f"{len(groups) - MAX_FULL} more split-K accumulations reproduce the first rows; not run in full"
            )
    if len(reproducing) > 1:
        hints.append(f"{len(reproducing)} schedules reproduce every output: the capture cannot tell them apart")
    hints.append("fp8 (scaled_mm) captures: the schedules are checked on synthetic captures only, no GPU capture yet")
    return SearchResult(
        answer="identical" if reproducing else "differs",
        n=int(want.size),
        n_identical=int(best_same),
        best=reproducing[0] if reproducing else best,
        reproducing=reproducing,
        emulated=best_out,
        searched=searched,
        seconds=time.perf_counter() - t0,
        stages=stages,
        hints=hints,
        unit=unit_name,
    )


def search(
    cap: Capture, hw: str | None = None, progress: Callable[[str, int, int], None] | None = None
) -> SearchResult:
    """Search the schedule space for ``cap`` (see the module docstring), tier by tier
    (:func:`tiers`); a ``scaled_mm`` capture by :func:`search_scaled`. ``progress(stage, done,
    total)`` is called now and then."""
    if cap.op == "scaled_mm":
        return search_scaled(cap, hw, progress)
    t0 = time.perf_counter()
    unit_name = resolve_unit(cap, hw)
    cands, hints = candidates(cap, unit_name)
    hints = hints + not_modelled(cap.kernels)
    fp32 = cap.out_format == "fp32"
    s1 = _Sample(cap, *(STAGE1_FP32 if fp32 else STAGE1), seed=1)
    s2 = None
    want = _bits(cap.out).reshape(-1)
    stages, nearest, searched = [], [], 0
    reproducing, best, best_same, best_out = [], None, -1, None
    tiers_list = tiers(cap, unit_name, cands)
    for tier, group in tiers_list:
        searched += len(group)
        scored = []
        for lo in range(0, len(group), 500):
            block = group[lo : lo + 500]
            s1.prepare(block)
            scored.extend((s1.identical(c), i + lo) for i, c in enumerate(block))
            if progress:
                progress(f"{tier}, first sample", min(lo + 500, len(group)), len(group))
        survivors = [group[i] for s, i in scored if s == s1.size]
        stages.append((f"{tier}: first sample ({s1.size} outputs)", len(group), len(survivors)))
        nearest.extend((s, -len(nearest) - i, group[i]) for s, i in sorted(scored, key=lambda t: (-t[0], t[1]))[:3])
        if not survivors:
            continue
        s2 = s2 or _Sample(cap, *(STAGE2_FP32 if fp32 else STAGE2), seed=2)
        s2.prepare(survivors)
        pool = [c for c in survivors if s2.identical(c) == s2.size]
        stages.append((f"{tier}: second sample ({s2.size} outputs)", len(survivors), len(pool)))
        for i, c in enumerate(pool[:MAX_FULL]):
            got = run_candidate(cap, c)
            same = int(np.count_nonzero(_bits(got).reshape(-1) == want))
            if progress:
                progress(f"{tier}, every output", i + 1, min(len(pool), MAX_FULL))
            if same == want.size:
                reproducing.append(c)
            if same > best_same:
                best, best_same, best_out = c, same, got
        stages.append((f"{tier}: every output ({want.size})", min(len(pool), MAX_FULL), len(reproducing)))
        if len(pool) > MAX_FULL:
            hints.append(f"{len(pool) - MAX_FULL} more candidates reproduce the samples; not run on every output")
        if reproducing:
            rest = [name for name, _ in tiers_list[tiers_list.index((tier, group)) + 1 :]]
            if rest:
                hints.append("stopped at the first tier that reproduces; not searched: " + "; ".join(rest))
            break
    inside = None
    if not reproducing:  # nothing reproduces: the nearest on the first sample, in full
        tried = {id(best)} if best is not None else set()
        for _, _, c in sorted(nearest, key=lambda t: (-t[0], -t[1]))[:3]:
            if id(c) in tried:
                continue
            got = run_candidate(cap, c)
            same = int(np.count_nonzero(_bits(got).reshape(-1) == want))
            if same > best_same:
                best, best_same, best_out = c, same, got
        stages.append(("nearest candidates: every output", 3, 0))
        # a split-K kernel with fp32 atomics: every output some add order's outcome?
        if cap.out_format == "fp16" and best is not None and best.schedule.splits >= 3:
            ok, _ = _inside_ensemble(cap, best)
            stages.append(("atomic add orders of the nearest schedule's partials", 1, int(ok)))
            if ok:
                inside = best
    return SearchResult(
        answer="identical" if reproducing else "inside-ensemble" if inside is not None else "differs",
        n=int(want.size),
        n_identical=int(best_same),
        best=reproducing[0] if reproducing else best,
        reproducing=reproducing,
        emulated=best_out,
        searched=searched,
        seconds=time.perf_counter() - t0,
        stages=stages,
        hints=hints,
        unit=unit_name,
    )
