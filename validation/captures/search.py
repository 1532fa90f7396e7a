"""The sampled search: which unit, gemmK order and accumulation schedule reproduce a capture.

The candidates are the schedule space's (:mod:`validation.captures.space`); the kernel names
(``models.libraries``) only order them into tiers (:func:`tiers`): the named families are tried
first and every candidate is judged by the bits alone. Each tier runs in three stages so that a
million outputs take seconds: every candidate on a tiny sample (a few outputs of a few GEMMs,
:class:`validation.captures.samples.Sample`), the survivors on a larger sample, then the last
survivors on every output through :func:`emu.gemm` itself. The search stops at the first tier
in which a candidate reproduces every output. When nothing survives, the candidates nearest on
the samples are run in full and the differing elements reported; for an fp16 output of a split
schedule, whether every output is some order of fp32 atomic adds of its partials — asked only
of a kernel whose output changes from run to run (the capture's ``repeat_differs`` > 0), and
said as a hypothesis when the capture does not record it. When nothing reproduces and the
kernels are of a family the search does not model (Winograd, FFT, or a kernel no named schedule
of :mod:`models.libraries` covers: :func:`models.libraries.not_modelled_family`), the answer is
``not-modelled`` with that family, the nearest order and its distance — never a kernel bug.

A ``scaled_mm`` (fp8) capture is searched by :func:`validation.captures.scaled.search_scaled`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

import emu
from emu.implicit_gemm import K_ORDERS
from models.kernels import ATOMIC_ORDERS
from models.libraries import from_source, matching, not_modelled, not_modelled_family, tf32_roundings

from .capture import PASS_OF, Capture
from .convs import (
    cudnn_winograd,
    dgrad_alg1_chunk,
    dgrad_alg1_output,
    is_dgrad_alg1,
    winograd_orders,
)
from .gemms import (
    TF32_ROUNDINGS,
    Candidate,
    SearchResult,
    Variant,
    bits,
    gemm_dims,
    image_tile,
    jobs_of,
    model_unit,
    resolve_unit,
    run_candidate,
)
from .orders import is_dot_rule
from .samples import Sample
from .scaled import run_scaled, search_scaled
from .space import BOUNDS, candidates, scaled_candidates, scaled_split_schedules

__all__ = [
    "Variant",
    "Candidate",
    "SearchResult",
    "TF32_ROUNDINGS",
    "search",
    "search_scaled",
    "scaled_candidates",
    "scaled_split_schedules",
    "run_candidate",
    "run_scaled",
    "jobs_of",
    "resolve_unit",
    "tiers",
    "MAX_SPLITS",
    "MAX_CANDIDATES",
    "FullRunBound",
]

#: the most splits tried per k-tile width, and the most candidates judged in all (``space.BOUNDS``)
MAX_SPLITS = BOUNDS.max_splits
MAX_CANDIDATES = BOUNDS.max_candidates
#: (outputs, pool they are chosen from) of the first and second stages; fp32 outputs need few
STAGE1 = (64, 4096)
STAGE1_FP32 = (32, 32)
STAGE2 = (512, 65536)
STAGE2_FP32 = (256, 256)
#: candidates run on every output at most
MAX_FULL = BOUNDS.max_full


def _inside_ensemble(cap: Capture, cand: Candidate) -> tuple[bool, int]:
    """Whether every output of ``cap`` is the fp16 outcome of some order of fp32 atomic adds of
    the candidate's split partials (the run-to-run spread of a split-K kernel with atomics): the
    closest outcome over the ensemble's orders (``models.kernels.ATOMIC_ORDERS``) equals the GPU's
    value. Returns (inside, outputs equal to the ascending order's)."""
    unit = model_unit(cand.unit, cap.input)
    order = emu.Schedule(
        k_order=cand.schedule.k_order,
        pad_k=cand.schedule.pad_k,
        k_tile=cand.schedule.k_tile,
        splits=cand.schedule.splits,
        split_rule=cand.schedule.split_rule,
        split_bounds=cand.schedule.split_bounds,
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
        reached[job.out_index.reshape(-1)] = bits(np.asarray(near, np.float16)) == bits(gpu.astype(np.float16))
    return bool(reached.all()), int(reached.sum())


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


#: CUTLASS split-K counts above this are searched in a tier of their own, after the GPU's unit:
#: every count up to one k tile per split is hundreds of candidates (K = 3357: 420), which made
#: captures that an earlier tier reproduces 5 to 20 times slower to answer
MANY_SPLITS = 16


def tiers(cap: Capture, unit_name: str, cands: list[Candidate]) -> list[tuple[str, list[Candidate]]]:
    """The space in the order it is searched: the kernel names' families; the GPU's matrix unit
    (fp32 accumulator) with plain splits; the same with residue-first tiles or a narrower
    instruction; for tf32 operands, the matrix unit's candidates with a rounding to tf32 other than
    the one the kernel names say (:func:`models.libraries.tf32_roundings`), their residue-tile,
    narrow-instruction, 16-bit-partial and many-split schedules left out (they made a search that
    finds nothing twice as long: 30,840 of 46,920 candidates of a 147,456-output TF32 weight
    gradient); the other units (fp32 FMA, an fp16 accumulator). cuBLAS's ``dot_kernel`` candidates
    with another block count than :func:`.orders.dot_blocks` come in a tier of their own right after
    the kernel names' families. The search stops after the first tier in which some candidate
    reproduces every output."""
    named = matching(cap.kernels, cap.op)
    image = image_tile(cap)
    groups: dict[str, list[Candidate]] = {}
    names = {f.name for f in named}
    K = gemm_dims(cap, Variant())[2] if cap.conv is None else 0
    preferred = tf32_roundings(cap.kernels)[0] if cap.input == "tf32" else ""
    for c in cands:
        if c.unit == unit_name and c.variant.tf32_rounding != preferred:  # not the one the kernel names say
            s = c.schedule
            if (c.family == "generic" and (s.residue_tile or s.instruction_k or s.partial_format)) or (
                c.family == "cublas-cutlass-splitk" and s.splits > MANY_SPLITS
            ):
                continue  # the rarest schedules with the rarer rounding: left out (they doubled a full search)
            groups.setdefault("other tf32 roundings", []).append(c)
            continue
        if c.family != "generic":  # a named library order (models.libraries) drawn by its own family
            tier = "kernel-name families" if c.family in names else "library schedules"
            if c.family == "cublas-dot" and tier == "kernel-name families" and not is_dot_rule(c, K):
                tier = "kernel-name families, other block counts"  # dozens of counts, most alike in 16 bits
            if c.family == "cublas-cutlass-splitk" and c.schedule.splits > MANY_SPLITS:
                tier = "library schedules, many splits"  # hundreds of counts: after the likely ones
            groups.setdefault(tier, []).append(c)
            continue
        fams = [f for f in named if _fits(f, c, unit_name, image)]
        if fams:
            groups.setdefault("kernel-name families", []).append(replace(c, family=fams[0].name))
        elif c.unit != unit_name:
            groups.setdefault("other units", []).append(c)
        elif c.schedule.residue_tile or c.schedule.instruction_k or c.schedule.partial_format:
            groups.setdefault(f"unit {unit_name}, residue tiles, narrow instructions, fp16 partials", []).append(c)
        else:
            groups.setdefault(f"unit {unit_name}", []).append(c)
    order = [
        "kernel-name families",
        "kernel-name families, other block counts",
        "library schedules",
        f"unit {unit_name}",
        f"unit {unit_name}, residue tiles, narrow instructions, fp16 partials",
        "library schedules, many splits",
        "other tf32 roundings",
        "other units",
    ]
    return [(name, groups[name]) for name in order if name in groups]


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
    if is_dgrad_alg1(cap):  # cuDNN's chunked backward-data kernel (validation.captures.convs), first
        found = _dgrad_alg1(cap, unit_name, t0)
        if found is not None:
            return found
    if cap.conv is not None and not_modelled_family(cap.kernels, cap.op) == "Winograd":
        return _winograd(cap, unit_name, t0)  # not modelled: the nearest orders, in seconds
    cands, hints = candidates(cap, unit_name)
    hints = hints + not_modelled(cap.kernels)
    fp32 = cap.out_format == "fp32"
    s1 = Sample(cap, *(STAGE1_FP32 if fp32 else STAGE1), seed=1)
    s2 = None
    want = bits(cap.out).reshape(-1)
    stages, nearest, searched = [], [], 0
    reproducing, best, best_same, best_out = [], None, -1, None
    bound = FullRunBound(cap, want)
    tiers_list = tiers(cap, unit_name, cands)
    for tier, group in tiers_list:
        searched += len(group)
        scored = []
        for lo in range(0, len(group), 500):
            block = group[lo : lo + 500]
            s1.prepare(block)
            scored.extend((n, i + lo) for i, n in enumerate(s1.counts(block)))
            if progress:
                progress(f"{tier}, first sample", min(lo + 500, len(group)), len(group))
        survivors = [group[i] for s, i in scored if s == s1.size]
        stages.append((f"{tier}: first sample ({s1.size} outputs)", len(group), len(survivors)))
        nearest.extend((s, -len(nearest) - i, group[i]) for s, i in sorted(scored, key=lambda t: (-t[0], t[1]))[:3])
        if not survivors:
            continue
        s2 = s2 or Sample(cap, *(STAGE2_FP32 if fp32 else STAGE2), seed=2)
        s2.prepare(survivors)
        pool = [c for c, n in zip(survivors, s2.counts(survivors)) if n == s2.size]
        stages.append((f"{tier}: second sample ({s2.size} outputs)", len(survivors), len(pool)))
        # a kernel-name family's candidates the samples cannot tell apart: more on a small capture
        full = max(MAX_FULL, BOUNDS.full_outputs // max(want.size, 1)) if tier == "kernel-name families" else MAX_FULL
        for i, c in enumerate(pool[:full]):
            if progress:
                progress(f"{tier}, every output", i + 1, min(len(pool), full))
            if bound.cannot_beat(c, best_same):
                continue  # wrong where the nearest is: neither reproduces nor comes nearer
            got = run_candidate(cap, c)
            same = int(np.count_nonzero(bits(got).reshape(-1) == want))
            if same == want.size:
                reproducing.append(c)
            if same > best_same:
                best, best_same, best_out = c, same, got
                bound.nearest(got)
        stages.append((f"{tier}: every output ({want.size})", min(len(pool), full), len(reproducing)))
        if len(pool) > full:
            hints.append(f"{len(pool) - full} more candidates reproduce the samples; not run on every output")
        if reproducing:
            rest = [name for name, _ in tiers_list[tiers_list.index((tier, group)) + 1 :]]
            if rest:
                hints.append("stopped at the first tier that reproduces; not searched: " + "; ".join(rest))
            break
    inside = None
    if not reproducing:  # nothing reproduces: the nearest on the first sample, in full
        tried = {id(best)} if best is not None else set()
        for _, _, c in sorted(nearest, key=lambda t: (-t[0], -t[1]))[:3]:
            if id(c) in tried or bound.cannot_beat(c, best_same):
                continue
            got = run_candidate(cap, c)
            same = int(np.count_nonzero(bits(got).reshape(-1) == want))
            if same > best_same:
                best, best_same, best_out = c, same, got
                bound.nearest(got)
        stages.append(("nearest candidates: every output", 3, 0))
        # a split-K kernel with fp32 atomics: every output some add order's outcome? Only where the
        # output changes from run to run (repeat_differs > 0), a hypothesis where that is unknown
        repeat = cap.extra.get("repeat_differs")
        if cap.out_format == "fp16" and best is not None and best.schedule.splits >= 3:
            if repeat == 0:
                hints.append(
                    "the kernel repeats bit for bit (repeat_differs 0): not an atomic-add ensemble, not searched"
                )
            else:
                ok, _ = _inside_ensemble(cap, best)
                stages.append(("atomic add orders of the nearest schedule's partials", 1, int(ok)))
                if ok:
                    inside = best
                    if repeat is None:
                        hints.append(
                            "hypothesis: inside the ensemble of atomic add orders; the capture does not record "
                            "whether the kernel's output changes from run to run (repeat_differs)"
                        )
    family = None
    distance = None
    if not reproducing and best_out is not None:
        distance = _distance(cap.out, best_out)
        if inside is None:
            family = not_modelled_family(cap.kernels, cap.op)
        if family is not None:
            hints.append(
                f"not modelled: {family}; the nearest order gets {best_same} of {want.size} outputs "
                f"({distance['n_differ']} differ, at most {distance['max_ulps']} ulps): {best.describe()}"
            )
    if best is not None and from_source(best.family):
        hints.append(f"{best.family}: from source, not checked on silicon (models.libraries)")
    if reproducing:
        answer = "identical"
    elif inside is not None:
        answer = "inside-ensemble"
    else:
        answer = "not-modelled" if family is not None else "differs"
    return SearchResult(
        answer=answer,
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
        not_modelled=family,
        nearest_distance=distance,
    )


#: the most outputs the nearest schedule got wrong on which a candidate is judged before its full run
BOUND_OUTPUTS = 64


class FullRunBound:
    """Skips a full run that cannot change the answer: where the nearest schedule so far gets
    ``best_same`` of the n outputs, a candidate that gets w ≥ 1 of the outputs the nearest got
    wrong (at most :data:`BOUND_OUTPUTS` of them, a :meth:`Sample.of_outputs` sample: the bits
    :func:`emu.gemm` gives there) wrong gets at most n − w ≤ ``best_same`` outputs in full: it
    does not reproduce and is not nearer (the search keeps the first of equally near ones). A
    capture with one wrong output (a flipped bit) costs one full run per tier instead of
    ``MAX_FULL``."""

    def __init__(self, cap: Capture, want: np.ndarray):
        self.cap, self.want, self.sample = cap, want, None

    def nearest(self, got: np.ndarray):
        """The nearest schedule so far computed ``got``: sample the outputs it got wrong."""
        wrong = np.flatnonzero(bits(got).reshape(-1) != self.want)
        if BOUND_OUTPUTS <= 0:  # 0: every candidate that reaches the full run is run
            wrong = wrong[:0]
        elif wrong.size > BOUND_OUTPUTS:
            wrong = wrong[np.unique(np.linspace(0, wrong.size - 1, BOUND_OUTPUTS).round().astype(np.int64))]
        self.sample = Sample.of_outputs(self.cap, wrong) if wrong.size else None
        if self.sample is not None and not self.sample.size:
            self.sample = None

    def cannot_beat(self, cand: Candidate, best_same: int) -> bool:
        """Whether ``cand`` gets so many of the sampled outputs wrong that it can neither
        reproduce the capture nor get more than ``best_same`` outputs."""
        if self.sample is None:
            return False
        self.sample.prepare([cand])
        wrong = self.sample.wrong(cand)
        return wrong is not None and wrong >= 1 and self.want.size - wrong <= best_same


def _distance(gpu: np.ndarray, emulated: np.ndarray) -> dict:
    """How far ``emulated`` lies from the GPU's output: elements that differ, and the largest and
    median distance in units in the last place of the output format (ordered bit patterns)."""
    got, want = np.ascontiguousarray(gpu), np.ascontiguousarray(emulated.astype(gpu.dtype))
    signed = np.dtype(f"i{got.dtype.itemsize}")
    top = np.int64(1) << (8 * got.dtype.itemsize - 1)
    a, b = (x.view(signed).astype(np.int64).reshape(-1) for x in (got, want))
    a, b = (np.where(x < 0, -top - x, x) for x in (a, b))
    d = np.abs(a - b)[bits(got).reshape(-1) != bits(want).reshape(-1)]
    return {
        "n_differ": int(d.size),
        "max_ulps": int(d.max()) if d.size else 0,
        "median_ulps": float(np.median(d)) if d.size else 0.0,
    }


def _dgrad_alg1(cap: Capture, unit_name: str, t0: float):
    """cuDNN's ``dgrad2d_alg1_1`` (:mod:`.convs`): the :class:`SearchResult` ``identical`` where :func:`dgrad_alg1_output` reproduces
    every output bit, else None (the search goes on; nothing reproducing, the answer is "not
    modelled": ``models.libraries.UNRESOLVED``)."""
    chunk = dgrad_alg1_chunk(cap.kernels)
    got = dgrad_alg1_output(cap, chunk)
    want = bits(np.asarray(cap.out)).reshape(-1)
    same = int(np.count_nonzero(bits(got).reshape(-1) == want))
    if same != want.size:
        return None
    s = cap.conv
    tap_sums = emu.Schedule(
        k_tile=s.Kg, splits=s.R * s.S, split_rule="ceil", reduction="workspace", output=cap.out_format
    )
    cand = Candidate("fma32", Variant("rsk", position_chunk=chunk), tap_sums, "cudnn-dgrad2d")
    return SearchResult(
        answer="identical",
        n=int(want.size),
        n_identical=same,
        best=cand,
        reproducing=[cand],
        emulated=got,
        searched=1,
        seconds=time.perf_counter() - t0,
        stages=[("kernel-name families: cuDNN dgrad2d_alg1_1 (every output)", 1, 1)],
        hints=[],
        unit=unit_name,
    )


def _winograd(cap: Capture, unit_name: str, t0: float) -> SearchResult:
    """A convolution that ran cuDNN's Winograd kernels. Where they are ones fp16emu models
    (:func:`.convs.cudnn_winograd`: the forward, backward-data and weight-gradient 4×4 and 13-point
    kernels, measured on H200 captures) that order is tried first (:func:`.convs.winograd_output`);
    then the direct fp32 FMA chains (gemmK in each order of the pass, and the warp halving of a
    weight gradient). The one that gives the most output bits is
    ``best``; every output bit: ``identical``; else ``not-modelled`` (family ``Winograd``) with
    that nearest order and its distance, the forward Winograd orders :func:`.convs.winograd_orders`
    has measured and named in the hints. Seconds, not a search of the whole space."""
    want = bits(np.asarray(cap.out)).reshape(-1)
    pass_ = PASS_OF[cap.op]
    plain = emu.Schedule(output=cap.out_format)
    tried = []
    order = cudnn_winograd(cap)
    if order:
        tried.append(Candidate("fma32", Variant(winograd=order), plain, "cudnn-winograd"))
    tried += [Candidate("fma32", Variant(o), plain) for o in K_ORDERS[pass_]]
    if pass_ == "bwd_weight":
        halving = emu.Schedule(splits=32, split_rule="strided", reduction="halving", output=cap.out_format)
        tried.append(Candidate("fma32", Variant("npq"), halving))
    scored = []
    for c in tried:
        got = run_candidate(cap, c)
        scored.append((int(np.count_nonzero(bits(got).reshape(-1) == want)), c, got))
    same, best, got = max(scored, key=lambda t: t[0])  # the first of the best: the Winograd order before a chain
    identical = same == want.size
    distance = _distance(cap.out, got)
    if identical:
        what = "cuDNN's Winograd order" if best.variant.winograd else "a direct fp32 FMA chain"
        hints = [f"the kernels are Winograd; {what} gives every output bit of this capture"]
    else:
        hints = [
            f"not modelled: Winograd; the nearest order gets {same} of {want.size} outputs "
            f"({distance['n_differ']} differ, at most {distance['max_ulps']} ulps): {best.describe()}"
        ]
        if best.variant.winograd:
            hints.append(
                "cuDNN's Winograd order is modelled (measured on H200 captures), but a Winograd capture it "
                "misses is not called a bug: a rounding it has not met may remain; outputs it misses by more "
                "than a few ulps point to the kernel"
            )
        for text, out in winograd_orders(cap):
            d = _distance(cap.out, out)
            hints.append(f"{text}: {d['n_differ']} of {want.size} outputs differ, at most {d['max_ulps']} ulps")
        hints += not_modelled(cap.kernels)
    measured = any(c.variant.winograd for c in tried)
    stage = (
        f"cuDNN Winograd: {'its measured order, ' if measured else ''}direct fp32 FMA chains"
        f"{' and emu.winograd orders' if any(h.startswith('Winograd F(') for h in hints) else ''} (every output)"
    )
    return SearchResult(
        "identical" if identical else "not-modelled",
        int(want.size),
        same,
        best,
        [best] if identical else [],
        got,
        len(tried),
        time.perf_counter() - t0,
        [(stage, len(tried), int(identical))],
        hints,
        unit_name,
        **({} if identical else {"not_modelled": "Winograd", "nearest_distance": distance}),
    )
