"""Kernels are parallel over outputs only: the bits must not depend on the thread count."""

import numba
import numpy as np
import pytest

import emu
import models
from tests.adversarial import all_families, concat


@pytest.mark.parametrize("name", models.UNIT_NAMES)
def test_same_bits_for_one_and_two_threads(name):
    unit = models.unit(name)
    rng = np.random.default_rng(7)
    a, b, c, _ = concat(all_families(rng, 40, 2 * unit.group_size + 3))
    gemm_a = rng.uniform(-1, 1, (9, 70)).astype(np.float16)
    gemm_b = rng.uniform(-1, 1, (70, 333)).astype(np.float16)
    before = numba.get_num_threads()
    results = []
    try:
        for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
            numba.set_num_threads(threads)
            results.append(
                (
                    emu.dot_add(a, b, c.view(np.float32), unit).view(np.uint32),
                    emu.gemm(gemm_a, gemm_b, None, unit).view(np.uint32),
                )
            )
    finally:
        numba.set_num_threads(before)
    (d1, g1), (d2, g2) = results
    np.testing.assert_array_equal(d1, d2)
    np.testing.assert_array_equal(g1, g2)
