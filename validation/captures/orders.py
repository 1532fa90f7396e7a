"""Named library schedules of the space that the generic families do not draw: the cuBLAS orders a
public peer documented and the AMD libraries' orders read from their source.

**cuBLAS** (:func:`cublas_candidates`, NVIDIA GEMMs): facebookexperimental/triton's ``bitequiv/``
(``cublas_match/plan.py``, ``kernels.py``, ``arch/sm90_lt13_1.py`` at commit
db4666f22c1f8b206584c3f06e3b4a0ff035989e), a Triton GEMM made to match cuBLAS bit for bit:

* CUTLASS split-K for unaligned shapes: K cut at a grain of 64 where 64 divides K, else 8 (4
  for TF32, whose kernels read fp32 values; :func:`models.libraries.cutlass_splitk_grain`),
  ⌈tiles/splits⌉ tiles per split, the K remainder in the last split, each split's k residue
  (modulo the threadblock K) first, 8 or 16 products per mma; the partials merged in an fp32
  workspace, as output-format partials, or serially with the running sum in the output format
  (:func:`models.libraries.splitk_merges` reads which from the kernel names;
  :data:`validation.captures.gemms.MERGES`);
* ``gemmSN`` (small M or N): S contiguous k chunks of ⌈K/S⌉, each in sub-blocks of B k summed from
  +0 and added in order (a promotion interval of B), the S partials added in order;
  ``gemmSN_TN`` (measured on H200 captures): W lanes over k strided, each lane's chain restarted
  every 16 of its k, the totals and then the lanes added in order;
* ``gemv2N``/``gemv2T`` (M or N = 1): the sm_90 recipes (V, W, CC, butterfly) of
  ``arch/sm90_lt13_1.py`` as lane layouts (:func:`validation.captures.gemms.lane_layout`): W lanes,
  V consecutive k per lane and turn (V = min(64, ⌈K/W⌉) for the contiguous-slice options), chunks
  of CC turns summed apart, the lanes added by a halving (count-down butterfly) tree or in order;
  and ``CUSTOM_OPTION`` 5, one contiguous slice per lane in chunks of 16;
* ``dot_kernel`` + ``reduce_1Block_kernel`` (M or N = 1, ALGO_ID 14): k in tiles of 128·V dealt to
  NB blocks in turn (``"tiled"`` lanes), each thread's V chains added onto +0, the block's 128
  threads by a count-down butterfly, the blocks' partials by the one-block reduce
  (:data:`DOT_REDUCE`), for V = 1 and 2 and every NB up to the tiles (the kernel's SPLITK_NUM is
  not in its name).

**AMD** (:func:`amd_candidates`, a capture whose ``gpu`` is an MI100, MI200 or MI300), from source,
not checked on silicon: hipBLASLt/Tensile GlobalSplitU (ROCm/rocm-libraries
``projects/hipblaslt/tensilelite/Tensile/Components/GSU.py`` at 27f5a815813defca09354c20be6fc34abaa78627:
the ⌊K/DepthU⌋ iterations dealt to the GSU workgroups, the first ``iterations mod GSU`` taking one
more, the tail loop in the last; partials in workspace slots added in slot order, or by atomics —
one order of the atomic-add ensemble, which the search's ensemble check covers); StaggerU (a
workgroup's loop starts at a rotated iteration and wraps round, the tail last; one rotation for
every output); Stream-K (``StreamK.py`` at dbcbc2878a57812387d7f8cb637f0aedd6e49488: a tile's
iterations cut into the pieces of consecutive workgroups, the fixup adding them in order, owned by
the first or the last piece, or by a pairwise tree); composable_kernel split-K (KBatch batches of
⌈K/(KBatch·KPerBlock)⌉ k tiles, partials added onto the zeroed output in batch order).
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from emu.schedule import Schedule
from models.libraries import cutlass_splitk_grain, is_amd, k_tile_from_name, splitk_merges, tf32_roundings

from .capture import Capture
from .gemms import Candidate, Variant, gemm_dims, lane_layout, search_unit_params

__all__ = [
    "AMD_BOUNDS",
    "GEMM_OPS",
    "gsu_bounds",
    "GEMV_RECIPES",
    "GEMMSN_RECIPES",
    "amd_candidates",
    "cublas_candidates",
    "gemv_candidates",
    "dot_candidates",
    "xmma_splitk_candidates",
    "round_robin_splits",
    "split_k_in_place_tile",
    "XMMA_SIX_SPLITS",
    "dot_program",
    "dot_blocks",
    "is_dot_rule",
    "DOT_BLOCKS",
    "DOT_KERNEL",
    "gemmsn_candidates",
    "gemmsn_tn_candidates",
    "GEMMSN_TN_TURNS",
    "cutlass_splitk_candidates",
]

GEMM_OPS = ("mm", "addmm", "bmm", "linear")

#: gemmSN (S, B) on sm_90: S threads per output over contiguous k chunks, sub-blocks of B k
#: (bitequiv arch/sm90_lt13_1.py ``gemmsn_recipe``: ALGO 11 options 0 and 1)
GEMMSN_RECIPES = ((2, 256), (4, 128))

#: gemv2 (V, W, CC, butterfly) on sm_90, each distinct once (bitequiv arch/sm90_lt13_1.py
#: ``gemv_recipe``): V consecutive k per lane and turn (−64: min(64, ⌈K/W⌉)), W lanes, CC turns per
#: chunk (0: one chunk), the lanes by a count-down butterfly (True) or in order (False)
GEMV_RECIPES = (
    (1, 1, 512, False),
    (1, 1, 256, False),
    (1, 16, 16, False),
    (1, 16, 32, False),
    (4, 32, 0, True),
) + tuple((v, w, 0, True) for w in (32, 16, 8, 4, 2) for v in (-64, 1))


#: ``reduce_1Block_kernel<float, 128, 7>``'s steps on the NB block partials (emu reduction
#: program): q[t] = p[t] + p[t+128] + … (t < 128, missing ones +0), q[t] += q[t+64], q[t] +=
#: q[t+32], u[j] = q[j] + q[j+4] + … + q[j+28], then ((u0 + u1) + u2) + u3 (bitequiv kernels.py
#: ``_gemv_block_reduce``)
DOT_REDUCE = (("strided", 128), ("fold", 128), ("fold", 64), ("strided", 4), ("chunks-first", 4))
#: the kernel name of cuBLAS's dot order (the ``cublas-dot`` family of :mod:`models.libraries`)
DOT_KERNEL = r"\bdot_kernel<"
#: the most blocks of the dot candidates: NB·128·V lanes stay within emu's splits
DOT_MAX_BLOCKS = 64
#: the block count cuBLAS chose on every H200 capture at hand: the tiles dealt evenly to at most
#: this many blocks, NB = ⌈tiles / ⌈tiles / 32⌉⌉ (9 of 9: 3 … 20 tiles → NB = tiles; 61 → 31)
DOT_BLOCKS = 32


def dot_blocks(K: int, v: int) -> int:
    """The block count of :data:`DOT_BLOCKS`'s rule for gemmK ``K`` in tiles of 128·``v``."""
    tiles = max(1, -(-K // (128 * v)))
    return -(-tiles // -(-tiles // DOT_BLOCKS))


def is_dot_rule(cand: Candidate, K: int) -> bool:
    """Whether a ``cublas-dot`` candidate has the block count of :func:`dot_blocks` (the search
    tries those first and the other counts in a tier of their own)."""
    _, lanes, tile = cand.variant.lanes
    return lanes // tile == dot_blocks(K, tile // 128)


def dot_program(v: int) -> tuple[tuple[str, int], ...]:
    """The whole reduction of ``dot_kernel`` + ``reduce_1Block_kernel`` on its NB·128·v chains (in
    block, thread, register order): each thread's v chains onto +0, the block's 128 threads by a
    count-down butterfly (fold 128, 64, …, 2), then :data:`DOT_REDUCE`."""
    return (("chunks", v),) + tuple(("fold", 1 << e) for e in range(7, 0, -1)) + DOT_REDUCE


class _AmdBounds:
    """The bounds of the AMD families (Tensile's DepthU values, the most GSU workgroups, …)."""

    depth_u = (16, 32, 64, 128, 256)
    max_gsu = 32
    max_stagger = 32
    stagger_depth_u = (32, 64, 128)
    streamk_depth_u = (32, 64, 128, 256)
    #: the most iterations per tile for which 2, 3 and 4 Stream-K pieces are tried
    streamk_pieces = {2: 64, 3: 16, 4: 8}
    ck_k_per_block = (32, 64, 128)
    ck_max_batch = 32


AMD_BOUNDS = _AmdBounds()


def _c_entries(cap: Capture) -> tuple[str, ...]:
    has_c = cap.op == "addmm" or "bias" in cap.operands
    if cap.alpha != 1 or cap.beta != 1:
        return ("epilogue",)
    return ("epilogue", "chain") if has_c else ("chain",)


def _stored_c_entries(cap: Capture) -> tuple[str, ...]:
    """``("output",)`` where the capture adds a C or bias: with output-format partials cuBLASLt's
    ``splitKreduce_kernel`` stores the reduced sum in the output format and the bias is added to
    the stored value, rounded again (NVIDIA H200 ``F.linear`` captures: 6 CUTLASS split-K ones
    that no fp32 epilogue reproduces); else none."""
    return ("output",) if cap.op in ("addmm", "baddbmm") or "bias" in cap.operands else ()


def _sched(cap: Capture, ce: str, **kw) -> Schedule:
    ab = dict(alpha=cap.alpha, beta=cap.beta) if ce in ("epilogue", "output") else dict(alpha=cap.alpha)
    return Schedule(c_entry=ce, output=cap.out_format, **ab, **kw)


def _base_variants(cap: Capture) -> list[Variant]:
    """The operand rule of a library order: for tf32 the rounding the kernel names say
    (:func:`models.libraries.tf32_roundings`; every one when the capture names no kernel: the
    generic space tries the others, so each named order is not run three times)."""
    if cap.input != "tf32":
        return [Variant()]
    roundings = tf32_roundings(cap.kernels)
    return [Variant(tf32_rounding=r) for r in (roundings[:1] if cap.kernels else roundings)]


def _bounds(K: int, width: int, splits: int) -> tuple[int, ...] | None:
    """⌈tiles/splits⌉ tiles of ``width`` per split, as tile bounds (None when splits are left empty)."""
    tiles = -(-K // width)
    per = -(-tiles // splits)
    b = tuple(sorted({min(tiles, i * per) for i in range(splits + 1)}))
    return b if len(b) == splits + 1 else None


def cutlass_splitk_candidates(cap: Capture, unit_name: str) -> list[Candidate]:
    """cuBLAS's CUTLASS split-K (see the module docstring) with every merge the kernel names
    allow, the threadblock K of the name (else 32; 32 and 64 without names) as the residue tile, 8 products per
    mma for ``s1688`` (16 for the others, both when the names say nothing)."""
    if cap.input not in ("fp16", "bf16", "tf32"):
        return []
    _, _, K = gemm_dims(cap, Variant())
    names = [str(k) for k in cap.kernels]
    grain = cutlass_splitk_grain(K, 32 if cap.input == "tf32" else 16)
    hinted = k_tile_from_name(names)
    # the threadblock K of the name; a CUTLASS name without one ran STAGES_ID 0, block_k 32
    # (bitequiv arch/sm90_lt13_1.py stages_recipe); unnamed, the common 32 and 64
    block_ks = (hinted,) if hinted else (32,) if names else (32, 64)
    group = search_unit_params(unit_name, cap.input).group_size
    if any("s1688" in k for k in names):
        iks = (8,) if group > 8 else (0,)
    elif any(re.search(r"s16816|s161616", k) for k in names):
        iks = (0,)
    else:
        iks = (0, 8) if group > 8 else (0,)
    merges = [m for m in splitk_merges(names) if m == "fp32" or cap.out_format != "fp32"]
    tiles = -(-K // grain)
    out, seen = [], set()
    for n in range(2, tiles + 1):  # every split count: cuBLAS goes to one k tile per split (K = 2013: 252)
        b = _bounds(K, grain, n)
        if b is None or b in seen:
            continue
        seen.add(b)
        for v in _base_variants(cap):
            for ik in iks:
                for bk in block_ks:
                    for ce in _c_entries(cap) + _stored_c_entries(cap):
                        for m in merges:
                            if ce == "output" and m != "partials":
                                continue
                            kw = dict(k_tile=grain, splits=n, split_bounds=b, instruction_k=ik, residue_tile=bk)
                            if m == "partials":
                                kw["partial_format"] = cap.out_format
                            sch = _sched(cap, ce, split_rule="ceil", reduction="sequential", **kw)
                            merge = "serial" if m == "serial" else ""
                            out.append(Candidate(unit_name, v, sch, "cublas-cutlass-splitk", merge))
    return out


#: cuBLAS's sm80 xmma GEMM with the k tile in its name (``…_tilesize32x32x64_…``)
XMMA_GEMM = r"sm80_xmma_gemm_\w*_tilesize\d+x\d+x(\d+)_"
#: the most splits of :func:`xmma_splitk_candidates`
XMMA_MAX_SPLITS = 32


def round_robin_splits(K: int, tile: int, splits: int, split_order=None) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """k tiles of ``tile`` (the last one shorter) dealt round-robin to ``splits`` splits, tile t to
    split t mod splits: (the tile order that puts each split's tiles together, ascending inside
    it, the splits in ``split_order`` (default ascending) — a ``Variant.k_blocks`` order; the
    splits' bounds in k, a schedule's ``split_bounds`` with ``k_tile=1``)."""
    tiles = -(-K // tile)
    split_order = tuple(range(splits)) if split_order is None else tuple(split_order)
    order = tuple(t for s in split_order for t in range(s, tiles, splits))
    widths = [sum(min(tile, K - tile * t) for t in range(s, tiles, splits)) for s in split_order]
    return order, tuple(int(b) for b in np.concatenate([[0], np.cumsum(widths)]))


#: how cuBLAS's sm80 xmma split-K adds six partials on an H200, ((((p0 + p3) + p5) + (p1 + p4)) + p2)
#: (order probes: K of 4,931 … 6,500, M 128 and 262, N 10 and 40): the splits' order in the
#: sequence and the merges (:data:`emu.schedule.REDUCTION_STEPS`) that build that tree from it
XMMA_SIX_SPLITS = ((0, 3, 5, 1, 4, 2), (("merge", 0), ("merge", 0), ("merge", 1), ("merge", 0), ("merge", 0)))


def split_k_in_place_tile(cap: Capture, pattern: str) -> int | None:
    """The k tile a kernel name matching ``pattern`` spells (its first group) where a ``Memset``
    ran too (a split-K kernel's zeroed output, semaphores or workspace); else None."""
    names = [str(k) for k in cap.kernels]
    if not any(k.startswith("Memset") for k in names):
        return None
    m = next((m for m in (re.search(pattern, k) for k in names) if m), None)
    return int(m.group(1)) if m else None


def xmma_splitk_candidates(cap: Capture, unit_name: str) -> list[Candidate]:
    """cuBLAS's sm80 xmma GEMM with split-K in place (a ``Memset`` of its semaphores before it):
    the name's k tiles dealt round-robin to 2 … :data:`XMMA_MAX_SPLITS` splits (tile t to split
    t mod S), each split a chain of the unit from +0 over its tiles in order, the partials added
    one after the other in split order (order probes on an H200, TF32 ``linear`` 262×K×10: 4
    splits for K of 2,500 … 4,500, 8 for 7,000 … 14,000, 16 for 16,000); six splits (K of
    4,931 … 6,500) as :data:`XMMA_SIX_SPLITS` measured them, the only six-split order seen."""
    tile = split_k_in_place_tile(cap, XMMA_GEMM)
    if tile is None:
        return []
    _, _, K = gemm_dims(cap, Variant())
    tiles = -(-K // tile)
    group = search_unit_params(unit_name, cap.input).group_size
    iks = (8,) if group > 8 and cap.input == "tf32" else (0,)
    out = []
    for n in range(2, min(tiles, XMMA_MAX_SPLITS) + 1):
        split_order, reduction = (XMMA_SIX_SPLITS[0], dict(reduction="program", reduction_program=XMMA_SIX_SPLITS[1])) if n == 6 else (None, dict(reduction="sequential"))  # fmt: skip
        order, bounds = round_robin_splits(K, tile, n, split_order)
        for v in _base_variants(cap):
            for ik in iks:
                for ce in _c_entries(cap):
                    sch = _sched(
                        cap, ce, k_tile=1, splits=n, split_bounds=bounds, split_rule="ceil", instruction_k=ik,
                        **reduction,
                    )  # fmt: skip
                    out.append(Candidate(unit_name, replace(v, k_blocks=(tile, order)), sch, "cublas-xmma-splitk"))
    return out


def gemmsn_candidates(cap: Capture) -> list[Candidate]:
    """cuBLAS ``gemmSN`` (see the module docstring) on the fp32 FMA unit: each (S, B) of
    :data:`GEMMSN_RECIPES` and every S of them with B the whole chunk; the S partials added onto
    +0 or from partial 0 (they differ in the sign of a zero sum only)."""
    _, _, K = gemm_dims(cap, Variant())
    shapes = [(s, b) for s, b in GEMMSN_RECIPES] + [(s, 0) for s, _ in GEMMSN_RECIPES]
    out = []
    for s, b in shapes:
        chunk = -(-K // s)
        bounds = tuple(sorted({min(K, i * chunk) for i in range(s + 1)}))
        n = len(bounds) - 1
        if n < 2 and not (b and K > b):
            continue
        for red in ("workspace", "sequential"):
            for ce in _c_entries(cap):
                sch = _sched(
                    cap, ce, k_tile=1, splits=n, split_rule="ceil", split_bounds=bounds,
                    promotion_interval=b if b and chunk > b else 0, reduction=red,
                )  # fmt: skip
                out.append(Candidate("fma32", Variant(), sch, "cublas-gemmsn"))
    return out


#: gemmSN_TN's sub-block: each lane's chain restarted every this many of its k, the totals added
#: in order (NVIDIA H200: ``gemmSN_TN_kernel<float, 128, 16, …>`` with K = 444 and 1,889)
GEMMSN_TN_TURNS = (16, 8, 32)


def gemmsn_tn_candidates(cap: Capture) -> list[Candidate]:
    """cuBLAS ``gemmSN_TN_kernel<float, T, W, …>`` on the fp32 FMA unit: W lanes (the name's third
    number, 16 where it says none) over k strided (lane k mod W), each lane's chain restarted every
    :data:`GEMMSN_TN_TURNS` of its k and the totals added in order, the lanes added in order — the
    shape of the peer's gemv recipe (V, W, CC) = (1, 16, 16) (bitequiv arch/sm90_lt13_1.py), found
    for this kernel on NVIDIA H200 captures (K = 444, TF32-allowed, and 1,889, fp16: every output
    identical, and no other lane count, turn count or lane tree)."""
    _, _, K = gemm_dims(cap, Variant())
    widths = [int(m.group(1)) for k in cap.kernels if (m := re.search(r"gemmSN_TN_kernel<\w+, \d+, (\d+),", str(k)))]
    out = []
    for w in dict.fromkeys(widths or [16]):
        _, bounds = lane_layout(K, "strided", w, 1)
        longest = max(b1 - b0 for b0, b1 in zip(bounds[:-1], bounds[1:]))
        for turns in GEMMSN_TN_TURNS:
            if longest <= turns:
                continue  # one sub-block per lane: the plain strided lanes of the generic families
            for ce in _c_entries(cap):
                sch = _sched(
                    cap, ce, k_tile=1, splits=w, split_bounds=bounds, split_rule="ceil", promotion_interval=turns,
                    reduction="sequential",
                )  # fmt: skip
                out.append(Candidate("fma32", Variant(lanes=("strided", w, 1)), sch, "cublas-gemmsn"))
    return out


def gemv_candidates(cap: Capture) -> list[Candidate]:
    """cuBLAS ``gemv2N``/``gemv2T`` (see the module docstring) on the fp32 FMA unit: the recipes
    of :data:`GEMV_RECIPES` and ``CUSTOM_OPTION`` 5, as lane layouts whose lanes each run a chain
    (restarted every CC turns: a promotion interval), added by a halving tree or in order."""
    _, _, K = gemm_dims(cap, Variant())
    shapes = []
    for v, w, cc, down in GEMV_RECIPES:
        grain = v if v > 0 else min(-v, -(-K // w))
        shapes.append(("strided", w, grain, cc * grain, "halving" if down else "sequential"))
    shapes.append(("chunked", 32, 1, 16, "sequential"))
    out, seen = [], set()
    for layout, w, grain, interval, red in shapes:
        seq, bounds = lane_layout(K, layout, w, grain)
        longest = max(b1 - b0 for b0, b1 in zip(bounds[:-1], bounds[1:]))
        interval = interval if interval and longest > interval else 0
        if w == 1 and not interval:
            continue  # one chain: the generic families' first candidate
        key = (tuple(seq.tolist()), bounds, interval, red)
        if key in seen:
            continue
        seen.add(key)
        for ce in _c_entries(cap):
            sch = _sched(
                cap, ce, k_tile=1, splits=w, split_bounds=bounds, reduction=red,
                split_rule="ceil" if interval or layout == "chunked" else "strided", promotion_interval=interval,
            )  # fmt: skip
            out.append(Candidate("fma32", Variant(lanes=(layout, w, grain)), sch, "cublas-gemv2"))
    return out


def dot_candidates(cap: Capture) -> list[Candidate]:
    """cuBLAS ``dot_kernel`` + ``reduce_1Block_kernel`` (see the module docstring) on the fp32 FMA
    unit: V = 1 and 2 registers per thread, NB = 1 … min(tiles, :data:`DOT_MAX_BLOCKS`) blocks
    (only :func:`dot_blocks`'s count where the capture names no ``dot_kernel``), C (a bias) in the
    epilogue."""
    _, _, K = gemm_dims(cap, Variant())
    named = any(re.search(DOT_KERNEL, str(k)) for k in cap.kernels)
    out = []
    for v in (1, 2):
        tile = 128 * v
        # a capture that names no dot_kernel: the rule's block count only (every count is 128 more
        # candidates of thousands of lanes, for a kernel the names do not say ran)
        counts = range(1, min(-(-K // tile), DOT_MAX_BLOCKS) + 1) if named else (dot_blocks(K, v),)
        for blocks in counts:
            lanes = blocks * tile
            _, bounds = lane_layout(K, "tiled", lanes, tile)
            for ce in _c_entries(cap)[:1]:  # C after the reduce kernel's total: the epilogue
                sch = _sched(
                    cap, ce, k_tile=1, splits=lanes, split_bounds=bounds, split_rule="ceil", reduction="program",
                    reduction_program=dot_program(v),
                )  # fmt: skip
                out.append(Candidate("fma32", Variant(lanes=("tiled", lanes, tile)), sch, "cublas-dot"))
    return out


def cublas_candidates(cap: Capture, unit_name: str) -> list[Candidate]:
    """The peer-documented cuBLAS orders for an NVIDIA GEMM capture (see the module docstring):
    CUTLASS split-K where a CUTLASS tensor-core kernel ran (or the names say nothing); ``gemmSN``
    where it ran (or, unnamed, M or N is at most 16); ``gemv2`` where a gemv ran and ``dot`` where
    a ``dot_kernel`` ran (or either, unnamed, where M or N is 1)."""
    names = [str(k) for k in cap.kernels]
    M, N, _ = gemm_dims(cap, Variant())
    out = []
    if not names or any(re.search(r"tensorop_\w*(s1688|s16816|s161616)gemm", k) for k in names):
        out.extend(cutlass_splitk_candidates(cap, unit_name))
    out.extend(xmma_splitk_candidates(cap, unit_name))
    if any(re.search(r"gemmSN_|magma_sgemmEx", k) for k in names) or (not names and min(M, N) <= 16):
        out.extend(gemmsn_candidates(cap))
    if any(re.search(r"gemmSN_TN", k) for k in names) or (not names and min(M, N) <= 16):
        out.extend(gemmsn_tn_candidates(cap))
    if any(re.search(r"gemv", k) for k in names) or (not names and min(M, N) == 1):
        out.extend(gemv_candidates(cap))
    if any(re.search(DOT_KERNEL, k) for k in names) or (not names and min(M, N) == 1):
        out.extend(dot_candidates(cap))
    return out


def gsu_bounds(K: int, du: int, gsu: int) -> tuple[int, ...] | None:
    """Tensile's GSU split as tile bounds (tiles of ``du``, the tail tile in the last split): the
    ⌊K/du⌋ loop iterations dealt to ``gsu`` workgroups, the first ``iterations mod gsu`` one more
    (GSU.py's numIterPerWgRemainder); None when some workgroup would get none."""
    iters = K // du
    q, r = divmod(iters, gsu)
    if q == 0:
        return None
    b = [0]
    for i in range(gsu):
        b.append(b[-1] + q + (1 if i < r else 0))
    b[-1] = -(-K // du)
    return tuple(b)


def amd_candidates(cap: Capture, unit_name: str) -> list[Candidate]:
    """The AMD libraries' orders (see the module docstring; from source, not checked on silicon)
    for a GEMM capture whose ``gpu`` is an AMD one, on the GPU's matrix unit."""
    if not is_amd(cap.gpu) or cap.op not in GEMM_OPS:
        return []
    _, _, K = gemm_dims(cap, Variant())
    ces = _c_entries(cap)
    c_split = ("epilogue",) if "epilogue" in ces else ("chain",)
    out = []
    for v in _base_variants(cap):
        for du in AMD_BOUNDS.depth_u:  # GlobalSplitU
            for gsu in range(2, AMD_BOUNDS.max_gsu + 1):
                b = gsu_bounds(K, du, gsu)
                if b is None:
                    break
                for red in ("sequential", "workspace"):
                    for ce in c_split:
                        sch = _sched(cap, ce, k_tile=du, splits=gsu, split_rule="ceil", split_bounds=b, reduction=red)
                        out.append(Candidate(unit_name, v, sch, "hipblaslt-gsu"))
        for du in AMD_BOUNDS.stagger_depth_u:  # StaggerU
            iters = K // du
            tail = [iters] if K % du else []
            for s in range(1, min(iters, AMD_BOUNDS.max_stagger)):
                order = tuple(list(range(s, iters)) + list(range(s)) + tail)
                for ce in ces:
                    out.append(
                        Candidate(unit_name, replace(v, k_blocks=(du, order)), _sched(cap, ce), "hipblaslt-staggeru")
                    )
        for du in AMD_BOUNDS.streamk_depth_u:  # Stream-K
            out.extend(_streamk(cap, unit_name, v, K, du, c_split))
        for kpb in AMD_BOUNDS.ck_k_per_block:  # composable_kernel split-K
            for batch in range(2, AMD_BOUNDS.ck_max_batch + 1):
                b = _bounds(K, kpb, batch)
                if b is None:
                    continue
                for ce in c_split:
                    sch = _sched(cap, ce, k_tile=kpb, splits=batch, split_rule="ceil", split_bounds=b,
                                 reduction="workspace")  # fmt: skip
                    out.append(Candidate(unit_name, v, sch, "ck-splitk"))
    return out


def _cuts(tiles: int, pieces: int, start: int = 1):
    if pieces == 1:
        yield ()
        return
    for c in range(start, tiles - pieces + 2):
        for rest in _cuts(tiles, pieces - 1, c + 1):
            yield (c,) + rest


def _streamk(cap: Capture, unit_name: str, v: Variant, K: int, du: int, ces) -> list[Candidate]:
    """Stream-K pieces of one tile: 2 … 4 pieces at iteration bounds (``AMD_BOUNDS.streamk_pieces``
    bounds the iterations per tile for each count), the fixup in piece order from the first piece,
    from the last piece (the k blocks reversed piece by piece), or by a pairwise tree (4 pieces)."""
    tiles = -(-K // du)
    out = []
    for pieces, most in AMD_BOUNDS.streamk_pieces.items():
        if not pieces <= tiles <= most:
            continue
        for cut in _cuts(tiles, pieces):
            b = (0,) + cut + (tiles,)
            for ce in ces:
                reds = ("sequential", "tree") if pieces >= 4 else ("sequential",)
                for red in reds:
                    sch = _sched(cap, ce, k_tile=du, splits=pieces, split_rule="ceil", split_bounds=b, reduction=red)
                    out.append(Candidate(unit_name, v, sch, "hipblaslt-streamk"))
                if pieces == 2:  # owned by the last piece: its partial first
                    order = tuple(range(cut[0], tiles)) + tuple(range(cut[0]))
                    first = K - cut[0] * du
                    sch = _sched(cap, ce, k_tile=1, splits=2, split_rule="ceil", split_bounds=(0, first, K))
                    out.append(Candidate(unit_name, replace(v, k_blocks=(du, order)), sch, "hipblaslt-streamk"))
    return out
