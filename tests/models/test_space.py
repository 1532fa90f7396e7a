"""The model space: its named points, its rejections, its size, and its equivalence classes.

The equivalences are checked against the kernels on adversarial inputs: two members of a class
must give the same bits on every row (the space claims no fp16 input splits them), and points
the space keeps apart must differ somewhere.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import emu
import models
from emu.units import Family, Format, Rounding, UnitParams
from models import space
from validation.identify import probes as probe

NAMED = [(n, "fp32") for n in models.units.UNIT_NAMES] + [
    (n, "fp16") for n in ("v100", "t4", "a100", "ada", "h100", "b200")
]


@pytest.mark.parametrize("name,output", NAMED, ids=[f"{n}-{o}" for n, o in NAMED])
def test_named_units_are_points(name, output):
    params = models.unit(name, output=output).params
    assert space.contains(params)
    canon = space.check_unit(params)
    assert canon in space.unit_points(), f"{name}: its class representative is not enumerated"
    key = name if output == "fp32" else f"{name}/fp16"
    assert key in space.names_of(space.Point(canon))


def test_enumeration_size_and_uniqueness():
    units = space.unit_points()
    assert 300 <= len(units) <= 5000
    assert len(set(units)) == len(units)
    for u in units:
        assert space.check_unit(u) == u  # every enumerated unit is canonical and valid
    pts16 = space.points(Format.FP32, 16)
    assert 300 <= len(pts16) <= 5000
    # K filter: a group larger than K, or not dividing it, is not searched
    assert all(4 % p.unit.group_size == 0 for p in space.points(Format.FP32, 4))
    assert {p.unit.output_format for p in space.points(Format.FP16, 16)} == {Format.FP16}


@pytest.mark.parametrize(
    "change,field,accepted",
    [
        (
            {"family": Family.TRUNCATED_FUSED, "group_size": 8, "fraction_bits": 40},
            "fraction_bits",
            "22, 23, 24, 25, 26",
        ),
        ({"family": Family.PAIRWISE, "group_size": 3}, "group_size", "2, 4, 8, 16"),
        ({"family": Family.FUSED_EXACT, "group_size": 4, "fraction_bits": 24}, "fraction_bits", "default 0"),
        (
            {"family": Family.TWO_STAGE, "group_size": 8, "fraction_bits": 24, "sum_fraction_bits": 40},
            "sum_fraction_bits",
            "28, 29, 30, 31, 32",
        ),
        (
            {
                "family": Family.TRUNCATED_FUSED,
                "group_size": 8,
                "fraction_bits": 24,
                "output_format": Format.FP16,
                "output_rounding": Rounding.RZ,
            },
            "output_rounding",
            "accepted values: 0",
        ),
        ({"family": Family.FP64, "group_size": 1, "round_each_group": True}, "group_size", "FMA"),
        (
            {"family": Family.TRUNCATED_FUSED, "group_size": 8, "fraction_bits": 24, "zero_exponent": -20},
            "zero_exponent",
            "-126",
        ),
        ({"family": 9, "group_size": 4}, "family", "FUSED_EXACT"),
    ],
)
def test_invalid_points_are_rejected_with_the_field_and_accepted_values(change, field, accepted):
    params = UnitParams(**{"family": 0, "group_size": 4, **change})
    with pytest.raises(ValueError) as err:
        space.check_unit(params)
    msg = str(err.value)
    assert msg.startswith(f"{field}:"), msg
    assert accepted in msg, msg
    assert not space.contains(params)


def _outputs(params, rows):
    fp16 = params.output_format == Format.FP16
    d = emu.dot_add(rows.a, rows.b, rows.c_values(), params)
    return d.view(np.uint16 if fp16 else np.uint32)


@pytest.fixture(scope="module")
def rows32():
    return probe.probe_set(2048, 16, seed=7)


@pytest.fixture(scope="module")
def rows16():
    return probe.probe_set(2048, 16, seed=7, accumulator="fp16")


def test_zero_exponent_classes_do_not_split(rows32, rows16):
    for name, rows, members in (("v100", rows32, (-126, -131, -133, -200)), ("h100", rows16, (-28, -29, -40))):
        base = models.unit(name, output="fp16" if rows is rows16 else "fp32").params
        outs = [_outputs(base._replace(zero_exponent=z), rows) for z in members]
        for z, o in zip(members[1:], outs[1:]):
            assert np.array_equal(o, outs[0]), f"{name}: zero_exponent {z} differs from {members[0]}"
        assert len({space.canonical(base._replace(zero_exponent=z)) for z in members}) == 1
    # and just above the class bound the exponent does matter (fp16 output)
    base = models.unit("h100", output="fp16").params
    assert not np.array_equal(
        _outputs(base._replace(zero_exponent=-28), rows16), _outputs(base._replace(zero_exponent=-19), rows16)
    )


def test_flush_equivalences_do_not_split(rows32):
    mi200 = models.unit("mi200").params
    # pairwise product/partial flushes cannot act
    for fp, fq in ((False, False), (True, False), (False, True)):
        other = mi200._replace(flush_products=fp, flush_partials=fq)
        assert np.array_equal(_outputs(other, rows32), _outputs(mi200, rows32))
        assert space.canonical(other) == space.canonical(mi200)
    # with flush_c the result flush cannot act (fused exact, pairwise, FMA)
    for name in ("mi100", "mi200", "fma32"):
        u = models.unit(name).params._replace(flush_c=True)
        a, b = u._replace(flush_output=False), u._replace(flush_output=True)
        assert np.array_equal(_outputs(a, rows32), _outputs(b, rows32)), name
        assert space.canonical(a) == space.canonical(b)
    # without flush_c it does act
    mi100 = models.unit("mi100").params
    assert not np.array_equal(_outputs(mi100, rows32), _outputs(mi100._replace(flush_output=True), rows32))


def test_fp64_per_product_rounding_is_fma(rows32):
    fma = models.unit("fma32").params
    fp64_each = dataclasses.replace(models.unit("fp64"), round_each_group=True).params
    assert np.array_equal(_outputs(fma, rows32), _outputs(fp64_each, rows32))
    assert not space.contains(fp64_each)


def test_k_orders():
    mi100 = space.check_unit(models.unit("mi100").params)
    assert space.k_tiles(mi100, 16) == (0, 8, 16)
    assert space.k_permutation(space.Point(mi100, 16), 16) == (0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15)
    assert space.k_permutation(space.Point(mi100), 16) is None
    h100 = space.check_unit(models.unit("h100").params)
    assert space.k_tiles(h100, 16) == (0,)
    with pytest.raises(ValueError, match="k_tile"):
        space.k_permutation(space.Point(mi100, 12), 16)


def test_describe_and_as_dict():
    p = space.named_points()["mi300"]
    assert space.describe(p) == "two_stage L=8 F=24 F2=31 align=RZ c_align=RD out=RNE k=ascending"
    d = space.as_dict(p)
    assert d == {
        "family": "TWO_STAGE",
        "group_size": 8,
        "fraction_bits": 24,
        "sum_fraction_bits": 31,
        "alignment_rounding": "RZ",
        "c_alignment_rounding": "RD",
        "output_rounding": "RNE",
        "k_order": "ascending",
    }


def test_kernel_accumulation_space():
    ks = list(space.kernel_space(4))
    assert space.KernelAccumulation(4, 16, 4, 8) in ks
    assert all(k.kpack == 1 or k.kpack % 4 == 0 for k in ks)
    with pytest.raises(ValueError, match="^split_k: 3 is not one of 1, 2, 4, 8, 16, 32, 64"):
        space.KernelAccumulation(4, 0, 1, 3)
    with pytest.raises(ValueError, match="^kpack: 4 is not a multiple of group_size 8"):
        space.KernelAccumulation(8, 0, 4, 1)
    with pytest.raises(ValueError, match="^k_tile"):
        space.KernelAccumulation(4, 6)
