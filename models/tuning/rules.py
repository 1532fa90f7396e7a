"""rocMLIR 2022 tuning rules: which tuning of :mod:`models.tuning.tables` is valid for a GEMM
(rule sets "2022-08", "2022-09", "any"), the default choice, gemm padding, the KBlocks split-K
count, and the plan of every sub-GEMM (:class:`GemmPlan`, with its :class:`emu.gemm.GemmOrder`).
The sources are :data:`models.tuning.SOURCES` and :mod:`models.tuning`."""

from __future__ import annotations

from dataclasses import dataclass, field

from emu.conv import ConvProblem, sub_gemms
from emu.gemm import GemmOrder

from .tables import (
    DEFAULT_RULES,
    GPP_08,
    NONXDLOPS_TUNINGS_2022,
    NONXDLOPS_UNIVERSAL_2022,
    NUM_CU_X2,
    RULES,
    WAVE_SIZE,
    WAVE_TILES,
    XDLOPS_TUNINGS_2022,
    XDLOPS_UNIVERSAL_2022,
    Instruction,
    InvalidTuning,
    NonXdlopsTuning,
    Tuning,
    UnsupportedTuning,
    XdlopsTuning,
    as_tuning,
    mfma_k_order,
    select_instruction,
)

__all__ = [
    "check_tuning",
    "default_tuning",
    "needs_padding",
    "kblocks",
    "GemmPlan",
    "plan",
    "accumulation_order",
]


# --- validity --------------------------------------------------------------------------------


def _xdl_failure(t: XdlopsTuning, size: tuple[int, int, int, int], direction: str, rules: str) -> str | None:
    """Why rocMLIR would reject ``t`` for this GEMM (None: valid). ``rules`` "2022-08"/"2022-09"."""
    _, M, N, K = size
    if M % t.m_per_block or N % t.n_per_block or K % (t.k_per_block * t.kpack):
        return (
            f"gemm {M}x{N}x{K} is not a multiple of m_per_block {t.m_per_block}, n_per_block "
            f"{t.n_per_block}, k_per_block·kpack {t.k_per_block * t.kpack} (isValidGemm)"
        )
    if direction == "bwd_data":
        ok = (
            not (M % 16 and N % 64)
            and (M * N) % 256 == 0
            and (K * M) % WAVE_SIZE == 0
            and (K * N) % WAVE_SIZE == 0
            and N % 16 == 0
            and M % 4 == 0
            and K % 4 == 0
        )
        if not ok:
            return f"gemm {M}x{N}x{K} fails isValidGridGemmXdlops (backward data)"
    k_div = WAVE_TILES[(t.m_per_wave, t.n_per_wave)]
    if t.k_per_block % k_div:
        return f"k_per_block {t.k_per_block} must be a multiple of {k_div} for a {t.m_per_wave}x{t.n_per_wave} wave"
    bs = t.block_size
    if t.m_per_block % t.m_per_wave or t.n_per_block % t.n_per_wave or not 64 <= bs <= 256:
        return (
            f"block {t.m_per_block}x{t.n_per_block} with wave {t.m_per_wave}x{t.n_per_wave} gives block size "
            f"{bs}; need whole waves and 64 ≤ block size ≤ 256"
        )
    if t.k_per_block % t.kpack:
        return f"k_per_block {t.k_per_block} must be a multiple of kpack {t.kpack}"
    if rules == "2022-08" and t.kpack > 1:
        small = {16, 32, 64}
        if (t.m_per_block in small and t.n_per_block in small) or (t.m_per_block, t.n_per_block) in (
            (32, 128),
            (128, 32),
        ):
            return (
                f"kpack {t.kpack} > 1 with block {t.m_per_block}x{t.n_per_block} was rejected in mid-2022 "
                f"('Ignore KReduction XDLOPS path', {GPP_08})"
            )
    if t.k_per_block * t.m_per_block < bs or t.k_per_block * t.n_per_block < bs:
        return f"k_per_block {t.k_per_block} leaves a thread with nothing to copy (dataPerThreadCopy = 0)"
    if t.k_per_block * (t.m_per_block + t.n_per_block) * 4 > 64 * 1024:
        return "the block's LDS tiles exceed 64 KiB"
    return None


def _nonxdl_failure(t: NonXdlopsTuning, size: tuple[int, int, int, int], direction: str) -> str | None:
    """Why the 2022 non-xdlops kernel would reject ``t`` (None: valid); the same in both rule sets."""
    _, M, N, K = size
    if M % t.m_per_block or N % t.n_per_block or K % t.k_per_block:
        return (
            f"gemm {M}x{N}x{K} is not a multiple of m_per_block {t.m_per_block}, n_per_block "
            f"{t.n_per_block}, k_per_block {t.k_per_block} (isValidGemm)"
        )
    if direction == "bwd_data" and (M % 32 or N % 32 or K % 4):
        return f"gemm {M}x{N}x{K}: backward data needs M, N multiples of 32 and K of 4"
    bs = t.block_size
    if t.k_per_block * t.m_per_block < bs or t.k_per_block * t.n_per_block < bs:
        return f"k_per_block {t.k_per_block} leaves a thread with nothing to copy (dataPerThreadCopy = 0)"
    if t.m_per_block % t.m_per_thread or t.n_per_block % t.n_per_thread:
        return "m/n_per_block must be multiples of m/n_per_thread"
    cluster = {64: (8, 8), 128: (16, 8), 256: (16, 16)}[bs]
    thread_m, thread_n = t.m_per_block // t.m_per_thread, t.n_per_block // t.n_per_thread
    # rocMLIR's check reads `if (!(tM % cM == 0) && (tN % cN == 0)) fail` (sic)
    if (thread_m % cluster[0] != 0) and (thread_n % cluster[1] == 0):
        return "thread tile does not fit the block's thread clusters"
    if thread_m // cluster[0] != 2 or thread_n // cluster[1] != 2:
        return (
            f"block {t.m_per_block}x{t.n_per_block} / thread {t.m_per_thread}x{t.n_per_thread} with block size {bs} "
            f"does not give 2x2 thread clusters (inline asm limit)"
        )
    if t.m_per_block * t.n_per_block < bs:
        return "fewer outputs than threads"
    return None


def check_tuning(tuning: Tuning, problem: ConvProblem, *, rules: str = DEFAULT_RULES) -> None:
    """Raise :class:`InvalidTuning` if rocMLIR (``rules``) would have rejected ``tuning`` for any of
    the problem's GEMMs. ``rules="any"`` checks nothing."""
    _check_rules(rules)
    if rules == "any":
        return
    for sub in sub_gemms(problem):
        size = (sub.g, sub.m, sub.n, sub.k)
        why = (
            _xdl_failure(tuning, size, problem.direction, rules)
            if tuning.xdlops
            else _nonxdl_failure(tuning, size, problem.direction)
        )
        if why:
            raise InvalidTuning(f"perf_config {tuning.to_perf_config()}: {why}")


def _check_rules(rules: str) -> None:
    if rules not in RULES:
        raise ValueError(f"rules: {rules!r} is not one of {', '.join(RULES)}")


def needs_padding(size: tuple[int, int, int, int], xdlops: bool) -> bool:
    """The 2022 padding-kernel rule (calculatePaddingKernelSize): pad when no entry of the default
    list has MPerBlock | gemmM, NPerBlock | gemmN and KPerBlock | gemmK (KPack not counted)."""
    _, M, N, K = size
    entries = XDLOPS_TUNINGS_2022 if xdlops else NONXDLOPS_TUNINGS_2022
    return not any(M % t.m_per_block == 0 and N % t.n_per_block == 0 and K % t.k_per_block == 0 for t in entries)


def default_tuning(
    size: tuple[int, int, int, int], direction: str, xdlops: bool, *, rules: str = DEFAULT_RULES
) -> tuple[Tuning, bool]:
    """(tuning, padded) rocMLIR 2022 picks for one GEMM with no perf-config: the first valid entry
    of the list; when padding is needed (:func:`needs_padding`) or no entry is valid, the first
    entry whose block sizes equal the universal padding parameters (populatePaddingKernelDerived),
    with ``padded`` telling whether gemm dimensions were padded."""
    _check_rules(rules)
    entries = XDLOPS_TUNINGS_2022 if xdlops else NONXDLOPS_TUNINGS_2022
    universal = XDLOPS_UNIVERSAL_2022 if xdlops else NONXDLOPS_UNIVERSAL_2022
    padded = needs_padding(size, xdlops)
    if not padded:
        for t in entries:
            if rules == "any":
                why = (
                    None
                    if (
                        size[1] % t.m_per_block == 0
                        and size[2] % t.n_per_block == 0
                        and size[3] % t.k_values_per_block == 0
                    )
                    else "size"
                )
            else:
                why = _xdl_failure(t, size, direction, rules) if xdlops else _nonxdl_failure(t, size, direction)
            if why is None:
                return t, False
    for t in entries:
        if (t.m_per_block, t.n_per_block, t.k_per_block) == universal:
            return t, padded
    raise AssertionError("the 2022 lists always hold an entry with the universal block sizes")


def kblocks(size: tuple[int, int, int, int], batch: int, tuning: XdlopsTuning, *, num_cu: int = NUM_CU_X2) -> int:
    """KBlocks of the split-K backward-weight kernel (calculateKBlockNum, KBN): start from
    min(max(20·num_cu / gridSize, 1), N) with gridSize = G·(M/MPerBlock)·(N/NPerBlock), and
    decrease until KBlocks | N and gemmK is a multiple of KBlocks·KPerBlock·KPack."""
    g, M, N, K = size
    if M % tuning.m_per_block or N % tuning.n_per_block or K % tuning.k_values_per_block:
        raise InvalidTuning(
            f"perf_config {tuning.to_perf_config()}: calculateKBlockNum needs gemm {M}x{N}x{K} "
            f"to be a multiple of the block"
        )
    grid = g * (M // tuning.m_per_block) * (N // tuning.n_per_block)
    kb = min(max(20 * num_cu // grid, 1), batch)
    while kb > 1 and (batch % kb or K % (kb * tuning.k_values_per_block)):
        kb -= 1
    return max(1, min(batch, kb))


# --- plans -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GemmPlan:
    """How the kernel runs one sub-GEMM: the tuning, its instruction, padding, split-K and the
    resulting :class:`emu.gemm.GemmOrder`. ``kblocks`` is 1 unless the split-K atomic path runs;
    ``kblocks_rule`` is what calculateKBlockNum gives (also when overridden)."""

    gemm_id: int
    size: tuple[int, int, int, int]  # (gemmG, gemmM, gemmN, gemmK), unpadded
    tuning: Tuning
    instruction: Instruction
    default: bool  # the tuning is the 2022 default (no perf-config given)
    padded: bool  # a padding kernel (gemm dimensions padded with zeros)
    pad_k: int
    atomic: bool  # the split-K + fp32 atomic-add backward-weight path
    kblocks: int
    kblocks_rule: int | None
    order: GemmOrder
    notes: str = field(default="", compare=False)


def _kind(kernel) -> bool:
    """True for an xdlops kernel, from a bool, a name or an object with ``.xdlops``."""
    if isinstance(kernel, bool):
        return kernel
    if hasattr(kernel, "xdlops"):
        return bool(kernel.xdlops)
    key = str(kernel).lower()
    if key in ("xdlops", "rocmlir-2022-xdlops", "x2", "mfma"):
        return True
    if key in ("nonxdlops", "non-xdlops", "rocmlir-2022-nonxdlops", "gpu-validation", "fma"):
        return False
    raise ValueError(f"kernel: {kernel!r} is not one of xdlops, nonxdlops, rocmlir-2022-xdlops, rocmlir-2022-nonxdlops")


def plan(
    problem: ConvProblem,
    kernel,
    tuning=None,
    hw=None,
    *,
    kblocks_override: int | None = None,
    rules: str = DEFAULT_RULES,
    num_cu: int = NUM_CU_X2,
    combine: str = "ascending",
    combine_seed: int = 0,
) -> list[GemmPlan]:
    """The kernel's partition of every sub-GEMM of ``problem`` (:func:`emu.conv.sub_gemms` order).

    ``kernel``: "xdlops"/"nonxdlops" (or a kernel name, a bool, an object with ``.xdlops``);
    ``tuning``: None (the 2022 default per sub-GEMM), a record, or a perf-config string (applied to
    every sub-GEMM, as rocMLIR passed one perf-config to each gemm_id); ``hw`` does not change the
    partition (``-x2`` forced num_cu = 120 on every GPU) and is accepted for symmetry;
    ``kblocks_override``: the split count of the backward-weight atomic path instead of
    calculateKBlockNum's (the study's data contradict it for some tests: a parameter to identify); ``rules``: "2022-08" (default),
    "2022-09", or "any" (no rocMLIR validity check; gemmK padded to a whole block if needed);
    ``combine``/``combine_seed``: the atomic-add order (see :class:`emu.gemm.GemmOrder`)."""
    _check_rules(rules)
    xdlops = _kind(kernel)
    given = as_tuning(tuning, xdlops)
    if given is not None:
        check_tuning(given, problem, rules=rules)
    if kblocks_override is not None and (
        isinstance(kblocks_override, bool) or not isinstance(kblocks_override, int) or kblocks_override < 1
    ):
        raise ValueError(f"kblocks_override: must be a positive integer, got {kblocks_override!r}")
    plans = []
    for sub in sub_gemms(problem):
        size = (sub.g, sub.m, sub.n, sub.k)
        if given is None:
            t, padded = default_tuning(size, problem.direction, xdlops, rules=rules)
        else:
            t, padded = given, False
        instr = select_instruction(t)
        notes = []
        K = sub.k
        if padded:
            pad_k = (XDLOPS_UNIVERSAL_2022 if xdlops else NONXDLOPS_UNIVERSAL_2022)[2]
            notes.append(f"padding kernel: gemmK padded with zeros to a multiple of {pad_k}")
        elif given is not None and K % t.k_values_per_block:
            pad_k = t.k_values_per_block  # rules="any": a what-if padding to whole blocks
            notes.append(f"gemmK padded with zeros to a multiple of k_per_block·kpack = {pad_k} (rules='any')")
        else:
            pad_k = 1
        if not xdlops:
            k_order = None
        else:
            if pad_k > 1 and instr.k_tile is not None and K % instr.k_tile:
                raise UnsupportedTuning(
                    f"{instr.name} with gemmK {K} padded: the strided k groups would mix padding "
                    f"zeros into the middle of a group, which GemmOrder cannot express"
                )
            if t.kpack == 1 and t.k_per_block % (
                instr.input_blocks * instr.k_base if instr.reduction else instr.k_base
            ):
                need = instr.input_blocks * instr.k_base if instr.reduction else instr.k_base
                raise UnsupportedTuning(
                    f"perf_config {t.to_perf_config()}: with kpack 1 the {instr.name} lowering reads "
                    f"{need} k values per lane block but k_per_block {t.k_per_block} holds fewer "
                    f"(out-of-range vector reads); fp16emu has no model for that"
                )
            k_order = mfma_k_order(K, instr, t.kpack)
        atomic = xdlops and problem.direction == "bwd_weight" and not padded
        kb_rule = None
        split = 1
        if atomic:
            kb_rule = kblocks(size, problem.n, t, num_cu=num_cu)
            split = kb_rule if kblocks_override is None else kblocks_override
            if problem.n % split or K % split:
                raise InvalidTuning(f"kblocks {split}: must divide the batch {problem.n} (split-K over n)")
            chunk = K // split
            if k_order is not None and chunk % instr.k_tile:
                raise UnsupportedTuning(
                    f"kblocks {split}: a split-K chunk of {chunk} gemmK values is not a whole "
                    f"number of {instr.name} k tiles ({instr.k_tile})"
                )
            notes.append(
                f"split-K over the batch with fp32 atomic adds, KBlocks {split}"
                + (f" (calculateKBlockNum gives {kb_rule})" if kblocks_override is not None else "")
            )
        elif kblocks_override is not None:
            raise InvalidTuning(
                "kblocks_override: this kernel and problem do not run the split-K atomic path "
                "(needs xdlops, bwd_weight, no gemm padding)"
            )
        order = GemmOrder(
            k_order=k_order,
            pad_k=pad_k,
            split_k=split,
            combine=combine,
            combine_seed=combine_seed,
            notes="; ".join([instr.name] + notes),
        )
        plans.append(
            GemmPlan(
                sub.gemm_id,
                size,
                t,
                instr,
                given is None,
                padded,
                pad_k,
                atomic,
                split,
                kb_rule,
                order,
                "; ".join(notes),
            )
        )
    return plans


def accumulation_order(problem: ConvProblem, kernel, tuning=None, hw=None, **kwargs) -> list[GemmOrder]:
    """One :class:`emu.gemm.GemmOrder` per sub-GEMM of ``problem`` for the rocMLIR 2022 kernel
    ``kernel`` ("xdlops"/"nonxdlops" or a name); keyword arguments as :func:`plan`."""
    return [p.order for p in plan(problem, kernel, tuning, hw, **kwargs)]
