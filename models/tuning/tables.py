"""rocMLIR 2022 tuning tables: the tuning records and their perf-config strings, the 2022 default
lists, and the xdlops instruction table with the gemmK order each instruction feeds its unit.
What the rules do with them (validity, the default choice, padding, KBlocks, the plan of each
sub-GEMM) is :mod:`models.tuning.rules`; the sources are :data:`SOURCES` and :mod:`models.tuning`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar, NamedTuple

from emu.gemm import strided_k_order

__all__ = [
    "TuningError",
    "PerfConfigError",
    "InvalidTuning",
    "UnsupportedTuning",
    "XdlopsTuning",
    "NonXdlopsTuning",
    "Tuning",
    "Instruction",
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
    "SOURCES",
    "WAVE_SIZE",
    "WAVE_TILES",
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

#: Where each table and rule of models.tuning comes from.
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
WAVE_SIZE = 64
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
WAVE_TILES = {
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
        if wave not in WAVE_TILES:
            allowed = ", ".join(f"{m}x{n}" for m, n in WAVE_TILES)
            raise PerfConfigError(
                f"XdlopsTuning m_per_wave x n_per_wave: {wave[0]}x{wave[1]} has no f16 mfma "
                f"instruction; allowed: {allowed} ({XCS})"
            )
        if self.kpack not in _KPACKS:
            raise PerfConfigError(f"XdlopsTuning.kpack: {self.kpack} is not allowed for f16; allowed: 1, 4, 5, 6, 7, 8")

    @property
    def block_size(self) -> int:
        """64 · MPerBlock · NPerBlock / (MPerWave · NPerWave) (obtainBlockSize)."""
        return WAVE_SIZE * self.m_per_block * self.n_per_block // (self.m_per_wave * self.n_per_wave)

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
