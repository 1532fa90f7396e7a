"""Named matrix units and FMA paths as parameter sets, every parameter with its source.

``unit(name, input=FORMAT, output=…)`` returns a frozen :class:`Unit` for one operand format
(fp16, bf16, tf32, e4m3, e5m2, e4m3fnuz, e5m2fnuz: :data:`UNIT_INPUTS` says which units have
which), or for a pair of fp8 formats, A's and B's (``input=("e4m3", "e5m2")``, also written
``"e4m3xe5m2"``: :data:`UNIT_MIXED_INPUTS`), and for one instruction of the GPU's
(``instruction="mma"``, ``"wgmma"``, ``"tcgen05"``; AMD ``"mfma"``: :data:`UNIT_INSTRUCTIONS`,
the first the default); ``dataclasses.replace(unit, group_size=8)`` gives a variant to explore.
``Unit.params`` is the plain record the ``emu`` kernels take.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

from emu.operands import input_name, input_pair, pair_name
from emu.units import (
    MAX_GROUP_SIZE,
    Family,
    Format,
    InputFormat,
    Rounding,
    ScaleFormat,
)

from .unit_record import Unit, cite
from .units_cdna4 import CDNA4_ALIASES, CDNA4_NAMES, NOT_ON_SILICON, cdna4_fields

__all__ = [
    "Unit",
    "unit",
    "UNIT_NAMES",
    "UNIT_INPUTS",
    "UNIT_MIXED_INPUTS",
    "UNIT_INSTRUCTIONS",
    "ALIASES",
    "MAX_GROUP_SIZE",
    "SCALED_UNIT_NAMES",
    "SCALED_KINDS",
    "SCALED_INPUT_NAMES",
    "SCALED_RECIPES",
    "scaled_input",
]

# Short citations of the published unit models and hardware measurements.
MMASIM = "MMA-Sim (Xie et al., arXiv 2511.10909; PyPI mmasim 2.1.1)"
MMASIM_AMD = MMASIM + " mmasim/amd/sim.py"
MMASIM_NV = MMASIM + " mmasim/nv_ptx/sim.py"
KHATTAK = "Khattak & Mikaitis, arXiv 2512.07004; north-numerical-computing/MATLAB-tensor-core @b12b5a7"
FASI = "Fasi, Higham, Mikaitis, Pranesh, PeerJ CS 7:e330 (2021), test suite @9dae3fc"
PYTORCH_MI200 = "PyTorch docs, numerical_accuracy.rst, 'Reduced Precision FP16 and BF16 GEMMs … MI200'"
IEEE = "IEEE 754-2019 fusedMultiplyAdd; fp16·fp16 is exact in fp32 (22-bit significand)"
PTX = "NVIDIA PTX ISA 8.x, mma / wgmma / tcgen05.mma type tables"
CDNA3_ISA = "AMD CDNA3 ISA reference, V_MFMA_*_F8/BF8/XF32 (2024)"
PTX_MIXED_FP8 = (
    "NVIDIA PTX ISA 8.x: mma.sync m16n8k32 (sm_89) '.f8type = {.e4m3, .e5m2}' for A and B apart, "
    "wgmma.mma_async '.atype = {.e4m3, .e5m2}', '.btype = {.e4m3, .e5m2}', tcgen05.mma kind::f8f6f4 "
    "any A and B type; MMA-Sim 2.1.1 isa_mma.py / isa_wgmma.py / isa_tcgen05mma.py list every "
    "(a_type, b_type) pair"
)
#: the arithmetic of fp8 mma.sync on Hopper and Blackwell, found here from the measured rows
KM_FP8_ROWS = (
    f"{KHATTAK} model_validation/{{H100,H200,B200}}/{{E4M3,E5M2}}/d_*_fp16.txt (mma.sync m16n8k32, CUDA/"
    "mma_fp8_output_fp16.cu; 30,000 rows) and B200/{E4M3,E5M2}/d_B200_fp32.txt (mma_fp8_output_fp32.cu; "
    "10,000 rows): every row equal (fp16emu's fit; tests/models/test_instructions.py)"
)
CDNA3_MIXED_FP8 = (
    "AMD CDNA3 ISA reference: V_MFMA_F32_16X16X32_FP8_BF8 / _BF8_FP8 and 32X32X16 (A fp8 = e4m3fnuz, "
    "B bf8 = e5m2fnuz, or the reverse); MMA-Sim 2.1.1 amd/isa_mfma.py cdna3_mfma_suffix"
)


def _with_input(u: Unit, fmt: InputFormat, instruction: str, **changes) -> Unit:
    """``u`` for operands of ``fmt``: the fields in ``changes`` and ``input_format``, each cited
    (``changes`` maps a field to (value, source))."""
    values = {k: v for k, (v, _) in changes.items()}
    sources = dict(u.sources) | {k: src for k, (_, src) in changes.items()}
    sources["input_format"] = f"{instruction} operand type"
    name = input_name(fmt)
    if "description" not in values:
        values["description"] = (
            u.description.replace("fp16 inputs", f"{name} inputs")
            if "fp16 inputs" in u.description
            else f"{u.description}; {name} operands"
        )
    return dataclasses.replace(u, input_format=fmt, sources=MappingProxyType(sources), **values)


def _nvidia_input(u: Unit, arch: str, bytes_per_step: int, fmt: InputFormat) -> Unit:
    """An NVIDIA unit for operands of ``fmt`` (MMA-Sim nv_ptx/sim.py: L_max = the bytes one step
    fuses / the operand size; fp8 through Ada's mma and Hopper's wgmma keeps 13 fraction bits,
    F = 13, and its fp32 accumulator is cut to E8M13; Blackwell's tcgen05.mma keeps F = 25)."""
    if fmt == InputFormat.FP16:
        return u
    size = {InputFormat.BF16: 2, InputFormat.TF32: 4}.get(fmt, 1)
    changes = {
        "group_size": (
            bytes_per_step // size,
            f"{MMASIM_NV} _mma_L_max_bytes['{arch}'] // itemsize ({bytes_per_step} // {size})",
        )
    }
    instruction = {"Ada Lovelace": "mma.sync", "Hopper": "mma.sync / wgmma", "Blackwell": "tcgen05.mma"}.get(
        arch, "mma.sync"
    )
    if size == 1 and arch in ("Ada Lovelace", "Hopper"):
        src = f"{MMASIM_NV} MMA (Ada, e4m3/e5m2) and WGMMA (fp8): 'truncated to F=13', rho RZ-E8M13"
        instruction = "mma.sync (Ada) / wgmma (Hopper; Hopper's fp8 mma.sync: instruction='mma')"
        changes["fraction_bits"] = (13, src)
        if u.output_format == Format.FP32:
            changes["output_fraction_bits"] = (13, src)
    return _with_input(u, fmt, f"{PTX}: {instruction}", **changes)


def _nvidia(name, arch, group_size, fraction_bits, zero_exponent_fp32, zero_exponent_fp16, output):
    fp16_out = output == "fp16"
    return Unit(
        name=name,
        description=f"NVIDIA {arch} tensor core, fp16 inputs, {output} output: truncated fused dot-add (T-FDPA)",
        family=Family.TRUNCATED_FUSED,
        group_size=group_size,
        fraction_bits=fraction_bits,
        alignment_rounding=Rounding.RZ,
        output_rounding=Rounding.RNE if fp16_out else Rounding.RZ,
        zero_exponent=zero_exponent_fp16 if fp16_out else zero_exponent_fp32,
        output_format=Format.FP16 if fp16_out else Format.FP32,
        sources=cite(
            Family.TRUNCATED_FUSED,
            f"{MMASIM_NV} ({arch}); {KHATTAK} {arch}TC.m",
            description=f"{MMASIM_NV}: MMA_T_FDPA for {arch}",
            group_size=f"{MMASIM_NV} _mma_L_max_bytes['{arch}'] / 2; {KHATTAK} fma={group_size}",
            fraction_bits=f"{MMASIM_NV} _mma_F_bits['{arch}']; {KHATTAK} neab={fraction_bits - 23}; {FASI} (V100/A100 guard bits)",
            alignment_rounding=f"{FASI} (truncation in alignment); {MMASIM} fdpa.truncated_fused_sum (torch.trunc)",
            output_rounding=f"{FASI} (RZ for fp32 out, RNE for fp16 out); {MMASIM_NV} rho",
            zero_exponent=f"{MMASIM_NV} _mma_e_zero_for_{'fp16' if fp16_out else 'fp32'}['{arch}']",
            output_format="the instruction's D type (mma .f32 / .f16)",
            flush_inputs=f"{FASI}: subnormal inputs, c and outputs are kept",
        ),
    )


def _nvidia_fp8_mma(key: str, arch: str, output: str, fmt: InputFormat) -> Unit:
    """fp8 ``mma.sync`` (m16n8k32) on Hopper or Blackwell: the fp8 values widened to fp16, each
    instruction's 32 products summed by two fp16 mma steps of 16 from a zero accumulator (the
    pairs of products alternating between them, as the fp8 registers unpack into fp16 ones),
    the result added to c with one IEEE addition (RNE) in the output format (emu.steps)."""
    u = _nvidia(key, *_NV[key], output=output)  # the fp16 instruction each step runs
    step = f"{PTX}: mma.sync.aligned.m16n8k32 .e4m3/.e5m2 (sm_89+), k = 32 per instruction; {KM_FP8_ROWS}"
    return _with_input(
        u,
        fmt,
        f"{PTX}: mma.sync m16n8k32 .e4m3 / .e5m2",
        step_size=(
            32,
            step
            + "; c is added after the two fp16 steps, one IEEE RNE addition"
            + (
                "; Hopper with fp32 output: no measured mma.sync rows (the H100/H200 fp32 rows are wgmma's), "
                "the steps inferred from Hopper's fp16-output and Blackwell's fp32-output rows"
                if (key, output) == ("h100", "fp32")
                else ""
            ),
        ),
        group_size=(16, f"the fp16 mma.sync step ({MMASIM_NV} _mma_L_max_bytes['{arch}'] // 2); {KM_FP8_ROWS}"),
        description=(
            f"NVIDIA {arch} mma.sync, {input_name(fmt)} inputs, {output} output: fp8 widened to fp16, two fp16 "
            f"T-FDPA steps of 16 per k32 from zero, then c + their result (one RNE addition)",
            KM_FP8_ROWS,
        ),
    )


def _amd_mi100(fmt: InputFormat = InputFormat.FP16) -> Unit:
    u = Unit(
        name="mi100",
        description="AMD MI100 (CDNA1) v_mfma_f32_*f16: exact fused dot-add of 4 products and c, one RNE (E-FDPA)",
        family=Family.FUSED_EXACT,
        group_size=4,
        output_rounding=Rounding.RNE,
        sources=cite(
            Family.FUSED_EXACT,
            f"{MMASIM_AMD} (CDNA1: MMA_E_FDPA, L_max=4 for f16); {KHATTAK} MI100MC.m (fma=4, correct_rounding=1, rne, subnormals kept)",
        ),
    )
    if fmt == InputFormat.BF16:
        return _with_input(
            u,
            fmt,
            "CDNA1 v_mfma_f32_*bf16",
            group_size=(2, f"{MMASIM_AMD} (CDNA1: L_max = 4 if f16 else 2)"),
            description=(
                "AMD MI100 (CDNA1) v_mfma_f32_*bf16: exact fused dot-add of 2 products and c, one RNE (E-FDPA)",
                f"{MMASIM_AMD} (CDNA1)",
            ),
        )
    return u


def _amd_mi200(fmt: InputFormat = InputFormat.FP16) -> Unit:
    flush = f"{MMASIM} arithmetic/ftz_mul_add.py; {KHATTAK} MI210MC.m (in/out_subnormals=0); {PYTORCH_MI200}"
    u = Unit(
        name="mi200",
        description="AMD MI200 (CDNA2) v_mfma_f32_*f16: FTZ pairwise fp32 adder tree, then c + tree (FTZ-AddMul)",
        family=Family.PAIRWISE,
        group_size=4,
        output_rounding=Rounding.RNE,
        flush_inputs=True,
        flush_c=True,
        flush_products=True,
        flush_partials=True,
        flush_output=True,
        sources=cite(
            Family.PAIRWISE,
            f"{MMASIM_AMD} (CDNA2: MMA_FTZ_MUL_ADD(P=4)); {KHATTAK} MI210MC.m / MI250MC.m (pair_wise_sum=1)",
            flush_inputs=flush + " (ftz_mul: inputs → +0)",
            flush_c=flush + " (c → +0, keep_sign=False)",
            flush_products=flush + " (ftz_mul: product flushed, sign kept)",
            flush_partials=flush + " (ftz_add, sign kept)",
            flush_output=flush + " (ftz_add into c, sign kept)",
        ),
    )
    if fmt == InputFormat.BF16:
        return _with_input(
            u,
            fmt,
            "CDNA2 v_mfma_f32_*bf16_1k",
            group_size=(
                4,
                f"{MMASIM_AMD} (CDNA2: P = 4 for the _1k bf16 instructions the libraries use; 2 for the CDNA1 ones)",
            ),
            description=(
                "AMD MI200 (CDNA2) v_mfma_f32_*bf16_1k: FTZ pairwise fp32 adder tree of 4 bf16 products, then c + tree",
                f"{MMASIM_AMD} (CDNA2: MMA_FTZ_MUL_ADD)",
            ),
        )
    return u


def _amd_mi300(fmt: InputFormat = InputFormat.FP16) -> Unit:
    u = Unit(
        name="mi300",
        description="AMD MI300 (CDNA3) v_mfma_f32_*_f16: two-stage truncated fused dot-add (TR-FDPA)",
        family=Family.TWO_STAGE,
        group_size=8,
        fraction_bits=24,
        sum_fraction_bits=31,
        alignment_rounding=Rounding.RZ,
        c_alignment_rounding=Rounding.RD,
        output_rounding=Rounding.RNE,
        sources=cite(
            Family.TWO_STAGE,
            f"{MMASIM_AMD} (CDNA3: MMA_TR_FDPA(F=24, F2=31, rho='RNE-FP32', L_max=8)); {KHATTAK} MI300MC.m @d12a5b3^",
            alignment_rounding=f"{MMASIM} fdpa.truncated_fused_sum (torch.trunc); {KHATTAK} MI300MC.m",
            c_alignment_rounding=f"{MMASIM} fdpa.tr_fdpa (torch.floor); {KHATTAK} MI300MC.m armode='rd'",
        ),
    )
    if fmt == InputFormat.BF16:
        return _with_input(
            u,
            fmt,
            "CDNA3 v_mfma_f32_*_bf16",
            group_size=(8, f"{MMASIM_AMD} (CDNA3: L_max = 8)"),
            description=(
                "AMD MI300 (CDNA3) v_mfma_f32_*_bf16: two-stage truncated fused dot-add (TR-FDPA)",
                f"{MMASIM_AMD} (CDNA3: MMA_TR_FDPA)",
            ),
        )
    if fmt == InputFormat.TF32:
        return _with_input(
            u,
            fmt,
            f"{CDNA3_ISA} v_mfma_f32_*_xf32",
            group_size=(4, f"{MMASIM_AMD} (CDNA3: L_max = 4 for xf32)"),
            description=(
                "AMD MI300 (CDNA3) v_mfma_f32_*_xf32: fp32 operands cut to tf32 (RZ), two-stage truncated fused dot-add",
                f"{MMASIM} fdpa.MMA_TR_FDPA (truncate_fp32_to_tf32)",
            ),
        )
    if fmt in (InputFormat.E4M3FNUZ, InputFormat.E5M2FNUZ):
        gtr = f"{MMASIM_AMD} (CDNA3 fp8/bf8: MMA_GTR_FDPA(F=24, F2=31, rho='RNE-FP32', L_max=16))"
        return _with_input(
            u,
            fmt,
            f"{CDNA3_ISA} v_mfma_f32_*_fp8_fp8 / *_bf8_bf8",
            group_size=(16, gtr),
            interleaved_sums=(2, gtr + ": even and odd products summed apart, floored together; far c dropped"),
            description=(
                "AMD MI300 (CDNA3) v_mfma_f32_*_fp8/bf8: grouped two-stage truncated fused dot-add (GTR-FDPA)",
                gtr,
            ),
        )
    return u


def _fma32(fmt: InputFormat = InputFormat.FP16) -> Unit:
    u = Unit(
        name="fma32",
        description="sequential fp32 FMA in k order (VALU v_fma_f32; non-xdlops kernels)",
        family=Family.FMA,
        group_size=1,
        output_rounding=Rounding.RNE,
        sources=cite(
            Family.FMA,
            f"{IEEE}; {MMASIM} arithmetic/fma.py (MMA_FMA)",
        ),
    )
    return u if fmt == InputFormat.FP16 else _with_input(u, fmt, "any (the product is exact in fp64)")


def _fp64(fmt: InputFormat = InputFormat.FP16) -> Unit:
    u = Unit(
        name="fp64",
        description="fp64 accumulator over all of K, rounded to fp32 (RNE) once at the end (CPU validation, xdlops runs)",
        family=Family.FP64,
        group_size=1,
        output_rounding=Rounding.RNE,
        round_each_group=False,
        sources=cite(
            Family.FP64,
            "rocMLIR @3df931f1 (github.com/ROCm/rocMLIR) mcpuConv2dFloat: the CPU validation's double accumulator, result cast to float",
        ),
    )
    return u if fmt == InputFormat.FP16 else _with_input(u, fmt, "any (the product is exact in fp64)")


def _mixed(u: Unit, b_fmt: InputFormat) -> Unit:
    """``u`` (built for A's fp8 format) with B in ``b_fmt``: the same arithmetic (MMA-Sim chooses
    the parameters by the one-byte operand size and gives each factor its own dtype's subnormal
    exponent, mmasim/arithmetic/fdpa.py t_fdpa / gtr_fdpa), cited to the instruction tables."""
    a_name, b_name = input_name(u.input_format), input_name(b_fmt)
    cite = CDNA3_MIXED_FP8 if b_fmt in (InputFormat.E4M3FNUZ, InputFormat.E5M2FNUZ) else PTX_MIXED_FP8
    if u.family in (Family.FMA, Family.FP64):
        cite = "any (the product is exact in fp64)"
    sources = dict(u.sources) | {"b_input_format": cite, "input_format": f"{cite} (A's type)"}
    description = u.description.replace(f"{a_name} inputs", f"{a_name} × {b_name} inputs").replace(
        f"; {a_name} operands", f"; {a_name} × {b_name} operands (A × B)"
    )
    if description == u.description:
        description += f"; A {a_name} × B {b_name}"
    return dataclasses.replace(u, b_input_format=b_fmt, description=description, sources=MappingProxyType(sources))


# name → (builder, output) ; NVIDIA parameters per architecture from MMA-Sim nv_ptx/sim.py
_NV = {
    # name: (arch, L, F, e_zero fp32 out, e_zero fp16 out)
    "v100": ("Volta", 4, 23, -131, -19),
    "t4": ("Turing", 8, 24, -132, -20),
    "a100": ("Ampere", 8, 24, -132, -20),
    "ada": ("Ada Lovelace", 8, 24, -132, -20),
    "h100": ("Hopper", 16, 25, -133, -21),
    "b200": ("Blackwell", 16, 25, -133, -21),
}
_ALL = ("fp16", "bf16", "tf32", "e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz")
#: The operand formats each unit has an instruction for (PTX ISA and MMA-Sim's instruction
#: tables: Volta and Turing multiply fp16 only; fp8 from Ada on; MI100/MI200 fp16 and bf16; MI300
#: adds xf32 (tf32) and the fnuz fp8 formats; the FMA and fp64 paths take any format).
UNIT_INPUTS = MappingProxyType(
    {
        "v100": ("fp16",),
        "t4": ("fp16",),
        "a100": ("fp16", "bf16", "tf32"),
        "ada": ("fp16", "bf16", "tf32", "e4m3", "e5m2"),
        "h100": ("fp16", "bf16", "tf32", "e4m3", "e5m2"),
        "b200": ("fp16", "bf16", "tf32", "e4m3", "e5m2"),
        "mi100": ("fp16", "bf16"),
        "mi200": ("fp16", "bf16"),
        "mi300": ("fp16", "bf16", "tf32", "e4m3fnuz", "e5m2fnuz"),
        "fma32": _ALL,
        "fp64": _ALL,
    }
)
_OCP_MIXED = (("e4m3", "e5m2"), ("e5m2", "e4m3"))
_FNUZ_MIXED = (("e4m3fnuz", "e5m2fnuz"), ("e5m2fnuz", "e4m3fnuz"))
#: The mixed fp8 operand pairs (A's format, B's format) each unit has an instruction for: NVIDIA's
#: fp8 mma / wgmma / tcgen05.mma take e4m3 and e5m2 for A and B independently (PTX ISA), MI300
#: has fp8 × bf8 and bf8 × fp8 (CDNA3 ISA); the FMA and fp64 paths take either. The unit's
#: arithmetic is its fp8 one (MMA-Sim picks the parameters by the operand size, one byte for
#: both; each operand keeps its own format's subnormal exponent).
UNIT_MIXED_INPUTS = MappingProxyType(
    {
        "ada": _OCP_MIXED,
        "h100": _OCP_MIXED,
        "b200": _OCP_MIXED,
        "mi300": _FNUZ_MIXED,
        "fma32": _OCP_MIXED + _FNUZ_MIXED,
        "fp64": _OCP_MIXED + _FNUZ_MIXED,
    }
)
#: The instructions each matrix unit models, the default first (the arithmetic ``unit`` gave before
#: it took ``instruction``): PTX mma.sync ("mma"), wgmma.mma_async ("wgmma", Hopper),
#: tcgen05.mma ("tcgen05", Blackwell), AMD v_mfma ("mfma"). On one GPU they are not one unit:
#: fp8 mma.sync on Hopper and Blackwell runs as fp16 steps (:func:`unit`); their fp16, bf16 and
#: tf32 arithmetic is one (MMA-Sim 2.1.1 nv_ptx/sim.py MMA, WGMMA, TCGen05MMA: F = 25, the same
#: L_max per operand size).
UNIT_INSTRUCTIONS = MappingProxyType(
    {
        "v100": ("mma",),
        "t4": ("mma",),
        "a100": ("mma",),
        "ada": ("mma",),
        "h100": ("wgmma", "mma"),
        "b200": ("tcgen05", "mma"),
        "mi100": ("mfma",),
        "mi200": ("mfma",),
        "mi300": ("mfma",),
    }
)
_INSTRUCTION_ALIASES = {
    "mma.sync": "mma",
    "wgmma.mma_async": "wgmma",
    "tcgen05.mma": "tcgen05",
    "v_mfma": "mfma",
    "mfma": "mfma",
}
ALIASES = MappingProxyType(
    {
        "a2": "a100",
        "a30": "a100",
        "l40s": "ada",
        "rtx4090": "ada",
        "h200": "h100",
        "cdna1": "mi100",
        "cdna2": "mi200",
        "cdna3": "mi300",
        "mi210": "mi200",
        "mi250": "mi200",
        "mi250x": "mi200",
        "mi300x": "mi300",
        "fma": "fma32",
    }
)
UNIT_NAMES = ("mi100", "mi200", "mi300", "v100", "t4", "a100", "ada", "h100", "b200", "fma32", "fp64")


#: The block-scaled units: Blackwell (B200, tcgen05.mma … .block_scale) and RTX Blackwell
#: (sm_120, mma.sync … .block_scale); MMA-Sim 2.1.1 gives both the same arithmetic per kind. And
#: AMD CDNA4 (MI355, v_mfma_scale_f32_*_f8f6f4), from documentation (models.units_cdna4).
SCALED_UNIT_NAMES = ("b200", "rtx-blackwell", *CDNA4_NAMES)
_SCALED_ARCH = {"b200": ("Blackwell", "tcgen05.mma"), "rtx-blackwell": ("RTX Blackwell", "mma.sync")}
_SCALED_ALIASES = {"rtx5090": "rtx-blackwell", "rtx-pro-6000": "rtx-blackwell", "sm_120": "rtx-blackwell"} | dict(
    CDNA4_ALIASES
)
#: The operand formats of the block-scaled instructions (PTX ISA: kind::mxf8f6f4 takes any of
#: them for A and for B apart; kind::mxf4 and kind::mxf4nvf4 take e2m1)
SCALED_INPUT_NAMES = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")
#: kind → the (scale format, block size) pairs it has (MMA-Sim 2.1.1 isa_tcgen05mma.py
#: blackwell_tcgen05mma_block_scale_shape_and_type, isa_mma.py mma_block_scale_shape_and_type_from_sm_120)
SCALED_KINDS = MappingProxyType(
    {
        "mxf8f6f4": (("ue8m0", 32),),
        "mxf4": (("ue8m0", 32),),
        "mxf4nvf4": (("ue8m0", 32), ("ue8m0", 16), ("ue4m3", 16)),
    }
)
PTX_SCALED = "NVIDIA PTX ISA 8.7, tcgen05.mma / mma.sync with .block_scale (kind::mxf8f6f4, kind::mxf4, kind::mxf4nvf4)"
OCP_MX = "OCP Microscaling Formats (MX) Specification v1.0 (2023): E8M0 scale per 32 values; fp8, fp6, fp4 elements"


#: Names of block-scaled operand recipes (``fp16emu units --input NAME``): name → (A's format,
#: B's format, scale, block, kind). "mx" before a format or a pair (``mxe4m3``, ``mxe5m2xe2m1``)
#: names kind::mxf8f6f4 with UE8M0 per 32 (:func:`scaled_input`).
SCALED_RECIPES = MappingProxyType(
    {
        "mxf4": ("e2m1", "e2m1", "ue8m0", 32, "mxf4"),
        "mxfp4": ("e2m1", "e2m1", "ue8m0", 32, "mxf4"),
        "nvf4": ("e2m1", "e2m1", "ue4m3", 16, "mxf4nvf4"),
        "nvfp4": ("e2m1", "e2m1", "ue4m3", 16, "mxf4nvf4"),
        "mxf4nvf4": ("e2m1", "e2m1", "ue8m0", 16, "mxf4nvf4"),
    }
)


def scaled_input(name: str) -> tuple[str, str, str, int, str] | None:
    """(A's format, B's format, scale, block, kind) of a block-scaled recipe name
    (:data:`SCALED_RECIPES`, or ``"mx"`` + a format or pair of :data:`SCALED_INPUT_NAMES`:
    ``"mxe4m3"``, ``"mxe5m2xe2m1"``), None for a name that is neither."""
    key = str(name).strip().lower()
    if key in SCALED_RECIPES:
        return SCALED_RECIPES[key]
    if key.startswith("mx"):
        try:
            fa, fb = input_pair(key[2:])
        except ValueError:
            return None
        if input_name(fa) in SCALED_INPUT_NAMES and input_name(fb) in SCALED_INPUT_NAMES:
            return input_name(fa), input_name(fb), "ue8m0", 32, "mxf8f6f4"
    return None


def _scaled_unit(key: str, fa: InputFormat, fb: InputFormat, scale: str, block: int, kind: str | None) -> Unit:
    """The block-scaled unit ``key`` for A in ``fa``, B in ``fb``, scales ``scale`` per ``block``."""
    names = (input_name(fa), input_name(fb))
    for n in names:
        if n not in SCALED_INPUT_NAMES:
            raise ValueError(f"input: block-scaled units multiply {', '.join(SCALED_INPUT_NAMES)}, not {n}")
    if scale not in ("ue8m0", "ue4m3"):
        raise ValueError(f"scale: {scale!r} is not one of 'ue8m0', 'ue4m3'")
    if block not in (16, 32):
        raise ValueError(f"block: {block!r} is not one of 32, 16 (values along K per scale)")
    fp4 = names == ("e2m1", "e2m1")
    if kind is None:
        kind = ("mxf4" if (scale, block) == ("ue8m0", 32) else "mxf4nvf4") if fp4 else "mxf8f6f4"
    if kind not in SCALED_KINDS:
        raise ValueError(f"kind: {kind!r} is not one of {', '.join(SCALED_KINDS)}")
    if kind != "mxf8f6f4" and not fp4:
        raise ValueError(f"kind: kind::{kind} multiplies e2m1 × e2m1, not {pair_name(fa, fb)}; use kind 'mxf8f6f4'")
    if (scale, block) not in SCALED_KINDS[kind]:
        have = ", ".join(f"{s} per {b}" for s, b in SCALED_KINDS[kind])
        raise ValueError(f"scale, block: kind::{kind} has no {scale} scale per {block} values; it has {have}")
    arch, instruction = _SCALED_ARCH[key]
    sim = "TCGen05MMABlockScale" if key == "b200" else "MMABlockScale"
    where = f"{MMASIM_NV} {sim}('{arch}', '…kind::{kind}.block{block}…')"
    grouped = kind != "mxf8f6f4"
    family = Family.GROUPED_SCALED if grouped else Family.SCALED_FUSED
    if grouped:
        model = f"{where}: MMA_GST_FDPA(G=16, F=35, rho='RZ-FP32', L_max=64, e_zero=-139) (k = 64)"
        fields = dict(group_size=64, fraction_bits=35, zero_exponent=-139, subgroup_size=16)
        what = "grouped scaled truncated fused dot-add (GST-FDPA)"
    else:
        model = f"{where}: MMA_ST_FDPA(F=25, rho='RZ-FP32', L_max=32, e_zero=-133) (k = 32)"
        fields = dict(group_size=32, fraction_bits=25, zero_exponent=-133, subgroup_size=0)
        what = "scaled truncated fused dot-add (ST-FDPA)"
    pair = f"{names[0]} × {names[1]}" if names[0] != names[1] else names[0]
    fmt_src = f"{PTX_SCALED}: {instruction} kind::{kind} operand types"
    return Unit(
        name=key,
        description=(
            f"NVIDIA {arch} {instruction} kind::{kind}, {pair} inputs, {scale} scale per {block}, fp32 output: {what}"
        ),
        family=family,
        alignment_rounding=Rounding.RZ,
        output_rounding=Rounding.RZ,
        output_format=Format.FP32,
        input_format=fa,
        b_input_format=fb if fb != fa else -1,
        scale_format=ScaleFormat.UE8M0 if scale == "ue8m0" else ScaleFormat.UE4M3,
        block_size=block,
        **fields,
        sources=cite(
            family,
            model,
            description=model,
            alignment_rounding=f"{MMASIM} fdpa.truncated_fused_sum (torch.trunc)",
            output_rounding=f"{model}: rho RZ-FP32",
            output_format=f"{PTX_SCALED}: D type .f32",
            input_format=fmt_src + " (A's)",
            b_input_format=fmt_src + " (B's)" if fb != fa else "-1 (emu.units.SAME_AS_A): B is in A's format",
            scale_format=f"{PTX_SCALED}: .scale_vec / .ue8m0, .ue4m3 scale types; {OCP_MX}",
            block_size=f"{PTX_SCALED}: .block32 / .block16; {where}",
            flush_inputs=f"{model}: fp6 / fp4 subnormals kept (fp6_fp4_subnormal_exponent)",
        ),
    )


def _cdna4_unit(key: str, fa: InputFormat, fb: InputFormat, scale: str, block: int, kind: str | None) -> Unit:
    """The CDNA4 block-scaled unit (models.units_cdna4: one instruction family, f8f6f4, so
    ``kind`` only has to be one of :data:`SCALED_KINDS` or ``"f8f6f4"``)."""
    if kind is not None and kind not in (*SCALED_KINDS, "f8f6f4"):
        raise ValueError(f"kind: {kind!r} is not one of {', '.join((*SCALED_KINDS, 'f8f6f4'))}")
    description, fields = cdna4_fields(fa, fb, scale, block)
    values = {f: v for f, (v, _) in fields.items()}
    cited = {f: src for f, (_, src) in fields.items()}
    default = f"unused or at its default in {description} [{NOT_ON_SILICON}]"
    sources = dict(cite(Family.SCALED_FUSED, default)) | cited
    return Unit(name=key, **values, sources=MappingProxyType(sources))


def unit(
    name: str,
    output: str = "fp32",
    input: str | tuple[str, str] = "fp16",
    *,
    scale: str | None = None,
    block: int | None = None,
    kind: str | None = None,
    instruction: str | None = None,
) -> Unit:
    """The named unit (case-insensitive; aliases such as ``h200`` → ``h100`` accepted) for
    operands of ``input`` (``"fp16"``, ``"bf16"``, ``"tf32"`` / ``"xf32"``, ``"e4m3"``,
    ``"e5m2"``, ``"e4m3fnuz"``, ``"e5m2fnuz"``; :data:`UNIT_INPUTS` lists each unit's), or of
    two fp8 formats, A's then B's: ``("e4m3", "e5m2")`` or ``"e4m3xe5m2"``
    (:data:`UNIT_MIXED_INPUTS` lists each unit's pairs; the unit's ``b_input_format`` is B's).

    ``output="fp16"`` selects the fp16-accumulator variant of an NVIDIA unit (RNE, its own zero
    exponent), offered for fp16 and fp8 operands. ValueError naming the accepted values for an
    unknown name, a format the unit has no instruction for, or an output it lacks.

    Block-scaled units (MX, NVFP4): ``scale="ue8m0"`` or ``"ue4m3"`` with ``block=32`` or ``16``,
    on ``"b200"`` (tcgen05.mma) or ``"rtx-blackwell"`` (sm_120 mma.sync), for A and B in e4m3,
    e5m2, e3m2, e2m3 or e2m1 (``input=("e4m3", "e2m1")``): kind::mxf8f6f4 (ue8m0 per 32),
    kind::mxf4 (e2m1, ue8m0 per 32) or kind::mxf4nvf4 (e2m1; ue8m0 per 32 or 16, ue4m3 per 16).
    ``kind`` picks the instruction where two fit (e2m1 × e2m1 with ue8m0 per 32: ``"mxf4"``, the
    default, or ``"mxf8f6f4"``); :data:`SCALED_KINDS`. ``emu.dot_add`` then needs the scales.
    ``"mi355"`` (aliases ``mi350``, ``cdna4``, ``gfx950``): AMD CDNA4 ``v_mfma_scale_f32_*_f8f6f4``,
    ue8m0 per 32 only, from documentation, not checked on silicon (:mod:`models.units_cdna4`).

    ``instruction``: ``"mma"`` (PTX mma.sync), ``"wgmma"`` (Hopper), ``"tcgen05"`` (Blackwell
    tcgen05.mma) or ``"mfma"`` (AMD); None or the first of :data:`UNIT_INSTRUCTIONS` is the unit
    as before. They differ for fp8 operands on Hopper and Blackwell: ``mma`` there widens fp8 to
    fp16 and runs two fp16 steps of 16 per k32 from zero, then adds c (one RNE addition), as the
    measured rows show (Khattak & Mikaitis, arXiv 2512.07004). ValueError naming the accepted
    values for an instruction the unit lacks.
    """
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    key = _SCALED_ALIASES.get(key, key)
    scaled = scale is not None or block is not None or kind is not None
    ins = _instruction(key, name, instruction, scaled)
    if scaled:
        if key not in SCALED_UNIT_NAMES:
            raise ValueError(
                f"unit: {name!r} has no block-scaled instructions; block-scaled units: {', '.join(SCALED_UNIT_NAMES)}"
            )
        if scale is None or block is None:
            raise ValueError("scale, block: a block-scaled unit needs both (scale='ue8m0' or 'ue4m3', block=32 or 16)")
        if output != "fp32":
            raise ValueError(f"output: block-scaled units accumulate in fp32 only, got {output!r}")
        fa, fb = input_pair(input)
        if key in CDNA4_NAMES:
            return _cdna4_unit(key, fa, fb, str(scale).strip().lower(), block, kind)
        return _scaled_unit(key, fa, fb, str(scale).strip().lower(), block, kind)
    if key == "rtx-blackwell" or key in CDNA4_NAMES:
        raise ValueError(
            f"unit: {key!r} is modelled for its block-scaled instructions only: pass scale= and block= "
            "(e.g. input='e2m1', scale='ue8m0', block=32)"
        )
    if output not in ("fp32", "fp16"):
        raise ValueError(f"output: {output!r} is not one of 'fp32', 'fp16'")
    if key not in UNIT_INPUTS:
        valid = ", ".join(UNIT_NAMES)
        raise ValueError(f"unit: {name!r} is not a known unit; valid names: {valid} (aliases: {', '.join(ALIASES)})")
    fmt, b_fmt = input_pair(input)
    if fmt != b_fmt:
        pairs = UNIT_MIXED_INPUTS.get(key, ())
        if (input_name(fmt), input_name(b_fmt)) not in pairs:
            have = ", ".join(pair_name(a, b) for a, b in pairs) or "none"
            raise ValueError(
                f"input: {key} has no {pair_name(fmt, b_fmt)} instruction (A {input_name(fmt)}, B "
                f"{input_name(b_fmt)}); its mixed pairs: {have}"
            )
        return _mixed(unit(key, output=output, input=fmt, instruction=ins), b_fmt)
    if input_name(fmt) not in UNIT_INPUTS[key]:
        raise ValueError(
            f"input: {key} has no {input_name(fmt)} instruction; its input formats: {', '.join(UNIT_INPUTS[key])}"
        )
    if key in _NV:
        if output == "fp16" and fmt in (InputFormat.BF16, InputFormat.TF32):
            raise ValueError(f"output: {key} accumulates {input_name(fmt)} in fp32 only; 'fp16' is for fp16 and fp8")
        arch = _NV[key][0]
        if ins == "mma" and key in ("h100", "b200") and fmt in (InputFormat.E4M3, InputFormat.E5M2):
            return _nvidia_fp8_mma(key, arch, output, fmt)
        return _nvidia_input(_nvidia(key, *_NV[key], output=output), arch, 2 * _NV[key][1], fmt)
    builders = {"mi100": _amd_mi100, "mi200": _amd_mi200, "mi300": _amd_mi300, "fma32": _fma32, "fp64": _fp64}
    if output != "fp32":
        raise ValueError(f"output: {name!r} has only an fp32 output; 'fp16' is offered for NVIDIA units")
    return builders[key](fmt)


def _instruction(key: str, name, instruction, scaled: bool) -> str | None:
    """The instruction :func:`unit` builds ``key`` for (None: the default), or ValueError naming
    the field and the accepted values."""
    if instruction is None:
        return None
    ins = str(instruction).strip().lower()
    ins = _INSTRUCTION_ALIASES.get(ins, ins)
    if scaled or key == "rtx-blackwell":
        have = {"b200": ("tcgen05",), "rtx-blackwell": ("mma",)}.get(key, ())
        name = f"{name} (block-scaled)"
    else:
        have = UNIT_INSTRUCTIONS.get(key, ())
    if not have and key not in UNIT_INPUTS:
        return ins  # an unknown unit name: unit() says so
    if not have:
        known = ", ".join(UNIT_INSTRUCTIONS)
        raise ValueError(
            f"instruction: {name!r} is not a matrix unit with instructions (units that have them: {known})"
        )
    if ins not in have:
        raise ValueError(
            f"instruction: {name} has no {instruction!r} instruction; its instructions: {', '.join(have)} "
            "(the first is the default)"
        )
    return ins
