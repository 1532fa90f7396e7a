"""Named matrix units and FMA paths as parameter sets, every parameter with its source.

``unit(name)`` returns a frozen :class:`Unit`; ``dataclasses.replace(unit, group_size=8)`` gives a
variant to explore. ``Unit.params`` is the plain record the ``emu`` kernels take.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from emu.units import Family, Format, Rounding, UnitParams

__all__ = ["Unit", "unit", "UNIT_NAMES", "ALIASES", "MAX_GROUP_SIZE"]

#: The largest products-per-group a unit may have (matrix units have 1 … 32).
MAX_GROUP_SIZE = 1 << 12

# Short citations of the published unit models and hardware measurements.
MMASIM = "MMA-Sim (Xie et al., arXiv 2511.10909; PyPI mmasim 2.1.1)"
MMASIM_AMD = MMASIM + " mmasim/amd/sim.py"
MMASIM_NV = MMASIM + " mmasim/nv_ptx/sim.py"
KHATTAK = "Khattak & Mikaitis, arXiv 2512.07004; north-numerical-computing/MATLAB-tensor-core @b12b5a7"
FASI = "Fasi, Higham, Mikaitis, Pranesh, PeerJ CS 7:e330 (2021), test suite @9dae3fc"
PYTORCH_MI200 = "PyTorch docs, numerical_accuracy.rst, 'Reduced Precision FP16 and BF16 GEMMs … MI200'"
IEEE = "IEEE 754-2019 fusedMultiplyAdd; fp16·fp16 is exact in fp32 (22-bit significand)"


@dataclass(frozen=True)
class Unit:
    """A matrix unit or FMA path; ``sources`` cites every other field."""

    name: str
    description: str
    family: Family
    group_size: int
    fraction_bits: int = 0
    sum_fraction_bits: int = 0
    alignment_rounding: Rounding = Rounding.RZ
    c_alignment_rounding: Rounding = Rounding.RD
    output_rounding: Rounding = Rounding.RNE
    zero_exponent: int = -133
    output_format: Format = Format.FP32
    flush_inputs: bool = False
    flush_c: bool = False
    flush_products: bool = False
    flush_partials: bool = False
    flush_output: bool = False
    round_each_group: bool = True
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def __reduce__(self):
        # ``sources`` is read-only (a mappingproxy, which pickle refuses) and jobs carry units to
        # worker processes: a unit pickles as its fields, ``sources`` as a plain dict
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        fields["sources"] = dict(self.sources)
        return _unit_from_fields, (fields,)

    def __post_init__(self):
        # dataclasses.replace(unit, ...) goes through here too: every field keeps its meaning
        enums = {
            "family": Family,
            "alignment_rounding": Rounding,
            "c_alignment_rounding": Rounding,
            "output_rounding": Rounding,
            "output_format": Format,
        }
        for name, enum in enums.items():
            value = getattr(self, name)
            try:
                enum(value)
            except ValueError:
                accepted = ", ".join(f"{m.name} ({int(m)})" for m in enum)
                raise ValueError(f"{name}: {value!r} is not one of {accepted}") from None
        for name in ("group_size", "fraction_bits", "sum_fraction_bits", "zero_exponent"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name}: must be a whole number, got {value!r}")
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name: must be a non-empty string, got {self.name!r}")
        if not 1 <= self.group_size <= MAX_GROUP_SIZE:
            raise ValueError(
                f"group_size: must be ≥ 1 and ≤ {MAX_GROUP_SIZE} (products per group), got {self.group_size}"
            )
        if self.family == Family.PAIRWISE and self.group_size & (self.group_size - 1):
            raise ValueError(f"group_size: a pairwise tree needs a power of two, got {self.group_size}")
        for name in ("fraction_bits", "sum_fraction_bits"):
            if not 0 <= getattr(self, name) <= 48:
                raise ValueError(f"{name}: must be in 0..48 (float64 exactness), got {getattr(self, name)}")
        if not -1100 <= self.zero_exponent <= 1100:
            raise ValueError(f"zero_exponent: must be in -1100..1100 (a float64 exponent), got {self.zero_exponent}")
        for name in ("flush_inputs", "flush_c", "flush_products", "flush_partials", "flush_output", "round_each_group"):
            if not isinstance(getattr(self, name), (bool, int)) or getattr(self, name) not in (0, 1):
                raise ValueError(f"{name}: must be True or False, got {getattr(self, name)!r}")

    @property
    def params(self) -> UnitParams:
        return UnitParams(**{f: int(getattr(self, f)) for f in UnitParams._fields})

    def source(self, field_name: str) -> str:
        return self.sources[field_name]


# Fields a family's arithmetic never reads: their source is that fact.
_UNUSED = {
    Family.FUSED_EXACT: (
        "fraction_bits",
        "sum_fraction_bits",
        "alignment_rounding",
        "c_alignment_rounding",
        "zero_exponent",
        "round_each_group",
    ),
    Family.PAIRWISE: (
        "fraction_bits",
        "sum_fraction_bits",
        "alignment_rounding",
        "c_alignment_rounding",
        "zero_exponent",
        "round_each_group",
    ),
    Family.TRUNCATED_FUSED: ("sum_fraction_bits", "c_alignment_rounding", "round_each_group"),
    Family.TWO_STAGE: ("zero_exponent", "round_each_group"),
    Family.FMA: (
        "fraction_bits",
        "sum_fraction_bits",
        "alignment_rounding",
        "c_alignment_rounding",
        "zero_exponent",
        "round_each_group",
    ),
    Family.FP64: ("fraction_bits", "sum_fraction_bits", "alignment_rounding", "c_alignment_rounding", "zero_exponent"),
}


def _unit_from_fields(fields: dict) -> Unit:
    """The unpickler of :meth:`Unit.__reduce__`: the unit again, ``sources`` read-only."""
    return Unit(**(fields | {"sources": MappingProxyType(fields["sources"])}))


def _cite(family: Family, default: str, **specific: str) -> Mapping[str, str]:
    """Every field's source: ``specific`` where given, "unused by this family" for fields the
    family never reads, else ``default``; the name is fp16emu's own."""
    fields = [f.name for f in dataclasses.fields(Unit) if f.name != "sources"]
    unused = dict.fromkeys(_UNUSED[family], "unused by this family")
    return MappingProxyType({f: specific.get(f, unused.get(f, default)) for f in fields} | {"name": "fp16emu naming"})


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
        sources=_cite(
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


def _amd_mi100() -> Unit:
    return Unit(
        name="mi100",
        description="AMD MI100 (CDNA1) v_mfma_f32_*f16: exact fused dot-add of 4 products and c, one RNE (E-FDPA)",
        family=Family.FUSED_EXACT,
        group_size=4,
        output_rounding=Rounding.RNE,
        sources=_cite(
            Family.FUSED_EXACT,
            f"{MMASIM_AMD} (CDNA1: MMA_E_FDPA, L_max=4 for f16); {KHATTAK} MI100MC.m (fma=4, correct_rounding=1, rne, subnormals kept)",
        ),
    )


def _amd_mi200() -> Unit:
    flush = f"{MMASIM} arithmetic/ftz_mul_add.py; {KHATTAK} MI210MC.m (in/out_subnormals=0); {PYTORCH_MI200}"
    return Unit(
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
        sources=_cite(
            Family.PAIRWISE,
            f"{MMASIM_AMD} (CDNA2: MMA_FTZ_MUL_ADD(P=4)); {KHATTAK} MI210MC.m / MI250MC.m (pair_wise_sum=1)",
            flush_inputs=flush + " (ftz_mul: inputs → +0)",
            flush_c=flush + " (c → +0, keep_sign=False)",
            flush_products=flush + " (ftz_mul: product flushed, sign kept)",
            flush_partials=flush + " (ftz_add, sign kept)",
            flush_output=flush + " (ftz_add into c, sign kept)",
        ),
    )


def _amd_mi300() -> Unit:
    return Unit(
        name="mi300",
        description="AMD MI300 (CDNA3) v_mfma_f32_*_f16: two-stage truncated fused dot-add (TR-FDPA)",
        family=Family.TWO_STAGE,
        group_size=8,
        fraction_bits=24,
        sum_fraction_bits=31,
        alignment_rounding=Rounding.RZ,
        c_alignment_rounding=Rounding.RD,
        output_rounding=Rounding.RNE,
        sources=_cite(
            Family.TWO_STAGE,
            f"{MMASIM_AMD} (CDNA3: MMA_TR_FDPA(F=24, F2=31, rho='RNE-FP32', L_max=8)); {KHATTAK} MI300MC.m @d12a5b3^",
            alignment_rounding=f"{MMASIM} fdpa.truncated_fused_sum (torch.trunc); {KHATTAK} MI300MC.m",
            c_alignment_rounding=f"{MMASIM} fdpa.tr_fdpa (torch.floor); {KHATTAK} MI300MC.m armode='rd'",
        ),
    )


def _fma32() -> Unit:
    return Unit(
        name="fma32",
        description="sequential fp32 FMA in k order (VALU v_fma_f32; non-xdlops kernels)",
        family=Family.FMA,
        group_size=1,
        output_rounding=Rounding.RNE,
        sources=_cite(
            Family.FMA,
            f"{IEEE}; {MMASIM} arithmetic/fma.py (MMA_FMA)",
        ),
    )


def _fp64() -> Unit:
    return Unit(
        name="fp64",
        description="fp64 accumulator over all of K, rounded to fp32 (RNE) once at the end (CPU validation, xdlops runs)",
        family=Family.FP64,
        group_size=1,
        output_rounding=Rounding.RNE,
        round_each_group=False,
        sources=_cite(
            Family.FP64,
            "rocMLIR @3df931f1 (github.com/ROCm/rocMLIR) mcpuConv2dFloat: the CPU validation's double accumulator, result cast to float",
        ),
    )


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


def unit(name: str, output: str = "fp32") -> Unit:
    """The named unit (case-insensitive; aliases such as ``h200`` → ``h100`` accepted).

    ``output="fp16"`` selects the fp16-output variant of an NVIDIA unit (RNE, its own zero exponent).
    """
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    if output not in ("fp32", "fp16"):
        raise ValueError(f"output: {output!r} is not one of 'fp32', 'fp16'")
    if key in _NV:
        return _nvidia(key, *_NV[key], output=output)
    builders = {"mi100": _amd_mi100, "mi200": _amd_mi200, "mi300": _amd_mi300, "fma32": _fma32, "fp64": _fp64}
    if key not in builders:
        valid = ", ".join(UNIT_NAMES)
        raise ValueError(f"unit: {name!r} is not a known unit; valid names: {valid} (aliases: {', '.join(ALIASES)})")
    if output != "fp32":
        raise ValueError(f"output: {name!r} has only an fp32 output; 'fp16' is offered for NVIDIA units")
    return builders[key]()
