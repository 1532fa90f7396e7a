"""The unit registry: names, errors, sources, variants."""

import dataclasses

import numpy as np
import pytest

import emu
import models
from emu.units import Family, InputFormat


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
    assert dataclasses.replace(pair, b_input_format=None, description=same.description, sources={}) == same
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
