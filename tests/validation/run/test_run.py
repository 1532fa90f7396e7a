"""Running suite tests through emulated kernels and validators (validation.run)."""

import numpy as np
import pytest

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


# --- validators compose; split-K atomics as an ensemble (issue 12) ---------------------------------


def _measured_line(run_set: str, gpu: str, kernel: str, flag: str, rng: str, test: str):
    """One measured verifier line of the 2022 study (skips without ../shared/reference)."""
    from reference_data import require

    from validation.verify.presets import parse_study_line

    path = require(
        "fp16_study_raw_results",
        f"verify_results_{run_set}_{gpu.upper()}",
        f"verify_f16_{kernel}_{flag}_rand{rng[1:]}.txt",
    )
    for text in path.read_text().splitlines():
        if text.strip() and text.rstrip().endswith(test) or f" {test} " in text:
            return parse_study_line(text)
    raise AssertionError(f"{test} not in {path}")


@pytest.mark.parametrize("validator, reproduces", [("cpu-acc4+flush", True), ("cpu-acc4", False)])
def test_the_study_fair3_mi200_validator_from_run_reproduces_a_measured_line(validator, reproduces):
    """fair_3 on MI200 validated with 'accumulate 4' and fp16 inputs < 2^-14 flushed; composed from
    the run API (the CLI's --validator takes the same text), it prints the measured line of
    KYXC_NHWC_NHWK5 (r0, xdlops, -pv) field for field. Without the flush it does not: the test can
    tell the validators apart."""
    from validation.verify.presets import study_line_of

    test = "conv2d_host_validation_f16_fwd_CHECK_KYXC_NHWC_NHWK5_f16"
    measured = _measured_line("fair_3", "mi200", "xdlops", "pv", "r0", test)
    r = run(
        test,
        hw="mi200",
        kernel="xdlops",
        validator=validator,
        rand_type="float",
        rand_min=-1,
        rand_max=1,
        seed=1,
        progress=False,
    )
    assert r.validator.key == validator and r.inputs_used["rand_type"] == "float"
    line = study_line_of(r.validation_output, r.kernel_output, "fair_3")
    assert line.n_exact == 102356 if reproduces else line.n_exact != 102356
    assert (line.fields() == measured.fields()) == reproduces


def test_composed_validator_errors_name_the_field_and_the_accepted_values():
    with pytest.raises(ValueError, match=r"validator: modifier 'foo' is not one of \+flush, \+inbounds"):
        run(SMALLEST[0], validator="cpu-acc4+foo")
    with pytest.raises(ValueError, match="backward-weight"):
        run(SMALLEST[0], validator="cpu-acc4+inbounds")  # a fwd test
    with pytest.raises(ValueError, match="rand_type"):
        run(SMALLEST[0], rand_type="gaussian")


def test_a_split_k_atomic_kernel_keeps_its_ensemble():
    """CHECK_ISSUE_71_4 (bwd_weight, xdlops, 64 partials per output) adds its split-K partials with fp32 atomics: run keeps
    the partials; the kernel output is their ascending order, the members are other orders of the
    same partials, and kernels without atomics have no ensemble."""
    test = "conv2d_host_validation_f16_bwd_CHECK_ISSUE_71_4"
    r = run(
        test,
        hw="mi200",
        kernel="xdlops",
        validator="cpu",
        rand_type="float",
        rand_min=-1,
        rand_max=1,
        seed=1,
        progress=False,
    )
    ens = r.ensemble
    assert ens is not None and ens.n_split >= 3 and ens.size == r.kernel_output.size
    np.testing.assert_array_equal(ens.ascending().view(np.uint32), r.kernel_fp32.view(np.uint32))
    members = np.stack(list(r.members(16))).astype(np.float32)
    assert members.shape == (16, ens.size)
    assert len({m.tobytes() for m in members}) > 1, "16 add orders never changed a bit"
    assert run(test, hw="mi200", kernel="nonxdlops", validator="cpu", progress=False).ensemble is None


def test_a_zero_column_terminal_still_shows_progress(monkeypatch, tmp_path):
    """Issue 30.9: a terminal reporting 0 columns gave tqdm a width of -1, and the bar printed
    nothing; it now falls back to a fixed width (COLUMNS when positive, else 80)."""
    import os
    import sys

    from validation import progress as runner  # the shared progress helpers

    monkeypatch.setattr(os, "get_terminal_size", lambda *a: os.terminal_size((0, 0)))
    monkeypatch.setattr(runner, "PROGRESS_DELAY_S", 0)
    monkeypatch.setenv("COLUMNS", "0")
    with open(tmp_path / "err", "w") as err:
        monkeypatch.setattr(sys, "stderr", err)
        assert runner.bar_width(err) == {"dynamic_ncols": False, "ncols": 80, "nrows": 24}
        bar = runner.progress_bar(10, True, "emulating", unit="col")
        for _ in range(10):
            bar.update(1)
        bar.refresh()
        bar.close()
    text = (tmp_path / "err").read_text()
    assert "emulating" in text and "10.0/10.0" in text
    monkeypatch.setenv("COLUMNS", "120")
    with open(tmp_path / "err") as fh:
        assert runner.bar_width(fh)["ncols"] == 120
