"""The rocMLIR 2022 harness inputs: glibc ``rand`` against the C library itself, the float and
integer generators against scalar re-computations (and, where a C compiler exists, against the
expression compiled by it), the truncating fp16 conversion, the fill order and re-seeding."""

from __future__ import annotations

import ctypes
import platform
import shutil
import struct
import subprocess
import sys
import warnings

import numpy as np
import pytest

from emu.conv import ConvProblem
from emu.rounding import fp32_to_fp16_truncate
from models.harness import (
    RAND_MAX,
    GlibcRand,
    fixed_pattern,
    harness_float_tensor,
    harness_float_values,
    harness_inputs,
    harness_int_values,
    harness_range,
    tensor_layout_shape,
    to_fp16_truncate,
)

IS_GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
needs_glibc = pytest.mark.skipif(not IS_GLIBC, reason="needs the GNU C library (Linux glibc) to compare rand() with")


@pytest.fixture(scope="module")
def libc():
    lib = ctypes.CDLL(None)
    lib.srand.argtypes = [ctypes.c_uint]
    lib.srand.restype = None
    lib.rand.argtypes = []
    lib.rand.restype = ctypes.c_int
    return lib


def c_rand_sequence(libc, seed: int, n: int) -> np.ndarray:
    libc.srand(seed)
    rand = libc.rand
    return np.fromiter((rand() for _ in range(n)), dtype=np.int32, count=n)


# ------------------------------------------------------------------------------------------------
# glibc rand()


@needs_glibc
@pytest.mark.parametrize("seed", [1, 2, 3, 12345])
def test_rand_equals_glibc_100k(libc, seed):
    want = c_rand_sequence(libc, seed, 120_000)
    gen = GlibcRand(seed)
    # in uneven pieces: the stream must continue across calls
    got = np.concatenate([gen.rand_array(1), gen.rand_array(30), gen.rand_array(0), gen.rand_array(119_969)])
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


@needs_glibc
@pytest.mark.parametrize("seed", [0, 4, 127773, 2**31 - 1, 2**31, 2**31 + 12345, 2**32 - 1])
def test_rand_equals_glibc_edge_seeds(libc, seed):
    """srand(0) acts as srand(1); seeds >= 2^31 go through glibc's int32 Schrage steps."""
    np.testing.assert_array_equal(GlibcRand(seed).rand_array(5000), c_rand_sequence(libc, seed, 5000))


@needs_glibc
def test_rand_scalar_and_reseed(libc):
    g = GlibcRand(7)
    first = [g.rand() for _ in range(5)]
    g.srand(7)
    assert [g.rand() for _ in range(5)] == first == list(c_rand_sequence(libc, 7, 5))


def test_rand_known_values():
    """The classic first outputs of glibc rand() after srand(1) (no C library needed)."""
    assert list(GlibcRand(1).rand_array(3)) == [1804289383, 846930886, 1681692777]
    v = GlibcRand(1).rand_array(10_000)
    assert v.min() >= 0 and v.max() <= RAND_MAX


# ------------------------------------------------------------------------------------------------
# The float and integer generators


def _f32(x: float) -> float:
    """C's (float) cast of a double: round to nearest even (via struct)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def scalar_float_values(rands, lo, hi):
    out = []
    for r in rands:
        d = (hi - lo) * float(int(r)) / float(RAND_MAX)  # int * double / double, in double
        out.append(_f32(_f32(d) + _f32(float(lo))))  # float + float: exact in double, one RNE
    return np.array(out, dtype=np.float32)


@needs_glibc
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("lo,hi", [(-1, 1), (-10, 10), (1, 5), (5, 10), (1, 3), (3, -2)])
def test_float_values_equal_scalar_c_semantics(libc, seed, lo, hi):
    """The study's ranges r0 [-1,1], r1 [-10,10], r4 [1,5], r5 [5,10], the later [1,3], and a
    reversed range, for seeds 1, 2, 3."""
    n = 10_000
    want = scalar_float_values(c_rand_sequence(libc, seed, n), lo, hi)
    got = harness_float_values(n, seed, lo, hi)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@needs_glibc
@pytest.mark.parametrize("lo,hi", [(-5, 5), (0, 3), (7, 2)])
def test_int_values_equal_c_semantics(libc, lo, hi):
    n = 20_000
    rands = c_rand_sequence(libc, 3, n)
    span = hi - lo
    want = []
    for r in rands:
        m = abs(int(r)) % abs(span)  # C: the remainder takes the dividend's sign (r >= 0)
        want.append(float(np.int16(m + lo)))
    np.testing.assert_array_equal(harness_int_values(n, 3, lo, hi), np.array(want, np.float32))


C_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
  unsigned seed = (unsigned)strtoul(argv[1], 0, 10);
  short lo = (short)atoi(argv[2]), hi = (short)atoi(argv[3]);
  long n = atol(argv[4]);
  srand(seed);
  for (long i = 0; i < n; ++i) {
    float v = (float)((hi - lo) * (double)rand() / (double)RAND_MAX) + (float)lo;
    unsigned u; memcpy(&u, &v, 4); printf("%08x\n", u);
  }
  return 0;
}
"""


@needs_glibc
@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) to build the reference generator")
def test_float_values_equal_compiled_c(tmp_path):
    src = tmp_path / "gen.c"
    src.write_text(C_PROGRAM)
    exe = tmp_path / "gen"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(src)], check=True, capture_output=True)
    for seed, lo, hi in [(1, -1, 1), (2, -10, 10), (12345, 1, 5), (1, 5, 10)]:
        out = subprocess.run(
            [str(exe), str(seed), str(lo), str(hi), "50000"], check=True, capture_output=True, text=True
        )
        want = np.array([int(w, 16) for w in out.stdout.split()], dtype=np.uint32)
        got = harness_float_values(50_000, seed, lo, hi).view(np.uint32)
        np.testing.assert_array_equal(got, want)


def test_min_equal_max_gives_tenth_or_min():
    assert np.all(harness_float_values(10, 5, 1, 1) == np.float32(1) * np.float32(0.1))
    assert np.all(harness_int_values(10, 5, 1, 1) == 1)


def test_ranges_and_bounds():
    assert harness_range("float") == (-1, 1)
    assert harness_range("int") == (-5, 5)
    assert harness_range("float", 1, 5) == (1, 5)
    with pytest.raises(ValueError, match="rand_type"):
        harness_range("double")
    with pytest.raises(ValueError, match="rand_min"):
        harness_float_values(3, 1, -40000, 1)


def test_seed_zero_is_time_and_warns():
    with pytest.warns(UserWarning, match="cannot be reproduced"):
        v = harness_float_values(100, 0, -1, 1)
    assert v.shape == (100,)
    assert np.all((v >= -1) & (v <= 1))


# ------------------------------------------------------------------------------------------------
# fp16 conversion and patterns


def test_fp16_truncation_not_rounding():
    vals = harness_float_values(50_000, 1, -10, 10)
    h = harness_float_tensor(50_000, 1, -10, 10, dtype="f16")
    np.testing.assert_array_equal(harness_float_tensor(50_000, 1, -10, 10), vals)
    assert h.dtype == np.float16
    np.testing.assert_array_equal(h.view(np.uint16), fp32_to_fp16_truncate(vals))
    np.testing.assert_array_equal(to_fp16_truncate(vals), fp32_to_fp16_truncate(vals))
    back = h.astype(np.float32)
    assert np.all(np.abs(back) <= np.abs(vals))  # toward zero
    assert np.any(back != vals.astype(np.float16).astype(np.float32))  # differs from RNE somewhere


def test_fixed_pattern():
    p = fixed_pattern(7)
    assert p.dtype == np.float16
    assert list(p.astype(float)) == [0.5, -1.0, 0.75, 0.5, -1.0, 0.75, 0.5]
    assert fixed_pattern(4, "f32").dtype == np.float32


# ------------------------------------------------------------------------------------------------
# Whole-problem inputs

SMALL = ConvProblem(
    direction="fwd",
    n=2,
    c=4,
    h=5,
    w=6,
    k=6,
    y=3,
    x=2,
    groups=2,
    pad_h=(1, 1),
    in_layout="nhwgc",
    fil_layout="gkyxc",
    out_layout="nhwgk",
)


def test_layout_shapes():
    assert tensor_layout_shape(SMALL, "filter") == ("gkyxc", (2, 3, 3, 2, 2))
    assert tensor_layout_shape(SMALL, "input") == ("nhwgc", (2, 5, 6, 2, 2))
    assert tensor_layout_shape(SMALL, "output") == ("nhwgk", (2, SMALL.out_h, SMALL.out_w, 2, 3))
    plain = ConvProblem(direction="fwd", n=1, c=4, h=3, w=3, k=6, y=1, x=1, groups=2)
    assert tensor_layout_shape(plain, "filter") == ("gkcyx", (2, 3, 2, 1, 1))  # 4 letters: g inserted
    assert tensor_layout_shape(plain, "input") == ("ngchw", (1, 2, 2, 3, 3))


def test_inputs_reseed_per_tensor_and_fill_in_memory_order():
    ins = harness_inputs(SMALL, seed=1, rand_min=-1, rand_max=1, rand_type="float")
    assert list(ins) == ["filter", "input"]
    flat = harness_float_tensor(2 * 5 * 6 * 2 * 2, 1, -1, 1, dtype="f16")
    np.testing.assert_array_equal(ins["input"].reshape(-1).view(np.uint16), flat.view(np.uint16))
    # the filter re-seeds: its values are the first ones of the same sequence
    n_f = ins["filter"].size
    np.testing.assert_array_equal(ins["filter"].reshape(-1).view(np.uint16), flat[:n_f].view(np.uint16))


@pytest.mark.parametrize(
    "direction,names",
    [("fwd", ["filter", "input"]), ("bwd_data", ["filter", "output"]), ("bwd_weight", ["input", "output"])],
)
def test_inputs_per_direction(direction, names):
    p = ConvProblem(direction=direction, n=1, c=2, h=4, w=4, k=3, y=3, x=3)
    ins = harness_inputs(p, seed=2, rand_type="float")
    assert list(ins) == names
    for name, arr in ins.items():
        assert arr.shape == tensor_layout_shape(p, name)[1]
        assert arr.dtype == np.float16


def test_inputs_modes():
    p = ConvProblem(direction="fwd", n=1, c=2, h=3, w=3, k=2, y=1, x=1)
    fixed = harness_inputs(p, seed=None)
    assert list(fixed["input"].reshape(-1)[:3].astype(float)) == [0.5, -1.0, 0.75]
    ones = harness_inputs(p, seed="none", rand_type="int")
    assert np.all(ones["filter"] == 1)
    tenth = harness_inputs(p, seed="none", rand_type="float")
    assert np.all(tenth["input"].view(np.uint16) == fp32_to_fp16_truncate(np.float32(0.1) * np.ones(1, np.float32))[0])
    ints = harness_inputs(p, seed=1)  # miopen-gen's default rand_type is int: [-5, 5)
    v = ints["input"].astype(np.float32)
    assert np.all(v == np.round(v)) and v.min() >= -5 and v.max() <= 4
    side = harness_inputs(p, seed=1, rand_type="float", rand_side="input")
    assert np.all(side["filter"].astype(np.float32) == np.float32(np.float16(0.0999755859375)))
    assert len(np.unique(side["input"])) > 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        harness_inputs(p, seed=5, rand_type="float")  # no warning for a real seed
    with pytest.warns(UserWarning, match="time"):
        harness_inputs(p, seed=0, rand_type="float")


def test_bf16_tensors_keep_the_top_16_bits_of_the_float_draw():
    """-t bf16: float_to_bfloat16 keeps the float's top 16 bits (truncation toward zero), not the
    round-to-nearest of ml_dtypes' cast. Checked by its definition on the harness's own float32
    draws: the bf16 value has the float's sign, is no larger in magnitude, and lies within one
    bf16 ulp of it; and somewhere it differs from the rounded cast (so the test can tell them apart)."""
    import ml_dtypes

    from models.harness import harness_float_tensor, harness_float_values

    x = harness_float_values(4000, 7, -10, 10).astype(np.float64)
    b = harness_float_tensor(4000, 7, -10, 10, dtype="bf16")
    assert b.dtype == ml_dtypes.bfloat16
    v = b.astype(np.float64)
    nonzero = x != 0
    assert np.all(np.sign(v[nonzero]) == np.sign(x[nonzero]))
    assert np.all(np.abs(v) <= np.abs(x))
    ulp = 2.0 ** (np.floor(np.log2(np.abs(x[nonzero]))) - 7)
    assert np.all(np.abs(x[nonzero]) - np.abs(v[nonzero]) < ulp)
    rounded = x.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)
    assert np.count_nonzero(rounded != v) > 1000
