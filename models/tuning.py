"""rocMLIR 2022 tuning parameters and what they change in the arithmetic.

A convolution's GEMM is cut into tiles by tuning parameters (``--perf_config``). Most of them
only move data around; what changes the *arithmetic* of an output is:

* the **instruction** (xdlops): chosen from the wave tile MPerWave×NPerWave
  (:func:`select_instruction`); with it the unit's group of k values per step and, for the
  k-reduction instructions 32x32x8f16 / 16x16x16f16, a **strided** k order inside each k tile;
* **KPack** (how many consecutive gemmK values one LDS vector holds), which moves the groups of
  a k-reduction instruction;
* **gemm padding**: gemmK padded with zeros when no tuning entry fits (padding kernels);
* **KBlocks**: the split-K count of the xdlops backward-weight kernel (fp16, no padding), whose
  partial sums are added with fp32 atomics in a run-dependent order.

:func:`plan` (one :class:`GemmPlan` per sub-GEMM) and :func:`accumulation_order` turn a
problem, a kernel kind and an optional tuning into :class:`emu.gemm.GemmOrder` s.

Sources (cited per item below; rocMLIR is github.com/ROCm/rocMLIR):

* ``GPP-2022-08``: rocMLIR ``mlir/include/mlir/Dialect/MIOpen/Tuning/GridwiseGemmParams.h``,
  MIOpen-dialect version with ``calculateKBlockNum(..., num_cu)`` (PR #586, 2022-04-07) and
  before the MIOpen→Rock rename (PR #774, ~2022-09-19). Its xdlops
  validity check rejects KPack > 1 for small blocks (M/NPerBlock in {16, 32, 64}, or 32×128 /
  128×32) for every non-int8 direction: the rule set ``"2022-08"`` (default).
* ``GPP-2022-09``: ``mlir/lib/Dialect/Rock/Tuning/GridwiseGemmParams.cpp`` @3df931f1 (the
  version after the rename): the same lists without that rejection: the rule set ``"2022-09"``.
* ``KBN``: ``calculateKBlockNum`` (``Rock/utility/loweringUtils.cpp`` @3df931f1; the identical
  MIOpen-dialect body mid-2022).
* ``XCS``: ``XdlopsCodeSelection.h`` (mid-2022).
* ``XG2``: XdlopsGemmV2 lowering (``ThreadwiseGemmLowering``, mid-2022), the operand order within
  a wave; the 16x16x16 strided groups are verified on the 2022 study's hardware lines
  (github.com/zhanglx13/llvm-project-mlir-dev-utils fp16_experiment @3b042e7).
* ``SER``: ``MIOpen/Tuning/Serializable.h`` (perf-config string: fields joined by ``,``) and the
  ``visit`` order of ``InitParamsXDL`` / ``InitParamsNonXDL`` in GridwiseGemmParams.h.

Why ``"2022-08"`` is the default: with the ``"2022-09"`` rules the backward-weight test
CHECK_BWD_WEIGHT1 gets {32,64,4,32,64,4} and KBlocks = 4, which the Aug-2022 hardware lines rule
out (fp16emu's reproduction of the study's lines: 4 excluded, 8 or 16 consistent); the ``"2022-08"`` rules give
{8,64,8,8,64,1} (4x4x4f16) and KBlocks = 8. Both rule sets give the same instruction *class*
(consecutive groups of 4) for every other suite shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar, NamedTuple

from emu.conv import ConvProblem, sub_gemms
from emu.gemm import GemmOrder, strided_k_order

__all__ = [
    "TuningError",
    "PerfConfigError",
    "InvalidTuning",
    "UnsupportedTuning",
    "XdlopsTuning",
    "NonXdlopsTuning",
    "Tuning",
    "Instruction",
    "GemmPlan",
    "RULES",
    "DEFAULT_RULES",
    "NUM_CU_X2",
    "XDLOPS_TUNINGS_2022",
    "NONXDLOPS_TUNINGS_2022",
    "XDLOPS_UNIVERSAL_2022",
    "NONXDLOPS_UNIVERSAL_2022",
    "parse_perf_config",
    "as_tuning",
    "select_instruction",
    "mfma_k_order",
    "check_tuning",
    "default_tuning",
    "needs_padding",
    "kblocks",
    "plan",
    "accumulation_order",
    "SOURCES",
]

STUDY = (
    "the 2022 fp16 study's measured lines (github.com/zhanglx13/llvm-project-mlir-dev-utils fp16_experiment @3b042e7)"
)
GPP_08 = "rocMLIR MIOpen/Tuning/GridwiseGemmParams.h, mid-2022 (after PR #586, before the Rock rename PR #774)"
GPP_09 = "rocMLIR Rock/Tuning/GridwiseGemmParams.cpp @3df931f1"
KBN = "rocMLIR calculateKBlockNum, Rock/utility/loweringUtils.cpp @3df931f1 (same body mid-2022)"
XCS = "rocMLIR XdlopsCodeSelection.h, mid-2022 (the instruction selection table)"
XG2 = (
    "rocMLIR XdlopsGemmV2 lowering, mid-2022 (the operand order within a wave); 16x16x16 strided groups "
    "verified on " + STUDY
)
SER = "rocMLIR MIOpen/Tuning/Serializable.h (fields joined by ','; InitParamsXDL/InitParamsNonXDL visit order)"

#: Where each rule of this module comes from.
SOURCES: Mapping[str, str] = MappingProxyType(
    {
        "perf_config": SER + "; " + GPP_08,
        "xdlops_list": GPP_08 + "; " + GPP_09,
        "nonxdlops_list": GPP_08 + "; " + GPP_09,
        "universal": GPP_08 + " (universal_Parameters: xdlops {32,64,4}, non-xdlops {64,64,16})",
        "padding": GPP_08 + " calculatePaddingKernelSize / populatePaddingKernelDerived",
        "validity_2022-08": GPP_08 + " isValidGemm, isValidBlockwiseGemmXDLOPS, calculateLdsNumberOfByte",
        "validity_2022-09": GPP_09,
        "instruction": XCS,
        "k_order": XG2,
        "kblocks": KBN + "; num_cu = 120 with -x2 (miopen-gen populateDefaults)",
        "atomics": "rocMLIR Rock ConvToGemm.cpp @3df931f1 backwardWeightAtomicAdd: bwd_weight, xdlops, f16, no gemm padding",
        "kblocks_data": STUDY
        + ": KBlocks 4 ruled out for CHECK_BWD_WEIGHT1 (8 or 16 consistent): a parameter to identify",
    }
)

RULES = ("2022-08", "2022-09", "any")
DEFAULT_RULES = "2022-08"
#: ``-x2`` forces gfx908 with num_cu = 120 whatever the real GPU (miopen-gen populateDefaults).
NUM_CU_X2 = 120
_WAVE_SIZE = 64
_K_BASE_F16 = 4  # XCS: k_base = 4 for every f16 mfma


# --- errors ---------------------------------------------------------------------------------


class TuningError(ValueError):
    """A tuning that cannot be used (base class; a ValueError)."""


class PerfConfigError(TuningError):
    """A perf-config string or field that does not parse or breaks a rule of its own."""


class InvalidTuning(TuningError):
    """A tuning rocMLIR 2022 would have rejected for this problem."""


class UnsupportedTuning(TuningError):
    """A tuning rocMLIR accepted but whose accumulation order fp16emu cannot express exactly."""


# --- tuning records -------------------------------------------------------------------------

#: f16 wave tiles XdlopsCodeSelection knows, with the KPerBlock divisor isValidBlockwiseGemmXDLOPS
#: demands (validWaveGemmSize; 128×128 and the other commented-out ones are not offered).
_WAVES = {
    (128, 64): 1,
    (64, 128): 1,
    (64, 64): 1,
    (64, 32): 1,
    (64, 16): 1,
    (32, 64): 1,
    (32, 32): 2,
    (16, 64): 1,
    (16, 16): 4,
    (8, 64): 1,
    (4, 64): 1,
}
_KPACKS = (1, 4, 5, 6, 7, 8)  # f16/bf16: 1, or 4 to 8 (isValidBlockwiseGemmXDLOPS)
_NONXDL_BLOCK_SIZES = (64, 128, 256)


def _positive(cls_name: str, name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PerfConfigError(f"{cls_name}.{name}: must be a positive integer, got {value!r}")


@dataclass(frozen=True)
class XdlopsTuning:
    """rocMLIR 2022 xdlops tuning (InitParamsXDL). perf-config order: MPerBlock, NPerBlock,
    KPerBlock, MPerWave, NPerWave, KPack, AThreadCopyMoreGemmK, BThreadCopyMoreGemmKPack.
    KPerBlock counts KPack vectors (a block iteration covers KPerBlock·KPack gemmK values). The two
    copy flags only arrange global→LDS copies and never change the arithmetic. Source: SER."""

    m_per_block: int
    n_per_block: int
    k_per_block: int
    m_per_wave: int
    n_per_wave: int
    kpack: int
    a_copy_more_gemm_k: bool = False
    b_copy_more_gemm_kpack: bool = False

    xdlops: ClassVar[bool] = True
    FIELDS: ClassVar[tuple[str, ...]] = (
        "m_per_block",
        "n_per_block",
        "k_per_block",
        "m_per_wave",
        "n_per_wave",
        "kpack",
        "a_copy_more_gemm_k",
        "b_copy_more_gemm_kpack",
    )

    def __post_init__(self):
        for name in self.FIELDS[:6]:
            _positive("XdlopsTuning", name, getattr(self, name))
        for name in self.FIELDS[6:]:
            if getattr(self, name) not in (0, 1, False, True):
                raise PerfConfigError(f"XdlopsTuning.{name}: must be 0 or 1, got {getattr(self, name)!r}")
            object.__setattr__(self, name, bool(getattr(self, name)))
        wave = (self.m_per_wave, self.n_per_wave)
        if wave not in _WAVES:
            allowed = ", ".join(f"{m}x{n}" for m, n in _WAVES)
            raise PerfConfigError(
                f"XdlopsTuning m_per_wave x n_per_wave: {wave[0]}x{wave[1]} has no f16 mfma "
                f"instruction; allowed: {allowed} ({XCS})"
            )
        if self.kpack not in _KPACKS:
            raise PerfConfigError(f"XdlopsTuning.kpack: {self.kpack} is not allowed for f16; allowed: 1, 4, 5, 6, 7, 8")

    @property
    def block_size(self) -> int:
        """64 · MPerBlock · NPerBlock / (MPerWave · NPerWave) (obtainBlockSize)."""
        return _WAVE_SIZE * self.m_per_block * self.n_per_block // (self.m_per_wave * self.n_per_wave)

    @property
    def k_values_per_block(self) -> int:
        """gemmK values one block iteration covers: KPerBlock · KPack."""
        return self.k_per_block * self.kpack

    def to_perf_config(self) -> str:
        """The 8-field perf-config string rocMLIR 2022 read (SER)."""
        return ",".join(str(int(getattr(self, f))) for f in self.FIELDS)

    def __str__(self) -> str:
        return self.to_perf_config()


@dataclass(frozen=True)
class NonXdlopsTuning:
    """rocMLIR 2022 non-xdlops tuning (InitParamsNonXDL). perf-config order: BlockSize,
    MPerBlock, NPerBlock, KPerBlock, MPerThread, NPerThread. Source: SER."""

    block_size: int
    m_per_block: int
    n_per_block: int
    k_per_block: int
    m_per_thread: int
    n_per_thread: int

    xdlops: ClassVar[bool] = False
    FIELDS: ClassVar[tuple[str, ...]] = (
        "block_size",
        "m_per_block",
        "n_per_block",
        "k_per_block",
        "m_per_thread",
        "n_per_thread",
    )

    def __post_init__(self):
        for name in self.FIELDS:
            _positive("NonXdlopsTuning", name, getattr(self, name))
        if self.block_size not in _NONXDL_BLOCK_SIZES:
            raise PerfConfigError(
                f"NonXdlopsTuning.block_size: {self.block_size} is not allowed; allowed: 64, 128, 256 "
                f"(CalculateBlockGemmPerformanceParameters)"
            )
        for name in ("m_per_thread", "n_per_thread"):
            if not 2 <= getattr(self, name) <= 4:
                raise PerfConfigError(f"NonXdlopsTuning.{name}: {getattr(self, name)} is not allowed; allowed: 2, 3, 4")

    @property
    def k_values_per_block(self) -> int:
        return self.k_per_block

    def to_perf_config(self) -> str:
        return ",".join(str(getattr(self, f)) for f in self.FIELDS)

    def __str__(self) -> str:
        return self.to_perf_config()


Tuning = XdlopsTuning | NonXdlopsTuning


def parse_perf_config(text: str, xdlops: bool) -> Tuning:
    """A rocMLIR 2022 perf-config string → a tuning record.

    xdlops: ``MPerBlock,NPerBlock,KPerBlock,MPerWave,NPerWave,KPack,ACopyMore,BCopyMore`` (8 fields,
    as rocMLIR 2022 read them; the 6-field form without the two copy flags is accepted too);
    non-xdlops: ``BlockSize,MPerBlock,NPerBlock,KPerBlock,MPerThread,NPerThread``. Raises
    :class:`PerfConfigError` naming the field."""
    cls = XdlopsTuning if xdlops else NonXdlopsTuning
    kind = "xdlops" if xdlops else "non-xdlops"
    if not isinstance(text, str):
        raise PerfConfigError(f"perf_config: expected a string, got {type(text).__name__}")
    parts = [p.strip() for p in text.strip().split(",")]
    counts = (6, 8) if xdlops else (6,)
    if len(parts) not in counts:
        want = " or ".join(str(c) for c in counts)
        raise PerfConfigError(
            f"perf_config {text!r}: {kind} needs {want} comma-separated fields "
            f"({','.join(cls.FIELDS[: counts[-1]])}), got {len(parts)}"
        )
    values = []
    for name, part in zip(cls.FIELDS, parts):
        if not part or not part.lstrip("+").isdigit():
            raise PerfConfigError(f"perf_config field {name}: {part!r} is not a non-negative integer")
        values.append(int(part))
    return cls(*values)


def as_tuning(tuning, xdlops: bool) -> Tuning | None:
    """None, a tuning record, a perf-config string, or a sequence of field values → a record of the
    kind the kernel takes (a record of the other kind is an error)."""
    if tuning is None:
        return None
    cls = XdlopsTuning if xdlops else NonXdlopsTuning
    if isinstance(tuning, (XdlopsTuning, NonXdlopsTuning)):
        if tuning.xdlops != xdlops:
            raise PerfConfigError(
                f"tuning: a {type(tuning).__name__} given to a {'xdlops' if xdlops else 'non-xdlops'} kernel"
            )
        return tuning
    if isinstance(tuning, str):
        return parse_perf_config(tuning, xdlops)
    if isinstance(tuning, Mapping):
        return cls(**tuning)
    return cls(*tuning)


# --- the 2022 default lists ------------------------------------------------------------------

#: The xdlops list (f16, every direction), in order (GPP-2022-08 initParameters; the same nine at
#: GPP-2022-09). The first valid entry is the default.
XDLOPS_TUNINGS_2022: tuple[XdlopsTuning, ...] = tuple(
    XdlopsTuning(*t)
    for t in (
        (128, 128, 4, 64, 64, 4),
        (32, 64, 4, 32, 64, 4),
        (128, 128, 8, 64, 64, 1),
        (128, 128, 16, 64, 64, 1),
        (8, 64, 8, 8, 64, 1),
        (4, 64, 16, 4, 64, 1),
        (32, 64, 4, 32, 64, 1),
        (16, 16, 16, 16, 16, 1),
        (16, 16, 4, 16, 16, 1),
    )
)
#: The non-xdlops list, in order (initParameters; also what -pv_with_gpu's fp32 kernel uses).
NONXDLOPS_TUNINGS_2022: tuple[NonXdlopsTuning, ...] = tuple(
    NonXdlopsTuning(*t)
    for t in (
        (256, 128, 128, 16, 4, 4),
        (256, 128, 128, 8, 4, 4),
        (256, 128, 128, 4, 4, 4),
        (128, 128, 64, 16, 4, 4),
        (128, 128, 64, 8, 4, 4),
        (128, 128, 64, 4, 4, 4),
        (128, 64, 128, 16, 4, 4),
        (128, 64, 128, 8, 4, 4),
        (128, 64, 128, 4, 4, 4),
        (64, 64, 64, 16, 4, 4),
        (64, 64, 64, 8, 4, 4),
        (64, 64, 64, 4, 4, 4),
        (64, 64, 32, 16, 4, 2),
        (64, 64, 32, 8, 4, 2),
        (64, 64, 32, 4, 4, 2),
        (64, 32, 64, 16, 2, 4),
        (64, 32, 64, 8, 2, 4),
        (64, 32, 64, 4, 2, 4),
        (64, 32, 32, 16, 2, 2),
        (64, 32, 32, 8, 2, 2),
        (64, 32, 32, 4, 2, 2),
    )
)
#: (MPerBlock, NPerBlock, KPerBlock) the padding kernels pad to (universal_Parameters).
XDLOPS_UNIVERSAL_2022 = (32, 64, 4)
NONXDLOPS_UNIVERSAL_2022 = (64, 64, 16)


# --- instruction selection -------------------------------------------------------------------


class Instruction(NamedTuple):
    """One f16 mfma (or the scalar FMA of the non-xdlops kernel), per XCS.

    ``k``: k values one instruction reduces per output; ``k_base``: k values one lane block
    supplies, which the unit takes as one group (DOT4); ``input_blocks``/``output_blocks``: lane
    blocks; ``reduction``: a k-reduction instruction (one output block, several input blocks),
    whose groups are spread over the input blocks; ``k_tile``: the width of the gemmK tile inside
    which such an instruction's groups are strided (None: groups are consecutive gemmK values)."""

    name: str
    m: int
    n: int
    k: int
    k_base: int
    input_blocks: int
    output_blocks: int
    k_tile: int | None = None

    @property
    def reduction(self) -> bool:
        return self.output_blocks == 1 and self.input_blocks > 1

    @property
    def group(self) -> int:
        """Size of one group along gemmK (what one lane block feeds the unit): k_base."""
        return self.k_base


# name, m, n, k, k_base, input blocks, output blocks (XCS property table)
_INSTR = {
    "v_mfma_f32_32x32x4f16": (32, 32, 4, 4, 2, 2),
    "v_mfma_f32_16x16x4f16": (16, 16, 4, 4, 4, 4),
    "v_mfma_f32_4x4x4f16": (4, 64, 4, 4, 1, 1),
    "v_mfma_f32_32x32x8f16": (32, 32, 8, 4, 2, 1),
    "v_mfma_f32_16x16x16f16": (16, 16, 16, 4, 4, 1),
}
# MPerWave × NPerWave → instruction (XCS f16 branch)
_SELECT = {
    (128, 64): "v_mfma_f32_32x32x4f16",
    (64, 128): "v_mfma_f32_32x32x4f16",
    (64, 64): "v_mfma_f32_32x32x4f16",
    (64, 32): "v_mfma_f32_32x32x4f16",
    (32, 64): "v_mfma_f32_32x32x4f16",
    (64, 16): "v_mfma_f32_16x16x4f16",
    (16, 64): "v_mfma_f32_16x16x4f16",
    (8, 64): "v_mfma_f32_4x4x4f16",
    (4, 64): "v_mfma_f32_4x4x4f16",
    (32, 32): "v_mfma_f32_32x32x8f16",
    (16, 16): "v_mfma_f32_16x16x16f16",
}
_FMA = Instruction("v_fma_f32", 1, 1, 1, 1, 1, 1, None)


def select_instruction(tuning: Tuning) -> Instruction:
    """The instruction a tuning's wave tile selects (XCS), with its k grouping. For a k-reduction
    instruction ``k_tile`` is input_blocks·k_base (16 or 8) with KPack 1 and
    input_blocks·KPack with KPack ≥ 4 (XG2). A non-xdlops tuning gives the scalar v_fma_f32."""
    if isinstance(tuning, NonXdlopsTuning):
        return _FMA
    name = _SELECT[(tuning.m_per_wave, tuning.n_per_wave)]
    m, n, k, k_base, nin, nout = _INSTR[name]
    reduction = nout == 1 and nin > 1
    tile = (nin * (k_base if tuning.kpack == 1 else tuning.kpack)) if reduction else None
    return Instruction(name, m, n, k, k_base, nin, nout, tile)


def mfma_k_order(K: int, instruction: Instruction, kpack: int) -> tuple[int, ...] | None:
    """The gemmK sequence the xdlops kernel feeds its unit, as a permutation of range(K); None
    for ascending order. From the operand loads of XG2:

    * non-reduction instructions: each instruction takes k_base consecutive gemmK values (the
      k_base slice of a KPack vector, or k_base consecutive buffer elements with KPack 1),
      issued in ascending k: identity;
    * k-reduction, KPack 1: lane block b holds slot k_i·nb + b, so within each nb·k_base-wide
      tile block b's group is {b, b+nb, …} (16x16x16: {b, b+4, b+8, b+12}; 32x32x8: {b, b+2, …});
    * k-reduction, KPack ≥ k_base: slot s = k_i·nb + b holds gemmK s·KPack … s·KPack+KPack−1 and
      the instruction loop steps k_base inside the vector, so within each nb·KPack tile the groups
      are, for iv = 0, k_base, …: for b: {b·KPack + iv, …, b·KPack + iv + k_base − 1} (identity
      when KPack = k_base). [inferred from the load formula; only KPack 1 is checked on hardware]

    K must be a multiple of the tile (:class:`UnsupportedTuning` otherwise)."""
    if instruction.k_tile is None:
        return None
    nb, kb = instruction.input_blocks, instruction.k_base
    tile = instruction.k_tile
    if K % tile:
        raise UnsupportedTuning(
            f"gemmK {K} is not a multiple of the {instruction.name} k tile {tile}: "
            f"the kernel's groups would mix real and out-of-range k values"
        )
    if kpack == 1:
        return strided_k_order(K, tile, kb)
    if kpack % kb:
        raise UnsupportedTuning(
            f"kpack {kpack} is not a multiple of k_base {kb}; rocMLIR's lowering asserted "
            f"this never happens and fp16emu has no order for it"
        )
    if kpack == kb:
        return None
    order = []
    for t0 in range(0, K, tile):
        for iv in range(0, kpack, kb):
            for b in range(nb):
                start = t0 + b * kpack + iv
                order.extend(range(start, start + kb))
    return tuple(order)


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
            and (K * M) % _WAVE_SIZE == 0
            and (K * N) % _WAVE_SIZE == 0
            and N % 16 == 0
            and M % 4 == 0
            and K % 4 == 0
        )
        if not ok:
            return f"gemm {M}x{N}x{K} fails isValidGridGemmXdlops (backward data)"
    k_div = _WAVES[(t.m_per_wave, t.n_per_wave)]
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
