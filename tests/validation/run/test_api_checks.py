"""The Python API refuses what it cannot answer, in Python terms (issues 30 and 31): uint16 arrays
under an fp16 hint are bit patterns in verify/compare as everywhere else; float arrays of fp16
values warn as the command line does; None, negative counts, fractional chunk sizes and bool
arrays are refused with a TypeError/ValueError naming the argument."""

import warnings

import numpy as np
import pytest

from validation.configs import ConfigError
from validation.identify import Rows
from validation.identify.search import identify
from validation.metrics import compare
from validation.run import run
from validation.verify import verify

FWD = "conv2d_host_validation_f16_fwd_CHECK_KYXC_NHWC_NHWK5_f16"


def _pair():
    rng = np.random.default_rng(3)
    v = rng.uniform(-2, 2, 256).astype(np.float32)
    k = v.astype(np.float16)
    return v, k


def test_uint16_arrays_under_an_fp16_hint_are_bit_patterns_in_verify_and_compare():
    v, k = _pair()
    as_values = compare(v, k, dtype_hint="fp16")
    as_patterns = compare(v, k.view(np.uint16), dtype_hint="fp16")
    assert as_patterns.metric("rms") == as_values.metric("rms")
    assert as_patterns.metric("rms") < 1e-3  # read as integers it was ~10^4
    assert verify(v, k.view(np.uint16), "rocmlir", dtype_hint="fp16").passed == verify(v, k, "rocmlir").passed


def test_verify_warns_on_float_arrays_that_hold_fp16_values_as_the_cli_does():
    """Issue 30.4: it passed on fp16 arrays and failed on the same values as float64, with no note."""
    v, k = _pair()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        verify(v, k, "rocmlir")  # fp16: no warning
        verify(v, v.astype(np.float64) + 1e-9, "rocmlir")  # not fp16 values: no warning
    with pytest.warns(UserWarning, match="every value is an fp16 value.*dtype_hint='fp16'"):
        verify(v.astype(np.float64), k.astype(np.float64), "rocmlir")
    assert (
        verify(v.astype(np.float64), k.astype(np.float64), "rocmlir", dtype_hint="fp16").passed
        == verify(v, k, "rocmlir").passed
    )


def test_bool_arrays_and_negative_counts_are_refused():
    v, k = _pair()
    with pytest.raises(TypeError, match="kernel: expected an array of numbers"):
        compare(v, k > 0)
    with pytest.raises(TypeError, match="validation"):
        verify(v > 0, k, "rocmlir")
    with pytest.raises(ValueError, match="^top:"):
        verify(v, k, "rocmlir", top=-1)
    with pytest.raises(ValueError, match="^top:"):
        compare(v, k, top=1.5)


def test_identify_and_rows_refuse_none_and_negative_counts():
    with pytest.raises(TypeError, match="^Rows: a must be a numpy array"):
        Rows(None, None, None, None)
    with pytest.raises(TypeError, match="^rows: expected validation.identify.Rows"):
        identify(None)
    a = np.full((1, 16), 0x3C00, np.uint16)
    rows = Rows(a, a, np.zeros(1, np.uint32), np.array([np.float32(16).view(np.uint32)]))
    with pytest.raises(ValueError, match="^next_count:"):
        identify(rows, next_count=-1)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"rand_min": -0.5}, "^rand_min: -0.5 is not a whole number"),
        ({"rand_min": 5, "rand_max": -5}, r"^rand_min/rand_max: the range \[5, -5\] is inverted"),
        ({"seed": -1}, "^seed: -1 is outside"),
        ({"n_chunk": 1.5}, "^n_chunk: a whole number"),
        ({"n_chunk": 0}, "^n_chunk: a whole number"),
        # one bound from the call, the other from the config's own -rand_max (4 in FWD's suite
        # default or below): the range is still named in Python terms
        ({"rand_min": 30000}, r"^rand_min/rand_max: the range \[30000, "),
    ],
)
def test_run_answers_in_python_terms_before_any_work(kwargs, needle):
    """Issue 30.9: run(rand_min=-0.5) said "--rand-min: …"; n_chunk=1.5 was cut to 1."""
    with pytest.raises(ConfigError, match=needle):
        run(FWD, progress=False, **kwargs)
