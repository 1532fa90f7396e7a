"""Error metrics between a validation result and a kernel result, streamed in chunks.

:func:`compare` walks two arrays of any shape (float16, bfloat16, float32, float64; the same
shape) in row-major order, ``chunk`` elements at a time, so a 205,520,896-element comparison
holds a few chunk-sized temporaries and never a float64 copy of the whole tensor. It returns a
:class:`ComparisonResult`: the rocMLIR verifiers' metrics (maxAbsDiff, maxRelDiff, epsilonDiff
in ulps, RMS), the MLU-OPS set, torch/numpy ``allclose``, MIOpen's RMS, the two histograms, the first element at each maximum and the ``top`` worst
elements (tensor coordinates, values, bit patterns). ``validation`` measures; it does not
implement the arithmetic of the emulated hardware.

Definitions (``v`` validation, ``k`` kernel, ``d = |v − k|``, N = all elements)
-------------------------------------------------------------------------------
Computed in float64 over the elements where both values are finite; NaN and ±inf are counted
and reported apart (:class:`NonFinite`) and never enter a maximum, a sum or a histogram bucket
other than ``"nonfinite"``. Equal infinities are exact matches (``v == k``), as in the C
verifiers.

* ``n_exact``: ``v == k`` (so −0 == +0, and inf == inf); ``n_eps1``: ε == 1;
  ``n_eps_ge2``: ε ≥ 2; ``n_eps_other``: any other finite difference (0 < ε < 1, 1 < ε < 2).
  ``n = n_exact + n_eps1 + n_eps_ge2 + n_eps_other + nonfinite.n_nan + nonfinite.n_inf_mismatch``.
* epsilonDiff ε = d / spacing(min(|v|, |k|)) with spacing(x) = 2^(max(⌊log2 x⌋, emin) − t) of
  the *epsilon format*: the data type (``dtype_hint``, default the kernel's dtype), so fp16 ulps
  for fp16 data (2^-24 below 2^-13); fp64 data use emin −1022, t 52.
* maxAbsDiff, maxRelDiff (over v ≠ 0), maxRelDiff_old (over |v| > 1e-3), maxEpsilonDiff: the
  largest value; the element reported at a maximum is its first occurrence in row-major order.
  A maximum over no element is 0 (the C verifiers' initial value).
* aveAbsDiff = Σd / N, aveRelDiff = Σ_{v≠0} d/|v| / N (both divide by all N, as the study).
* RMS = sqrt(Σd²) / (sqrt(N) · max over finite elements of max(|v|, |k|)); 0 when Σd² = 0.
  ``miopen_rms``: MIOpen's ``rms_range`` (the magnitude floored at DBL_MIN, N = 0 gives 0):
  the same value wherever RMS is defined (MIOpen's driver, github.com/ROCm/MIOpen).
* MLU-OPS accuracy standard (github.com/Cambricon/mlu-ops,
  ``test/mlu_op_gtest/pb_gtest/include/evaluator.h``), baseline b = v,
  evaluated e = k: diff1 = Σ|e−b| / (Σ|b| + 1e-9); diff2 = sqrt(Σ(e−b)² / (Σb² + 1e-9));
  diff3 = (m1, m2): m1 = max |e−b|/(|b| + 1e-9) over |b| ≥ th, m2 = max |e−b| over |b| < th,
  th = 1e-4 (fp16), 1e-6 (fp32), 0 otherwise (the evaluator's EPSILON_HALF / EPSILON_FLOAT;
  no fp16/fp32 value equals th, so ≥ and the standard's > agree); diff3_1 = max |e−b|/|b| over b ≠ 0;
  diff3_2 = max |e−b|; diff4 = (p1, p2, n) over the *distinct* mismatching (e, b) pairs, as
  the evaluator's ``unordered_set`` counts them: p1 share with e > b, p2 share with e < b (the
  evaluator's DIFF4 value), n the number of distinct pairs (p1, p2 are None when n = 0).
  ``diff4_all`` gives the same over all mismatching elements.
* ``allclose``: an element fails when d > atol + rtol·|v| (torch.testing.assert_close and
  numpy.isclose with the validation as the expected value), computed in float64; a non-finite
  element passes only when v == k (or both NaN with ``equal_nan``). Default (rtol, atol): the
  torch.testing defaults of the data type (:data:`TORCH_TOLERANCES`).
* ``max_rel_diff_old_native``: the old (Aug 2022) rocMLIR verifier's per-element quantity
  |(v − k)/v| computed in the data type's own arithmetic (fp16 for fp16 data, both values first
  rounded to it, RNE) over v ≠ k, restricted to |v| > 0.001 rounded to the type for types
  narrower than 32 bits (rocMLIR's ``mcpuVerify5DFloat`` in
  ``mlir/lib/ExecutionEngine/conv-validation-wrappers.cpp`` on main in Aug 2022,
  github.com/ROCm/rocMLIR); NaN quotients are ignored as the C ``>`` comparison ignores them.

Histograms (:class:`Histogram`; counts sum to N, percentages are of N)
-----------------------------------------------------------------------
* epsilonDiff (:data:`EPSILON_BUCKETS`): "0" = ``n_exact``; then (0,1], (1,2], (2,10],
  (10,100], >100, which are the study's buckets 1, 2, [3,10], [11,100], >100 for integer ε;
  "nonfinite" =
  NaN and unequal infinities.
* relDiff_old (:data:`REL_OLD_BUCKETS`): over the elements in its domain (|v| > 1e-3), "0" for
  exact ones, then (0,1e-6), [1e-6,1e-5), …, [0.1,1), >=1; outside the domain "v == 0" and
  "excluded" (0 < |v| <= 1e-3); "nonfinite" as above. The study's own edges are known only from
  its summary tables (github.com/zhanglx13/llvm-project-mlir-dev-utils, ``fp16_experiment``).

Worst elements: the ``top`` largest ε (ties: the lower index first), each an :class:`Element`
with row-major index, tensor coordinates, values and bit patterns; the first ``top`` non-finite
mismatches are listed apart (``nonfinite_elements``). diff4 keeps at most
:data:`DIFF4_DISTINCT_LIMIT` distinct pairs; beyond that it reports the shares over all
mismatching elements (``diff4_distinct`` False), which leaves MLU-OPS's verdict unchanged.

Study compatibility mode (``study_quirks``)
-------------------------------------------
With ``study_quirks`` the policy of a run set of the 2022 study (``fair_1``, ``fair_2``, ``fair_3``,
``fair_rand0``; :data:`validation.verify.STUDY_RUN_SETS`, a :class:`StudyPolicy` the metrics receive
and never import), the headline metrics follow the study's instrumented C
verifier ``mcpuVerify5DFloatFloat`` line for line (:mod:`validation.verify.study2022` describes it,
its line and its quirks per run set): both values float32,
the validation first cast to float32 and then rounded to fp16 (RNE) and back; elements with
``v == k`` skipped; absDiff = fabs(v − k) in float32; ε = absDiff / halfFloatInterval(min(|v|,|k|))
in float32, where fair_1/fair_2 take 2^(e−10) for 2^e < x ≤ 2^(e+1) (the binade below at exact
powers of two; 2^-24 for x ≤ 2^-13) and fair_3/fair_rand0 the true fp16 ulp, and both give 0
above 2^16 (so ε = inf); relDiff = (double)absDiff / |v| over v ≠ 0; maxRelDiff_old over
|v| > 1.0004e-3f, except fair_1 over v > 1.0004e-3f (the sign bug); sums in double in element
order; averages and RMS divide by N; NaN and inf take part as they do in C (maxima skip NaN,
sums propagate it) and a NaN printed as ``-nan`` is made the way x86 makes it. The histograms
and the worst-element list then use that ε; the MLU-OPS, allclose and MIOpen metrics stay
float64 over the fp16-rounded validation. :func:`validation.verify.study2022.format_study_line`
prints the line.

Modules, one stage each (this package re-exports every public name)
--------------------------------------------------------------------
``comparison``: :func:`compare` and :class:`Comparison` (data types, options, chunks, the
elements reported); ``accumulate``: the running state of one comparison, in float64 or study
mode; ``reducers``: the streaming maxima, sums, top k and distinct pairs it is built from;
``results``: the result records and their text and JSON; ``constants``: the numbers and labels
they share.
"""

from __future__ import annotations

from emu.formats import spacing

from .comparison import Comparison, compare, resolve_dtype
from .constants import (
    DEFAULT_CHUNK,
    DIFF4_DISTINCT_LIMIT,
    DIFF4_MIN_MISMATCHES,
    EPSILON_BUCKETS,
    MLU_DIFF3_THRESHOLDS,
    MLU_EPSILON,
    REL_OLD_BUCKETS,
    REL_OLD_THRESHOLD,
    STABLE_KEYS,
    TORCH_TOLERANCES,
)
from .policy import StudyPolicy, check_policy
from .results import (
    METRIC_NAMES,
    AllClose,
    ComparisonResult,
    Element,
    Histogram,
    NonFinite,
    json_float,
)

__all__ = [
    "DEFAULT_CHUNK",
    "DIFF4_DISTINCT_LIMIT",
    "DIFF4_MIN_MISMATCHES",
    "EPSILON_BUCKETS",
    "METRIC_NAMES",
    "MLU_DIFF3_THRESHOLDS",
    "MLU_EPSILON",
    "REL_OLD_BUCKETS",
    "REL_OLD_THRESHOLD",
    "STABLE_KEYS",
    "TORCH_TOLERANCES",
    "AllClose",
    "Comparison",
    "ComparisonResult",
    "Element",
    "Histogram",
    "StudyPolicy",
    "check_policy",
    "NonFinite",
    "compare",
    "json_float",
    "resolve_dtype",
    "spacing",
]
