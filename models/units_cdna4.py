"""AMD CDNA4 (MI350, MI355) block-scaled MFMA, ``v_mfma_scale_f32_{16x16x128,32x32x64}_f8f6f4``,
as parameters with their sources: from documentation, not checked on silicon.

What the public documentation fixes (cited per field): the operand formats, chosen for A and B
apart (the ``cbsz`` / ``blgp`` codes 0 fp8 e4m3, 1 bf8 e5m2, 2 fp6 e2m3, 3 bf6 e3m2, 4 fp4
e2m1; the OCP formats, not MI300's fnuz ones), one E8M0 scale byte per lane and operand for the
32 consecutive K values that lane holds (a block of 32), the fp32 accumulator and output. What
it does not fix (the alignment width, how terms are cut, the rounding of the accumulation, the
terms fused per step): taken from the CDNA3 MI300 unit (``models.unit("mi300", input="e4m3fnuz")``,
MMA-Sim 2.1.1 ``MMA_GTR_FDPA(F=24, F2=31, rho='RNE-FP32', L_max=16)``) as far as fp16emu's
block-scaled kernel (``emu.kernels.scaled``, one stage per group) can express it: 16 products
and c per step, every term cut toward zero 24 fraction bits below the largest, one
round-to-nearest-even to fp32, zero products never aligning the others. MI300's second stage
(the product sum floored at 31 bits and c floored at 24, the even and odd products summed
apart) has no block-scaled counterpart in ``emu`` and is not modelled.

The module holds data only: ``models.units`` builds the :class:`models.Unit` from
:func:`cdna4_fields`.
"""

from __future__ import annotations

from types import MappingProxyType

from emu.operands import input_name
from emu.units import Family, Format, InputFormat, Rounding, ScaleFormat

__all__ = ["CDNA4_NAMES", "CDNA4_ALIASES", "CDNA4_INPUT_NAMES", "CDNA4_SCALES", "NOT_ON_SILICON", "cdna4_fields"]

#: the unit's name, and the names it answers to
CDNA4_NAMES = ("mi355",)
CDNA4_ALIASES = MappingProxyType(
    {"mi350": "mi355", "mi350x": "mi355", "mi355x": "mi355", "cdna4": "mi355", "gfx950": "mi355"}
)
#: A's and B's formats (any pair), in the order of their cbsz / blgp codes 0 … 4
CDNA4_INPUT_NAMES = ("e4m3", "e5m2", "e2m3", "e3m2", "e2m1")
#: the (scale format, block) pairs the instructions have: one E8M0 byte per 32 values
CDNA4_SCALES = (("ue8m0", 32),)
#: the mark every CDNA4 unit carries in its description and sources
NOT_ON_SILICON = "from documentation, not checked on silicon"

ISA = "AMD Instinct CDNA4 ISA Reference Guide (2025): the instructions V_MFMA_SCALE_F32_16X16X128_F8F6F4, _32X32X64_"
TRITON = (
    "triton-lang/triton gluon amd.cdna4.mfma_scaled docs: 'c = a * a_scale @ b * b_scale + acc', OCP MX operands "
    "and scales, CDNA4 only"
)
CK = (
    "ROCm/composable_kernel include/ck/utility/amd_xdlops.hpp intrin_mfma_scale_f32_16x16x128f8f6f4 / "
    "intrin_mfma_scale_f32_32x32x64f8f6f4 ('cbsz {0 FP8 E4M3; 1 FP8 E5M2; 2 FP6 E2M3; 3 FP6 E3M2; 4 FP4 E2M1}', "
    "one int32 scale per lane, byte 0 read; f8x32 / f6x32 / f4x32 operands: 32 K values per lane)"
)
LLVM = (
    "llvm/llvm-project llvm/lib/IR/Verifier.cpp (amdgcn_mfma_scale_f32_16x16x128_f8f6f4 / 32x32x64: cbsz, blgp ≤ 4, "
    "the format codes); llvm/test/CodeGen/AMDGPU/llvm.amdgcn.mfma.scale.f32.16x16x128.f8f6f4.ll"
)
BLOG = (
    "ROCm blogs, 'Matrix Core Programming on AMD CDNA3 and CDNA4 architecture' "
    "(rocm.blogs.amd.com/software-tools-optimization/matrix-cores-cdna): OCP fp8 / fp6 / fp4 operands, "
    "independent A and B types, E8M0 block exponents"
)
OCP_MX = "OCP Microscaling Formats (MX) Specification v1.0 (2023): E8M0 scale per 32 values, 0xFF NaN"
MI300 = (
    "not fixed by the documentation: the CDNA3 MI300 unit's (models.unit('mi300', input='e4m3fnuz'); MMA-Sim 2.1.1 "
    "mmasim/amd/sim.py CDNA3 fp8: MMA_GTR_FDPA(F=24, F2=31, rho='RNE-FP32', L_max=16))"
)


def cdna4_fields(fa: InputFormat, fb: InputFormat, scale: str, block: int) -> tuple[str, dict]:
    """(description, {field: (value, source)}) of the CDNA4 unit for A in ``fa``, B in ``fb``,
    ``scale`` per ``block`` values: every field of ``models.Unit`` but ``name`` and ``sources``
    that differs from its default or that the family reads. ValueError naming the accepted
    values for a format, scale or block the instructions lack."""
    names = (input_name(fa), input_name(fb))
    for n in names:
        if n not in CDNA4_INPUT_NAMES:
            raise ValueError(f"input: mi355 (CDNA4 f8f6f4) multiplies {', '.join(CDNA4_INPUT_NAMES)}, not {n}")
    if (scale, block) not in CDNA4_SCALES:
        raise ValueError(
            f"scale, block: mi355 (CDNA4 v_mfma_scale_*_f8f6f4) has ue8m0 scales per 32 values only, got {scale} per {block}"
        )
    pair = names[0] if names[0] == names[1] else f"{names[0]} × {names[1]}"
    description = (
        f"AMD MI355 (CDNA4) v_mfma_scale_f32_*_f8f6f4, {pair} inputs, ue8m0 scale per 32, fp32 output: "
        f"scaled truncated fused dot-add, arithmetic taken from MI300 ({NOT_ON_SILICON})"
    )
    fmt = f"{ISA} (cbsz / blgp operand types); {CK}; {LLVM}; {BLOG} [{NOT_ON_SILICON}]"
    fields = {
        "description": (description, f"{ISA}; {MI300} [{NOT_ON_SILICON}]"),
        "family": (
            Family.SCALED_FUSED,
            f"{ISA}; {TRITON}; the fused dot-add shape {MI300}, one stage: emu's "
            f"block-scaled kernel has no two-stage form [{NOT_ON_SILICON}]",
        ),
        "group_size": (16, f"{MI300}: L_max = 16 for fp8 [{NOT_ON_SILICON}]"),
        "fraction_bits": (24, f"{MI300}: F = 24 [{NOT_ON_SILICON}]"),
        "alignment_rounding": (
            Rounding.RZ,
            f"{MI300}: products truncated (torch.trunc); c cut RZ too (MI300 floors c: one mode per unit in "
            f"emu's block-scaled kernel) [{NOT_ON_SILICON}]",
        ),
        "output_rounding": (Rounding.RNE, f"{MI300}: rho RNE-FP32 [{NOT_ON_SILICON}]"),
        "zero_exponent": (
            -400,
            f"{MI300}: a zero product takes exponent -999, aligning nothing; -400 is emu's lowest for block-scaled "
            f"units, below every term [{NOT_ON_SILICON}]",
        ),
        "output_format": (Format.FP32, f"{ISA} (F32: fp32 D); {CK} (float4_t / float16_t C)"),
        "input_format": (fa, f"{fmt} (A's, cbsz)"),
        "b_input_format": (fb if fb != fa else -1, f"{fmt} (B's, blgp)" if fb != fa else "-1: B is in A's format"),
        "scale_format": (ScaleFormat.UE8M0, f"{CK}; {LLVM} (scale_src0 / scale_src1); {TRITON}; {OCP_MX}"),
        "block_size": (block, f"{CK}: one scale per lane for its 32 K values; {OCP_MX}"),
        "flush_inputs": (
            False,
            f"{BLOG} (OCP formats, subnormals defined); {MI300}: subnormals kept [{NOT_ON_SILICON}]",
        ),
    }
    return description, fields
