"""The unit registry: names, errors, sources, variants."""

import dataclasses

import numpy as np
import pytest

import emu
import models
from emu.units import FIELD_KINDS, SAME_AS_A, Family, InputFormat, UnitParams, check_params, kernel_vector


def test_every_field_of_every_unit_cites_a_source():
    fields = [f.name for f in dataclasses.fields(models.Unit) if f.name != "sources"]
    for name in models.UNIT_NAMES:
        for output in ("fp32", "fp16") if models.unit(name).family == Family.TRUNCATED_FUSED else ("fp32",):
            unit = models.unit(name, output=output)
            missing = [f for f in fields if not unit.sources.get(f)]
            assert not missing, f"{name}/{output}: fields without a source: {missing}"


def test_wrong_name_lists_the_valid_names():
    with pytest.raises(ValueError) as err:
        models.unit("mi250z")
    for name in models.UNIT_NAMES:
        assert name in str(err.value)


def test_wrong_output_is_a_value_error():
    with pytest.raises(ValueError, match="output"):
        models.unit("mi200", output="fp16")
    with pytest.raises(ValueError, match="output"):
        models.unit("h100", output="bf16")


def test_aliases_and_case():
    assert models.unit("H200").params == models.unit("h100").params
    assert models.unit("MI250X").params == models.unit("mi200").params


def test_units_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        models.unit("mi100").group_size = 8


@pytest.mark.parametrize(
    "name,family,group",
    [
        ("mi100", Family.FUSED_EXACT, 4),
        ("mi200", Family.PAIRWISE, 4),
        ("mi300", Family.TWO_STAGE, 8),
        ("v100", Family.TRUNCATED_FUSED, 4),
        ("a100", Family.TRUNCATED_FUSED, 8),
        ("h100", Family.TRUNCATED_FUSED, 16),
        ("b200", Family.TRUNCATED_FUSED, 16),
        ("fma32", Family.FMA, 1),
    ],
)
def test_table_of_spec_section_4(name, family, group):
    unit = models.unit(name)
    assert (unit.family, unit.group_size) == (family, group)


def test_a_variant_changes_the_bits():
    """group_size is a live knob: MI100 with groups of 8 keeps a 2^-24 term that groups of 4 lose."""
    a = np.array([1, 0, 0, 0, 2**-12, 0, 0, 0], np.float16)
    b = np.array([1, 0, 0, 0, 2**-12, 0, 0, 0], np.float16)
    c = np.float32(2**-24)
    four = emu.dot_add(a, b, c, models.unit("mi100"))
    eight = emu.dot_add(a, b, c, dataclasses.replace(models.unit("mi100"), group_size=8))
    assert four.view(np.uint32) == np.float32(1).view(np.uint32)  # 1 + 2^-24 rounds to 1
    assert eight.view(np.uint32) == np.float32(1 + 2**-23).view(np.uint32)  # 1 + 2^-24 + 2^-24 exact


def test_bad_inputs_are_clear_errors():
    unit = models.unit("mi200")
    with pytest.raises(TypeError, match="a: .*expected float16"):
        emu.dot_add(np.ones(4, np.float32), np.ones(4, np.float16), np.float32(0), unit)
    with pytest.raises(ValueError, match="K differs"):
        emu.dot_add(np.ones(4, np.float16), np.ones(8, np.float16), np.float32(0), unit)
    with pytest.raises(ValueError, match="power of two"):
        emu.dot_add(
            np.ones(4, np.float16), np.ones(4, np.float16), np.float32(0), dataclasses.replace(unit, group_size=3)
        )


@pytest.mark.parametrize("name", sorted(models.UNIT_NAMES))
def test_a_unit_pickles_to_an_equal_unit_with_read_only_sources(name):
    # jobs carry units to worker processes (process pool, Dask)
    import pickle
    from types import MappingProxyType

    original = models.unit(name)
    again = pickle.loads(pickle.dumps(original))
    assert again == original and dict(again.sources) == dict(original.sources)
    assert isinstance(again.sources, MappingProxyType)


def test_mixed_fp8_units_name_both_operands():
    """input=(A's, B's) and its name "AxB" give one unit: the fp8 arithmetic of A's format with B
    in its own (b_input_format), cited to the instruction tables; pairs a unit lacks are errors
    naming its pairs."""
    pair = models.unit("h100", input=("e4m3", "e5m2"))
    assert pair == models.unit("h200", input="e4m3xe5m2")
    same = models.unit("h100", input="e4m3")
    assert dataclasses.replace(pair, b_input_format=SAME_AS_A, description=same.description, sources={}) == same
    assert pair.params.input_format == InputFormat.E4M3 and pair.params.b_input_format == InputFormat.E5M2
    assert same.params.b_input_format == -1
    assert "wgmma" in pair.source("b_input_format") and "e4m3 × e5m2" in pair.description
    mi300 = models.unit("mi300", input=("e5m2fnuz", "e4m3fnuz"))
    assert mi300.interleaved_sums == 2 and "BF8_FP8" in mi300.source("b_input_format")
    with pytest.raises(ValueError, match="h100 has no e4m3xe5m2fnuz .*its mixed pairs: e4m3xe5m2, e5m2xe4m3"):
        models.unit("h100", input=("e4m3", "e5m2fnuz"))
    with pytest.raises(ValueError, match="a100 has no e4m3xe5m2 .*none"):
        models.unit("a100", input="e4m3xe5m2")
    with pytest.raises(ValueError, match="b_input_format"):
        dataclasses.replace(pair, b_input_format=99)


def test_a_unit_is_the_emu_record_with_a_name_and_sources():
    """models.Unit declares no field of its own arithmetic: its fields are emu.UnitParams' (same
    order, defaults and kinds) between its name and description and its sources; ``params``
    gives the record back as plain ints, enum fields of the unit hold their enum's members."""
    fields = dataclasses.fields(models.Unit)
    assert [f.name for f in fields] == ["name", "description", *UnitParams._fields, "sources"]
    by_name = {f.name: f for f in fields}
    for name, kind in FIELD_KINDS.items():
        assert by_name[name].type is kind
        assert by_name[name].default == UnitParams._field_defaults.get(name, dataclasses.MISSING)
    for name in models.UNIT_NAMES:
        u = models.unit(name)
        assert tuple(u.params) == tuple(int(getattr(u, f)) for f in UnitParams._fields)
        assert all(type(v) is int for v in u.params)
        assert type(u.family) is Family and type(u.flush_inputs) is bool
    variant = dataclasses.replace(models.unit("h100"), output_rounding=0, flush_c=1)
    assert variant.output_rounding.name == "RNE" and variant.flush_c is True


@pytest.mark.parametrize(
    "name, changes, message",
    [
        ("mi100", {"input_format": InputFormat.BF16}, "exact fused unit with bf16 operands"),
        ("fma32", {"input_format": InputFormat.BF16, "output_format": 1}, "fp16 accumulators take"),
        ("h100", {"input_format": InputFormat.BF16, "b_input_format": InputFormat.E5M2}, "mixed operands"),
        ("h100", {"b_input_format": 99}, "b_input_format: 99 is not -1"),
        ("mi200", {"group_size": 6}, "power of two"),
        ("h100", {"fraction_bits": 49}, "0..48"),
        ("fp64", {"interleaved_sums": 2.0}, "interleaved_sums: must be a whole number"),
    ],
)
def test_a_unit_is_validated_once_where_it_is_made_and_where_emu_takes_it(name, changes, message):
    """One validation (emu.units.check_params): a variant models.Unit refuses is refused with the
    same words by emu's entry (dot_add) when given as a plain record."""
    u = models.unit(name)
    with pytest.raises(ValueError, match=message) as made:
        dataclasses.replace(u, **changes)
    plain = u.params._replace(**changes)
    with pytest.raises(ValueError) as taken:
        check_params(plain)
    assert str(taken.value) == str(made.value)
    with pytest.raises(ValueError) as used:
        emu.dot_add(np.ones(4, np.float16), np.ones(4, np.float16), np.float32(0), plain)
    assert str(used.value) == str(made.value)


def test_the_kernel_vector_keeps_the_kernels_slots():
    """The vector the kernels take: the record through b_input_format (slots 0 … 18, as
    emu/kernels/_tiles.py numbers them), A's and B's subnormal exponents (19, 20), then any field
    declared after b_input_format: adding a field to the record moves no slot a kernel reads."""
    p = models.unit("h100", input=("e4m3", "e5m2")).params
    v = kernel_vector(p).tolist()
    head = UnitParams._fields.index("b_input_format") + 1
    assert head == 19 and v[18] == InputFormat.E5M2
    assert v[:head] == list(p[:head]) and v[head : head + 2] == [-6, -14] and v[head + 2 :] == list(p[head:])
