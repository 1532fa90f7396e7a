"""Self-tests of the exact oracle (tests/exact_reference.py) on hand-derived and published cases."""

from __future__ import annotations

import dataclasses
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from exact_reference import (  # noqa: E402
    decode_fp16,
    decode_fp32,
    reference_dot_add,
    to_fraction,
)

import models  # noqa: E402
from emu.units import Family, Format, Rounding, UnitParams  # noqa: E402

REF = Path(__file__).resolve().parents[3] / "shared" / "reference"
NEED_REF = pytest.mark.skipif(
    not REF.is_dir(), reason=f"reference data not found at {REF} (the shared/ folder beside the repo)"
)

ONE16, ONE32 = 0x3C00, 0x3F800000


def _is_nan32(bits):
    return (bits & 0x7F800000) == 0x7F800000 and (bits & 0x7FFFFF) != 0


def _is_nan16(bits):
    return (bits & 0x7C00) == 0x7C00 and (bits & 0x3FF) != 0


def P(name, **kw):
    u = models.unit(name)
    return dataclasses.replace(u, **kw).params if kw else u.params


def f32(x):
    return int(np.array(x, np.float32).view(np.uint32))


def h16(x):
    return int(np.array(x, np.float16).view(np.uint16))


# ------------------------------------------------------------------ decoding (independent of emu)


def test_decode_fp16_all_patterns_match_numpy():
    bits = np.arange(1 << 16, dtype=np.uint16)
    vals = bits.view(np.float16).astype(np.float64)
    for b, v in zip(bits.tolist(), vals.tolist()):
        d = decode_fp16(b)
        if np.isnan(v):
            assert d[0] == 2
        elif np.isinf(v):
            assert d[0] == 1 and d[2] == (v < 0)
        else:
            assert to_fraction(d) == Fraction(v), hex(b)
            assert d[2] == bool(b >> 15)


def test_decode_fp32_samples_match_numpy():
    rng = np.random.default_rng(1)
    bits = np.concatenate(
        [
            rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32),
            np.array([0, 0x80000000, 1, 0x807FFFFF, 0x7F7FFFFF, 0x00800000, 0x7F800000, 0xFF800000], np.uint32),
        ]
    )
    with np.errstate(invalid="ignore"):
        vals = bits.view(np.float32).astype(np.float64)
    for b, v in zip(bits.tolist(), vals.tolist()):
        d = decode_fp32(b)
        if np.isnan(v):
            assert d[0] == 2
        elif np.isinf(v):
            assert d[0] == 1
        else:
            assert to_fraction(d) == Fraction(v), hex(b)


# ------------------------------------------------------------------ hand-derived cases


def test_fused_exact_one_rounding_per_group():
    # 1 + 2^-24 + 2^-24: exact 1 + 2^-23 (MI100's group of 4 keeps it; fma32 loses both ties)
    t = h16(2.0**-12)  # t·t = 2^-24
    a = b = [ONE16, t, t, 0]
    assert reference_dot_add(a, b, 0, P("mi100")) == 0x3F800001
    assert reference_dot_add(a, b, 0, P("fma32")) == 0x3F800000
    assert reference_dot_add(a, b, 0, P("fp64")) == 0x3F800001
    assert reference_dot_add(a, b, 0, P("fp64", round_each_group=True)) == 0x3F800000


def test_directed_output_rounding():
    a, b = [ONE16, h16(2.0**-12)], [ONE16, h16(-(2.0**-13))]  # 1 - 2^-25
    assert reference_dot_add(a, b, 0, P("mi100")) == ONE32  # RNE
    assert reference_dot_add(a, b, 0, P("mi100", output_rounding=Rounding.RZ)) == 0x3F7FFFFF
    assert reference_dot_add(a, b, 0, P("mi100", output_rounding=Rounding.RD)) == 0x3F7FFFFF
    neg = [0xBC00, h16(2.0**-12)]
    assert reference_dot_add(neg, [ONE16, h16(2.0**-13)], 0, P("mi100", output_rounding=Rounding.RD)) == 0xBF800000
    assert reference_dot_add(neg, [ONE16, h16(2.0**-13)], 0, P("mi100", output_rounding=Rounding.RZ)) == 0xBF7FFFFF


def test_pairwise_tree_order_and_flush():
    tiny = h16(2.0**-12)  # tiny·tiny = 2^-24
    # (1 + 2^-24) + (2^-24 + 0): the first node ties to 1, the second is 2^-24, 1 + 2^-24 ties to 1
    assert reference_dot_add([ONE16, tiny, tiny, 0], [ONE16, tiny, tiny, 0], 0, P("mi200")) == ONE32
    # (2^-24 + 2^-24) + (1 + 0) = 1 + 2^-23 exactly
    assert reference_dot_add([tiny, tiny, ONE16, 0], [tiny, tiny, ONE16, 0], 0, P("mi200")) == 0x3F800001
    # fp16 subnormal input flushed: 2^-20 · 1024 → 0 ; fp32 subnormal c flushed to +0
    assert reference_dot_add([0x0010], [0x6400], 0, P("mi200")) == 0
    assert reference_dot_add([0], [0], 0x80400000, P("mi200")) == 0
    assert reference_dot_add([0x0010], [0x6400], 0, P("mi100")) == f32(2.0**-10)


def test_pairwise_short_group_pads_with_positive_zero():
    # K = 1: s = (p0 + +0) + (+0 + +0); with p0 = −0 and c = −0 (no flush): (−0 + +0) = +0 → c + s = +0
    p = P("mi200", flush_inputs=False, flush_c=False)
    assert reference_dot_add([0x8000], [ONE16], 0x80000000, p) == 0
    # IEEE signed zeros otherwise: (−0)·1 chain in fma32 keeps −0
    assert reference_dot_add([0x8000], [ONE16], 0x80000000, P("fma32")) == 0x80000000
    assert reference_dot_add([0x8000], [ONE16], 0x00000000, P("fma32")) == 0
    assert reference_dot_add([ONE16], [ONE16], 0xBF800000, P("fma32")) == 0  # x + (−x) = +0
    assert reference_dot_add([ONE16], [ONE16], 0xBF800000, P("fma32", output_rounding=Rounding.RD)) == 0x80000000


def test_fused_families_never_return_negative_zero():
    for name in ("mi100", "mi300", "v100", "a100", "h100"):
        assert reference_dot_add([0x8000] * 4, [ONE16] * 4, 0x80000000, P(name)) == 0, name
        assert reference_dot_add([ONE16, 0xBC00], [ONE16, ONE16], 0x80000000, P(name)) == 0, name


def test_truncated_fused_fasi_style():
    # V100 (F=23): 1·1 − (1 − 2^-24) = 2^-24 exactly, but c is truncated at 2^-23: 1 − (1 − 2^-23) = 2^-23
    c = f32(-(1 - 2.0**-24))
    assert reference_dot_add([ONE16], [ONE16], c, P("v100")) == f32(2.0**-23)
    assert reference_dot_add([ONE16], [ONE16], c, P("a100")) == f32(2.0**-24)
    # RZ output: 2 + 3·2^-24 → 2 ; negated → −2
    a, b = [ONE16, ONE16], [0x4000, h16(3 * 2.0**-24)]
    assert reference_dot_add(a, b, 0, P("v100")) == f32(2.0)
    assert reference_dot_add([0xBC00, 0xBC00], b, 0, P("v100")) == f32(-2.0)


def test_truncated_fused_fp16_output_zero_exponent():
    # fasi-28: 2^-24·2^-1 + 2^-24·2^-2 = 3·2^-26 → RNE fp16 → 2^-24
    u = models.unit("a100", output="fp16").params
    assert reference_dot_add([0x0001, 0x0001], [0x3800, 0x3400], 0, u) == 0x0001
    # c = +0 brings the zero exponent into the maximum. p1 = 2^-18·2^-7 = 2^-25 (exponent −14−7 =
    # −21) is a tie at the fp16 half-quantum; p2 = 2^-24·2^-21 = 2^-45 (exponent −28) breaks it
    # only if kept: cut at 2^(e_max − F) = 2^(−20−24) on A100 (e_zero −20) it is lost → tie → 0;
    # on H100 (e_zero −21, F 25) the cut is at 2^-46 → kept → 2^-24.
    a, b = [0x0040, 0x0001], [h16(2.0**-7), h16(2.0**-21)]
    assert reference_dot_add(a, b, 0, u) == 0x0000
    assert reference_dot_add(a, b, 0, models.unit("h100", output="fp16").params) == 0x0001
    assert reference_dot_add(a, b, 0, u._replace(zero_exponent=-30)) == 0x0001


def test_two_stage_hand_cases():
    mi300 = P("mi300")
    # c = −2^-30 floored at 2^(0−24) → −2^-24; 1 − 2^-24 exactly representable
    assert reference_dot_add([ONE16], [ONE16], f32(-(2.0**-30)), mi300) == 0x3F7FFFFF
    # products 1 and −1.5·2^-25: truncated toward zero at 2^-24 → 0 → result 1
    assert reference_dot_add([ONE16, h16(-1.5 * 2.0**-13)], [ONE16, h16(2.0**-12)], 0, mi300) == ONE32
    # all-zero products: c passes through exactly (subnormal kept)
    assert reference_dot_add([0] * 8, [0] * 8, 0x00000123, mi300) == 0x00000123


def test_fp64_rounds_in_fp64():
    # c = 2^25 (fp32 ulp 4), p1 = 2 (the fp32 midpoint), p2 = 2^-28 (a sticky bit). Exact: above
    # the midpoint → 2^25 + 4. fp64: 2^25 + 2 + 2^-28 is a tie at ulp64 = 2^-27 → 2^25 + 2 (even),
    # then fp32 tie → 2^25 (even).
    a, b = [h16(2.0), 0x0400], [ONE16, 0x0400]
    c = f32(2.0**25)
    assert reference_dot_add(a, b, c, P("mi100")) == f32(2.0**25 + 4)
    assert reference_dot_add(a, b, c, P("fp64")) == c
    # round_each_group=True, group 1: 2^25 + 2 → 2^25 (tie, even), then + 2^-28 → 2^25
    assert reference_dot_add(a, b, c, P("fp64", round_each_group=True)) == c
    # group 2, rounding after the group: same as the fp64 chain here
    assert reference_dot_add(a, b, c, P("fp64", round_each_group=True, group_size=2)) == c


def test_specials():
    inf, ninf, nan = 0x7C00, 0xFC00, 0x7E00
    for name in models.UNIT_NAMES:
        p = P(name)
        assert _is_nan32(reference_dot_add([nan], [ONE16], 0, p)), name
        assert _is_nan32(reference_dot_add([inf], [0], 0, p)), name
        assert _is_nan32(reference_dot_add([inf, ninf], [ONE16, ONE16], 0, p)), name
        assert reference_dot_add([inf, ONE16], [ONE16, ONE16], 0, p) == 0x7F800000, name
        assert reference_dot_add([ONE16], [ONE16], 0xFF800000, p) == 0xFF800000, name
        assert _is_nan32(reference_dot_add([inf], [ONE16], 0xFF800000, p)), name
        assert _is_nan32(reference_dot_add([ONE16], [ONE16], 0x7FC00000, p)), name
    # MI200: a subnormal factor is flushed before the multiply: inf · subnormal → inf · 0 = NaN
    assert _is_nan32(reference_dot_add([inf], [0x0001], 0, P("mi200")))
    assert reference_dot_add([inf], [0x0001], 0, P("mi100")) == 0x7F800000
    # fp16 output overflows to inf
    u = models.unit("h100", output="fp16").params
    assert reference_dot_add([0x7BFF], [0x7BFF], 0, u) == 0x7C00
    assert _is_nan16(reference_dot_add([nan], [ONE16], 0, u))


def test_overflow_modes_of_the_rounding():
    # an fp16-output fused-exact variant: 65504 + 16 is a tie between 65504 and 65536 (→ inf)
    p = UnitParams(family=Family.FUSED_EXACT, group_size=4, output_format=Format.FP16)
    assert reference_dot_add([h16(16.0)], [ONE16], 0x7BFF, p) == 0x7C00
    assert reference_dot_add([h16(15.0)], [ONE16], 0x7BFF, p) == 0x7BFF
    pz = p._replace(output_rounding=Rounding.RZ)
    assert reference_dot_add([0x7BFF], [0x7BFF], 0x7BFF, pz) == 0x7BFF
    pd = p._replace(output_rounding=Rounding.RD)
    assert reference_dot_add([0xFBFF], [0x7BFF], 0x7BFF, pd) == 0xFC00


# ------------------------------------------------------------------ published / predicted vectors

_AMD_COLUMNS = {
    "MI100_CDNA1_E-FDPA": lambda: P("mi100"),
    "MI200_CDNA2_FTZ-AddMul": lambda: P("mi200"),
    "MI300_CDNA3_TR-FDPA": lambda: P("mi300"),
    "exact_then_RNE_fp32": lambda: P("mi100", group_size=64),
    "sequential_fp32_fma_RNE": lambda: P("fma32"),
    "V100_T-FDPA_F23_L4": lambda: P("v100"),
    "A100_T-FDPA_F24_L8": lambda: P("a100"),
    "H100_T-FDPA_F25_L16": lambda: P("h100"),
}


@NEED_REF
def test_amd_model_predicted_vectors():
    data = json.loads((REF / "probe_vectors_amd_model_predicted.json").read_text())
    n = 0
    for v in data["vectors"]:
        a = [int(x, 16) for x in v["a_fp16_hex"]]
        b = [int(x, 16) for x in v["b_fp16_hex"]]
        c = int(v["c_fp32_hex"], 16)
        for col, want in v["predicted_fp32_hex"].items():
            got = reference_dot_add(a, b, c, _AMD_COLUMNS[col]())
            assert got == int(want, 16), f"{v['name']} {col}: got {got:#010x} want {want}"
            n += 1
    assert len(data["vectors"]) == 14 and n >= 14 * 3


_NV_HW = {"V100": "v100", "T4,A100": "a100", "A100": "a100", "T4 (Turing)": "t4", "H100": "h100", "B200": "b200"}


@NEED_REF
def test_nvidia_published_vectors():
    data = json.loads((REF / "probe_vectors.json").read_text())
    checked = 0
    for v in data:
        name = _NV_HW[v["hardware"]]
        fp16_out = v["output_format"] == "binary16"
        u = models.unit(name, output="fp16" if fp16_out else "fp32").params
        a = [int(x, 16) for x in v["a"]]
        b = [int(x, 16) for x in v["b"]]
        got = reference_dot_add(a, b, int(v["c"], 16), u)
        want = int(v["published_result"], 16)
        if fp16_out and want == 0 and "SIGN of the zero" in v.get("note", ""):
            assert got & 0x7FFF == 0, v["id"]
        else:
            assert got == want, f"{v['id']} ({v['note']}): got {got:#x} want {want:#x}"
        checked += 1
    assert checked == 64


# ------------------------------------------------------------------ operand formats beyond fp16


@pytest.mark.parametrize("name", ["bf16", "tf32", "e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz"])
def test_decode_input_matches_ml_dtypes(name):
    from exact_reference import decode_input

    from emu.operands import input_format, value_dtype

    fmt = input_format(name)
    if name == "tf32":  # fp32 patterns: a sample; the unit drops the 13 low fraction bits first
        rng = np.random.default_rng(2)
        bits = rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32)
        bits = np.concatenate([bits, np.array([0x7F800001, 0x7F802000, 0x00001FFF, 0x00002000], np.uint32)])
        values = (bits & np.uint32(0xFFFFE000)).view(np.float32)
    else:
        width = 16 if name == "bf16" else 8
        bits = np.arange(1 << width, dtype=np.uint16 if width == 16 else np.uint8)
        values = bits.view(value_dtype(fmt))
    with np.errstate(invalid="ignore"):
        vals = values.astype(np.float64)
    emin = {"bf16": -126, "tf32": -126, "e4m3": -6, "e5m2": -14, "e4m3fnuz": -7, "e5m2fnuz": -15}[name]
    for b, v in zip(bits.tolist(), vals.tolist()):
        d = decode_input(b, fmt)
        if np.isnan(v):
            assert d[0] == 2, hex(b)
        elif np.isinf(v):
            assert d[0] == 1 and d[2] == (v < 0), hex(b)
        else:
            assert d[0] == 0 and to_fraction(d) == Fraction(v), hex(b)
            assert d[3] == (emin if abs(v) < 2.0**emin else int(np.floor(np.log2(abs(v))))), hex(b)


def test_e8m13_output_truncates_to_13_fraction_bits():
    # ada e4m3: c = 1 + 2^-13 + 2^-14 keeps 1 + 2^-13 (RZ to E8M13); products zero
    p = models.unit("ada", input="e4m3").params
    assert reference_dot_add([0] * 16, [0] * 16, f32(1 + 2.0**-13 + 2.0**-14), p) == f32(1 + 2.0**-13)
    # below 2^-126 the grid is 2^-139: c = 2^-139 + 2^-149 → 2^-139
    assert reference_dot_add([0] * 16, [0] * 16, (1 << 10) + 1, p) == 1 << 10


def test_two_stage_clips_products_at_2_128():
    # mi300 bf16: 2^64·2^64 = 2^128 is +inf before stage 1, whatever c; a100 adds it to −FLT_MAX
    one = 0x3F80
    two64 = 0x5F80  # bf16 2^64
    a, b = [two64] + [0] * 7, [two64] + [0] * 7
    assert reference_dot_add(a, b, 0xFF7FFFFF, models.unit("mi300", input="bf16").params) == 0x7F800000
    assert reference_dot_add(a, b, 0xFF7FFFFF, models.unit("a100", input="bf16").params) == f32(2.0**104)
    # and RZ-FP32 overflows: 2^128 + 1·1 → +inf on a100
    a2, b2 = [two64, one] + [0] * 6, [two64, one] + [0] * 6
    assert reference_dot_add(a2, b2, 0, models.unit("a100", input="bf16").params) == 0x7F800000


def test_gtr_drops_a_far_c():
    p = models.unit("mi300", input="e4m3fnuz").params
    one = 0x40  # e4m3fnuz 1.0 (bias 8)
    a = [one] + [0] * 15  # one product, 1: e_max = 0, c floored at 2^-24 unless e_c < -25
    assert reference_dot_add(a, a, f32(2.0**-23), p) == f32(1 + 2.0**-23)
    # c = −2^-25 (e_c = −25) is kept and floors to −2^-24; c = −2^-26 is dropped
    assert reference_dot_add(a, a, f32(-(2.0**-25)), p) == 0x3F7FFFFF
    assert reference_dot_add(a, a, f32(-(2.0**-26)), p) == f32(1.0)
    # the same c on TR-FDPA (bf16, one sum) is never dropped
    pb = models.unit("mi300", input="bf16").params
    assert reference_dot_add([0x3F80] + [0] * 7, [0x3F80] + [0] * 7, f32(-(2.0**-26)), pb) == 0x3F7FFFFF
