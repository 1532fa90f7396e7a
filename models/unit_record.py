"""The record of a named unit: :class:`Unit` (the fields of :class:`emu.UnitParams`, declared
there once, with a name, a description and a source for every field) and :func:`cite`, which
fills in the sources a unit does not give one by one (a field its family never reads says so)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import field
from types import MappingProxyType

from emu.units import BLOCK_SCALED, FIELD_KINDS, Family, UnitParams, check_params

__all__ = ["Unit", "cite"]


class _NamedUnit:
    """The methods of :class:`Unit` (its fields come from :class:`emu.UnitParams`)."""

    def __post_init__(self):
        # dataclasses.replace(unit, ...) goes through here too: every field keeps its meaning
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name: must be a non-empty string, got {self.name!r}")
        check_params(UnitParams(*(getattr(self, f) for f in UnitParams._fields)))
        for f, kind in FIELD_KINDS.items():  # each value as its kind: enums print by name
            object.__setattr__(self, f, kind(getattr(self, f)))

    def __reduce__(self):
        # ``sources`` is read-only (a mappingproxy, which pickle refuses) and jobs carry units to
        # worker processes: a unit pickles as its fields, ``sources`` as a plain dict
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        fields["sources"] = dict(self.sources)
        return _unit_from_fields, (fields,)

    @property
    def params(self) -> UnitParams:
        """The plain record the ``emu`` kernels take (every field an int)."""
        return UnitParams(*(int(getattr(self, f)) for f in UnitParams._fields))

    def source(self, field_name: str) -> str:
        return self.sources[field_name]


def _field(name: str):
    """``name`` of :class:`emu.UnitParams` as a dataclass field: its kind and its default."""
    if name in UnitParams._field_defaults:
        return name, FIELD_KINDS[name], field(default=UnitParams._field_defaults[name])
    return name, FIELD_KINDS[name]


Unit = dataclasses.make_dataclass(
    "Unit",
    [
        ("name", str),
        ("description", str),
        *map(_field, UnitParams._fields),
        ("sources", Mapping[str, str], field(default_factory=dict, compare=False, repr=False)),
    ],
    bases=(_NamedUnit,),
    frozen=True,
)
Unit.__module__ = __name__
Unit.__doc__ = """A matrix unit or FMA path: ``name``, ``description``, the fields of
:class:`emu.UnitParams` (declared there once; enum fields hold enum members) and ``sources``, which
cites every other field. Made by :func:`unit`; ``dataclasses.replace(unit, group_size=8)`` gives a
variant, validated as every unit is (:func:`emu.units.check_params`). ``params`` is the plain
record the ``emu`` kernels take."""


# Fields a family's arithmetic never reads: their source is that fact.
_UNUSED = {
    Family.FUSED_EXACT: (
        "fraction_bits",
        "sum_fraction_bits",
        "alignment_rounding",
        "c_alignment_rounding",
        "zero_exponent",
        "round_each_group",
        "output_fraction_bits",
        "interleaved_sums",
    ),
    Family.PAIRWISE: (
        "fraction_bits",
        "sum_fraction_bits",
        "alignment_rounding",
        "c_alignment_rounding",
        "zero_exponent",
        "round_each_group",
        "output_fraction_bits",
        "interleaved_sums",
    ),
    Family.TRUNCATED_FUSED: ("sum_fraction_bits", "c_alignment_rounding", "round_each_group", "interleaved_sums"),
    Family.TWO_STAGE: ("zero_exponent", "round_each_group", "output_fraction_bits"),
    Family.FMA: (
        "fraction_bits",
        "sum_fraction_bits",
        "alignment_rounding",
        "c_alignment_rounding",
        "zero_exponent",
        "round_each_group",
        "output_fraction_bits",
        "interleaved_sums",
    ),
    Family.FP64: (
        "fraction_bits",
        "sum_fraction_bits",
        "alignment_rounding",
        "c_alignment_rounding",
        "zero_exponent",
        "output_fraction_bits",
        "interleaved_sums",
    ),
    Family.SCALED_FUSED: (
        "sum_fraction_bits",
        "c_alignment_rounding",
        "round_each_group",
        "interleaved_sums",
        "subgroup_size",
    ),
    Family.GROUPED_SCALED: ("sum_fraction_bits", "c_alignment_rounding", "round_each_group", "interleaved_sums"),
}
#: the block-scaling fields, which only the block-scaled families read
_SCALE_FIELDS = ("scale_format", "block_size", "subgroup_size")


def _unit_from_fields(fields: dict) -> Unit:
    """The unpickler of :meth:`Unit.__reduce__`: the unit again, ``sources`` read-only."""
    return Unit(**(fields | {"sources": MappingProxyType(fields["sources"])}))


def cite(family: Family, default: str, **specific: str) -> Mapping[str, str]:
    """Every field's source: ``specific`` where given, "unused by this family" for fields the
    family never reads, else ``default``; the name is fp16emu's own."""
    fields = [f.name for f in dataclasses.fields(Unit) if f.name != "sources"]
    unused = dict.fromkeys(_UNUSED[family], "unused by this family")
    if family not in BLOCK_SCALED:
        unused |= dict.fromkeys(_SCALE_FIELDS, "0: not a block-scaled unit")
    unused["b_input_format"] = "-1 (emu.units.SAME_AS_A): B is in A's format (a mixed-fp8 unit cites its instruction)"
    unused["step_size"] = "0: one instruction per group, no emulated steps (emu.steps)"
    return MappingProxyType({f: specific.get(f, unused.get(f, default)) for f in fields} | {"name": "fp16emu naming"})
