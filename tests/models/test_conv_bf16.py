"""bf16 convolutions (-t bf16) bit for bit: the kernel and validator models on a tiny forward
convolution against an independent oracle.

The oracle builds each output's gemmK vectors by direct convolution indexing (filter kcyx: the
products in (c, y, x) order, padding reading +0; nothing of emu.conv's gathers), puts them in
the model's accumulation order (its declared GEMM order: permutation and gemmK padding), and
computes every output with tests/exact_reference.py's ``reference_dot_add`` (each unit's rules
written out by hand on exact integers). The inputs are adversarial bf16 patterns: a wide
exponent span, subnormals (which MI200's bf16_1k unit flushes) and signed zeros, on which the five
models give pairwise different bits (3 to 9 of the 48 outputs), so a wrong unit or order fails.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from exact_reference import reference_dot_add  # noqa: E402  (tests/ is on the path, conftest.py)

from emu.conv import ConvGemm, ConvProblem
from models import kernels as K

#: N 1, C 2, 4×4 input, K 3, 3×3 filter, padding 1: gemmK = 18 (no multiple of 4 or 8: padded)
PROBLEM = ConvProblem("fwd", 1, 2, 4, 4, 3, 3, 3, pad_h=(1, 1), pad_w=(1, 1))

MODELS = [
    ("rocmlir-2022-xdlops", "mi100"),  # exact fused dot of 2 bf16 products
    ("rocmlir-2022-xdlops", "mi200"),  # bf16_1k: FTZ pairwise tree of 4
    ("rocmlir-2022-xdlops", "mi300"),  # two-stage truncated sums
    ("rocmlir-2022-nonxdlops", "mi200"),  # fp32 FMA, ascending gemmK
    ("cpu-validation-2022", None),  # fp64 accumulator, rounded once (xdlops run)
]


def _bf16_patterns(rng, shape) -> np.ndarray:
    """Random bf16 patterns: exponent fields 0 (zeros, subnormals) to 150, random signs and
    fractions; a few exact zeros of both signs."""
    n = int(np.prod(shape))
    exp = rng.integers(100, 151, n)
    exp[rng.random(n) < 0.15] = 0  # subnormals (or zeros)
    bits = (rng.integers(0, 2, n) << 15) | (exp << 7) | rng.integers(0, 128, n)
    bits[:2] = [0x0000, 0x8000]
    return bits.astype(np.uint16).reshape(shape)


def _gemm_vectors(p: ConvProblem, x: np.ndarray, w: np.ndarray):
    """Per output (n, k, ho, wo) in the output's nkhw memory order: the filter row and the input
    column of its gemmK products, (c, y, x) order, as bf16 patterns (padding: +0)."""
    xs = x.reshape(p.n, p.c, p.h, p.w)
    ws = w.reshape(p.k, p.c, p.y, p.x)
    rows, cols = [], []
    for n in range(p.n):
        for k in range(p.k):
            for ho in range(p.out_h):
                for wo in range(p.out_w):
                    a, b = [], []
                    for c in range(p.c):
                        for y in range(p.y):
                            for xx in range(p.x):
                                h, wi = ho + y - p.pad_h[0], wo + xx - p.pad_w[0]
                                inside = 0 <= h < p.h and 0 <= wi < p.w
                                a.append(int(ws[k, c, y, xx]))
                                b.append(int(xs[n, c, h, wi]) if inside else 0)
                    rows.append(a)
                    cols.append(b)
    return rows, cols


@pytest.mark.parametrize("name, hw", MODELS, ids=[f"{n}@{h}" for n, h in MODELS])
def test_bf16_conv_is_the_unit_row_by_row(name, hw):
    rng = np.random.default_rng(29)
    x = _bf16_patterns(rng, PROBLEM.tensor_shape("input"))
    w = _bf16_patterns(rng, PROBLEM.tensor_shape("filter"))
    model = K.kernel(name, hw or "mi200", input="bf16", validating="xdlops")
    (gemm,) = model.plan(PROBLEM)
    assert gemm.unit.params.input_format == 1 and gemm.order.split_k == 1  # bf16, one chain
    op = ConvGemm(PROBLEM, x=x.view(ml_dtypes.bfloat16), w=w.view(ml_dtypes.bfloat16))
    (got,) = op.compute([model.arithmetic(PROBLEM)])

    seq = gemm.order.sequence(PROBLEM.c * PROBLEM.y * PROBLEM.x)
    rows, cols = _gemm_vectors(PROBLEM, x, w)
    expected = np.array(
        [
            reference_dot_add(
                [a[i] if i >= 0 else 0 for i in seq], [b[i] if i >= 0 else 0 for i in seq], 0, gemm.unit.params
            )
            for a, b in zip(rows, cols)
        ],
        dtype=np.uint32,
    )
    differ = np.flatnonzero(got.view(np.uint32) != expected)
    assert differ.size == 0, [
        (int(i), f"{int(got.view(np.uint32)[i]):#010x}", f"{int(expected[i]):#010x}") for i in differ[:5]
    ]


def test_bf16_tensors_need_bf16_units():
    """An fp16 unit on bf16 tensors (or the reverse) is refused, naming both formats."""
    rng = np.random.default_rng(1)
    x = _bf16_patterns(rng, PROBLEM.tensor_shape("input")).view(ml_dtypes.bfloat16)
    w = _bf16_patterns(rng, PROBLEM.tensor_shape("filter")).view(ml_dtypes.bfloat16)
    op = ConvGemm(PROBLEM, x=x, w=w)
    assert op.format == "bf16" and op.a().dtype == ml_dtypes.bfloat16
    with pytest.raises(ValueError, match="units multiply fp16; the tensors are bf16"):
        op.compute([K.kernel("rocmlir-2022-nonxdlops").arithmetic(PROBLEM)])
    with pytest.raises(ValueError, match="mixed element formats bf16, fp16"):
        ConvGemm(PROBLEM, x=x, w=np.zeros(PROBLEM.tensor_shape("filter"), np.float16))
