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

from .rules import GemmPlan, accumulation_order, check_tuning, default_tuning, kblocks, needs_padding, plan
from .tables import (
    DEFAULT_RULES,
    NONXDLOPS_TUNINGS_2022,
    NONXDLOPS_UNIVERSAL_2022,
    NUM_CU_X2,
    RULES,
    SOURCES,
    XDLOPS_TUNINGS_2022,
    XDLOPS_UNIVERSAL_2022,
    Instruction,
    InvalidTuning,
    NonXdlopsTuning,
    PerfConfigError,
    Tuning,
    TuningError,
    UnsupportedTuning,
    XdlopsTuning,
    as_tuning,
    mfma_k_order,
    parse_perf_config,
    select_instruction,
)

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
