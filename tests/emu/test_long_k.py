"""Kernels over a long K (backward-weight GEMMs: K up to millions) against a plain numpy loop.

The simple kernels (fp32 FMA chains, fp64 accumulation) walk K in blocks with every row of a
task per block, so that B's block stays in cache. Each output must still add its products
strictly in k order, with the fp64 rounding to fp32 at every group end counted from k = 0, across
block, row-block and lane-block boundaries. The reference: numpy, one k at a time over all
outputs, bit for bit.
"""

import dataclasses

import numpy as np
import pytest

import emu
from models import kernels as kernel_models
from models import unit


def _operands(seed, M, N, K):
    rng = np.random.default_rng(seed)
    # magnitudes spread over 2^-12 … 2^12 so that fp32 rounding acts at every step
    scale = np.float32(2.0) ** rng.integers(-6, 7, size=(M, K)).astype(np.float32)
    a = (rng.uniform(-1, 1, (M, K)).astype(np.float32) * scale).astype(np.float16)
    b = (
        rng.uniform(-1, 1, (K, N)).astype(np.float32)
        * np.float32(2.0) ** rng.integers(-6, 7, size=(K, N)).astype(np.float32)
    ).astype(np.float16)
    c = rng.uniform(-4, 4, (M, N)).astype(np.float32)
    return a, b, c


def _reference_fma32(a, b, c):
    acc = c.copy()
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    for k in range(a.shape[1]):
        acc = acc + a32[:, k : k + 1] * b32[k : k + 1, :]  # fp16·fp16 is exact in fp32: one rounding
    return acc


def _reference_fp64(a, b, c, group, each):
    acc = c.astype(np.float64)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    K = a.shape[1]
    for k in range(K):
        acc = acc + a64[:, k : k + 1] * b64[k : k + 1, :]
        if each and (k + 1) % group == 0 and k + 1 < K:
            acc = acc.astype(np.float32).astype(np.float64)
    return acc.astype(np.float32)


SHAPES = [(37, 300, 1000), (17, 129, 2049), (1, 5, 777)]


@pytest.mark.parametrize("M,N,K", SHAPES)
def test_fma32_long_k(M, N, K):
    a, b, c = _operands(M + K, M, N, K)
    got = emu.dot_add(a[:, None, :], b.T[None], c, unit("fma32"))
    assert np.array_equal(got.view(np.uint32), _reference_fma32(a, b, c).view(np.uint32))


@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize(
    "name,validating", [("cpu-validation-2022", "nonxdlops"), ("cpu-validation-2022", "xdlops"), ("cpu-acc4", None)]
)
def test_fp64_validators_long_k(M, N, K, name, validating):
    u = kernel_models.kernel(name, validating=validating).unit if validating else kernel_models.kernel(name).unit
    p = u.params
    a, b, c = _operands(M * 7 + K, M, N, K)
    got = emu.dot_add(a[:, None, :], b.T[None], c, u)
    want = _reference_fp64(a, b, c, p.group_size, bool(p.round_each_group))
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize("group", [1, 3, 4, 6])
def test_fp64_round_each_group_long_k(M, N, K, group):
    """Group 1 runs as the FMA family (double rounding innocuous), groups 3 and 6 do not divide
    the kernel's K block of 256: the group ends must still fall every ``group`` k from k = 0."""
    u = dataclasses.replace(unit("fp64"), group_size=group, round_each_group=True)
    a, b, c = _operands(M * 3 + K + group, M, N, K)
    got = emu.dot_add(a[:, None, :], b.T[None], c, u)
    want = _reference_fp64(a, b, c, group, True)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_fp64_rounding_every_product_in_rne_dispatches_to_the_fma_family():
    """``kernel_params`` maps an fp64 unit that rounds to fp32 in RNE after every product to the
    FMA family, and no other unit. Both kernels, called directly on adversarial dot products
    (subnormals, cancellation, fp32 ties, far exponents, overflow, NaN/inf, signed zeros), give
    the same bits: the double rounding is innocuous."""
    from adversarial import all_families, concat

    from emu.dot import decode_operands
    from emu.kernels import KERNELS
    from emu.units import Family, Rounding, kernel_params

    p = dataclasses.replace(unit("fp64"), group_size=1, round_each_group=True).params
    assert p.family == Family.FP64 and p.output_rounding == Rounding.RNE
    assert kernel_params(p) == p._replace(family=Family.FMA)
    for other in (
        p._replace(output_rounding=Rounding.RZ),
        p._replace(group_size=3),
        p._replace(round_each_group=False),
        unit("fma32").params,
        unit("mi200").params,
    ):
        assert kernel_params(other) is other
    a_bits, b_bits, c_bits, _ = concat(all_families(np.random.default_rng(5), 64, 40))
    n, K = a_bits.shape
    A = decode_operands(a_bits, False).T[None].copy()  # (1, K, n): one a-vector per output
    B = decode_operands(b_bits, False).T.copy()  # (K, n)
    C = c_bits.view(np.float32).reshape(1, n)
    outs = []
    for family in (Family.FP64, Family.FMA):
        out = np.empty((1, n), np.float32)
        KERNELS[family](A, B, C, out, np.asarray(p._replace(family=family), np.int64))
        outs.append(out.view(np.uint32))
    assert np.array_equal(outs[0], outs[1])
    assert np.array_equal(emu.dot.run_kernel(p, A, B, C).view(np.uint32), outs[0])
