"""Running suite tests through emulated kernels and validators (validation.run)."""

import numpy as np
import pytest

from emu.conv import ConvProblem
from models import kernels as kernel_models
from validation.run import run
from validation.suites import suite_config, suite_entries

ENTRIES = suite_entries()


def _macs(entry):
    return entry.gemm_m * entry.gemm_k * (entry.gemm_n or entry.n_out_elements // max(entry.gemm_m, 1))


SMALLEST = [e.name for e in sorted(ENTRIES, key=_macs)[:8]]


@pytest.mark.parametrize("name", [e.name for e in ENTRIES])
def test_nonxdlops_and_gpu_validation_have_the_same_arithmetic(name):
    """GPU validation is the non-xdlops kernel on fp32 copies (exact): same units and orders, so
    the same bits on every suite test (13,268 measured rows show 0 difference)."""
    problem = suite_config(name).problem
    kernel = kernel_models.kernel("rocmlir-2022-nonxdlops", hw="mi200").plan(problem)
    gpu = kernel_models.kernel("gpu-validation", hw="mi200").plan(problem)
    assert len(kernel) == len(gpu)
    for k, g in zip(kernel, gpu):
        assert k.unit.params == g.unit.params
        assert k.order.k_order == g.order.k_order and k.order.pad_k == g.order.pad_k
        assert k.order.split_k == g.order.split_k


@pytest.mark.parametrize("name", SMALLEST)
def test_nonxdlops_equals_gpu_validation_bit_for_bit(name):
    r = run(name, hw="mi200", kernel="nonxdlops", validator="gpu", progress=False)
    np.testing.assert_array_equal(r.kernel_fp32.view(np.uint32), r.validation_output.view(np.uint32))
    assert r.kernel_output.dtype == np.float16
    np.testing.assert_array_equal(r.kernel_output, r.kernel_fp32.astype(np.float16))


@pytest.mark.parametrize("hw", ["mi100", "mi200", "mi300"])
def test_xdlops_run_is_close_to_cpu_validation(hw):
    name = SMALLEST[0]
    r = run(name, hw=hw, kernel="xdlops", validator="cpu", progress=False)
    ref = r.validation_output.astype(np.float64)
    err = np.abs(r.kernel_output.astype(np.float64) - ref)
    # fp16 output rounding dominates: within one fp16 ulp plus accumulation error
    assert np.all(err <= np.maximum(np.abs(ref), 2.0**-14) * 2.0**-10 + 1e-3)


def test_mi200_differs_from_mi100_only_through_its_arithmetic():
    name = SMALLEST[3]  # 102,400 outputs, gemmK 36: inputs in [-1, 1] include fp16 subnormals
    a = run(name, hw="mi100", kernel="xdlops", validator="cpu", rand_min=-1, rand_max=1, progress=False)
    b = run(name, hw="mi200", kernel="xdlops", validator="cpu", rand_min=-1, rand_max=1, progress=False)
    np.testing.assert_array_equal(a.validation_output, b.validation_output)  # same inputs, same CPU validation
    assert not np.array_equal(a.kernel_fp32, b.kernel_fp32)  # subnormal flush and pairwise rounding


def test_bad_choices_are_value_errors_naming_the_field():
    with pytest.raises(ValueError, match="hw"):
        run(SMALLEST[0], hw="mi999")
    with pytest.raises(ValueError, match="validator"):
        run(SMALLEST[0], validator="gpu2")
    with pytest.raises(ValueError, match="kernel"):
        run(SMALLEST[0], kernel="tensorcore")
