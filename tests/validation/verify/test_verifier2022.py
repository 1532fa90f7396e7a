"""validation.verify.study2022: the run sets, the study interval, and the fast path over differing
elements (its result against the full comparison's, and the accumulator's add_equal)."""

import numpy as np
import pytest

from validation import metrics
from validation.metrics import Comparison, compare
from validation.verify import presets as verifier
from validation.verify import study2022 as verifier2022
from validation.verify.study2022 import (
    STUDY_RUN_SETS,
    compare_differing,
    differing_elements,
    format_study_line,
    resolve_study_quirks,
    study_interval,
    study_line,
    study_line_of,
)


def test_public_names_are_re_exported_where_callers_find_them():
    for name in (
        "study_line_of",
        "format_study_line",
        "StudyLine",
        "StudyTail",
        "parse_study_line",
        "study_line",
        "STUDY_RUN_SETS",
        "resolve_study_quirks",
    ):
        assert getattr(verifier, name) is getattr(verifier2022, name)
    for name in ("resolve_study_quirks", "StudyQuirks", "STUDY_RUN_SETS",
                 "STUDY_REL_OLD_THRESHOLD"):  # fmt: skip
        assert not hasattr(metrics, name), "the metrics receive the 2022 rules, they do not import them"
    assert isinstance(STUDY_RUN_SETS["fair_3"], metrics.StudyPolicy)


def test_run_sets():
    assert resolve_study_quirks(None) is None
    q = resolve_study_quirks("fair_1")
    assert resolve_study_quirks(q) is q is STUDY_RUN_SETS["fair_1"]
    assert (q.line_format, q.epsilon_rule, q.rel_old_signed) == ("A", "binade_below", True)
    assert {r: STUDY_RUN_SETS[r].epsilon_rule for r in ("fair_2", "fair_3", "fair_rand0")} == {
        "fair_2": "binade_below",
        "fair_3": "ulp",
        "fair_rand0": "ulp",
    }
    with pytest.raises(ValueError, match="fair_1, fair_2, fair_3, fair_rand0"):
        resolve_study_quirks("fair_9")


def test_study_interval():
    m = np.array([0.0, 2**-24, 1.0, 1.5, 65504.0, 65536.0, 65537.0, np.inf, np.nan], np.float32)
    ulp = study_interval(m, "ulp")
    below = study_interval(m, "binade_below")
    assert ulp.dtype == np.float32
    assert list(ulp[:6] * 2**24) == [1, 1, 2**14, 2**14, 2**29, 2**30]
    assert list(below[:6] * 2**24) == [1, 1, 2**13, 2**14, 2**29, 2**29]
    assert list(ulp[6:]) == list(below[6:]) == [0, 0, 0]  # above 2^16, inf, NaN: 0 (ε = inf)


def _pair(rng, n, k_dtype=np.float16):
    v = (rng.standard_normal(n) * 8).astype(np.float32)
    k = v.astype(np.float16)
    flip = rng.random(n) < 0.05
    k[flip] = (k[flip].astype(np.float32) * np.float32(1.002)).astype(np.float16)
    v[:6] = [0.0, -0.0, np.nan, 70000.0, 1.0 + 2**-12, -3.0]
    k[:6] = [-0.0, 0.0, np.nan, np.inf, 1.0, 1000.0]
    return v, k.astype(k_dtype)


@pytest.mark.parametrize("k_dtype", [np.float16, np.float32, np.float64])
def test_differing_elements(k_dtype):
    rng = np.random.default_rng(1)
    v, k = _pair(rng, 200_000, k_dtype)
    where, max_mag = differing_elements(v.reshape(400, 500), k.reshape(400, 500))
    with np.errstate(over="ignore", invalid="ignore"):
        c = v.astype(np.float16).astype(np.float64)
        g = k.astype(np.float32).astype(np.float64)
    np.testing.assert_array_equal(where, np.flatnonzero(~(c == g)))
    assert list(where[:2]) == [2, 5]  # ±0 equal, NaN differs, 70000 → inf equal, 1 + 2^-12 rounds to 1
    assert max_mag == np.inf


def test_compare_differing_equals_compare_on_the_study_fields():
    rng = np.random.default_rng(2)
    v, k = _pair(rng, 50_000)
    v[7], k[7] = 5000.0, 5000.0  # the RMS denominator on an equal element
    v[3], k[3] = 3.0, 3.0
    differing = differing_elements(v, k)
    for run_set in STUDY_RUN_SETS:
        full = compare(v, k, dtype_hint="fp16", study_quirks=resolve_study_quirks(run_set), chunk=4099)
        fast = compare_differing(v, k, study_quirks=resolve_study_quirks(run_set), chunk=1000, differing=differing)
        assert format_study_line(fast) == format_study_line(full)
        assert study_line(fast).fields() == study_line(full).fields()
        assert (fast.n, fast.n_exact, repr(fast.rms)) == (full.n, full.n_exact, repr(full.rms))
        assert fast.at_max["epsilon_diff"] == full.at_max["epsilon_diff"]
        assert study_line_of(v, k, run_set).fields() == study_line(full).fields()
    with pytest.raises(ValueError, match="run set of the 2022 study"):
        compare_differing(v, k, study_quirks=None)
    with pytest.raises(ValueError, match="shapes differ"):
        compare_differing(v, k[:-1], study_quirks=STUDY_RUN_SETS["fair_3"])


def test_comparison_add_equal_counts_without_visiting():
    v = np.array([1.0, 2.0, 3.0], np.float16)
    k = np.array([1.0, 2.0, 3.001], np.float16)
    c = Comparison(v, k, dtype_hint="fp16", study_quirks=STUDY_RUN_SETS["fair_3"])
    c.add(0, v[2:], k[2:])
    c.add_equal(2, 2.0)
    r = c.result(positions=np.array([2]))
    full = compare(v, k, study_quirks=STUDY_RUN_SETS["fair_3"])
    assert (r.n, r.n_exact, r.n_eps1, r.rms) == (full.n, full.n_exact, full.n_eps1, full.rms)
    assert r.at_max["abs_diff"].index == 2 and r.at_max["abs_diff"].coords == (2,)
