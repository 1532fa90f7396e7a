"""The numbers and labels every stage of :mod:`validation.metrics` shares: the chunk size, the
metrics' thresholds and tolerances, the histogram buckets and the keys every result dict has."""

from __future__ import annotations

from collections.abc import Mapping

#: Elements per chunk: about 8 MiB per float64 temporary.
DEFAULT_CHUNK = 1 << 20
#: maxRelDiff_old takes |v| above this (the old rocMLIR verifier's magnitude rule).
REL_OLD_THRESHOLD = 1e-3
#: torch.testing.assert_close defaults (rtol, atol) per data type (PyTorch's torch.testing table);
#: the fp8 types are not in that table, and ``default_tolerances`` gives them (0, 0): exact
#: (torch/testing/_comparison.py, PyTorch 2.13).
TORCH_TOLERANCES: Mapping[str, tuple[float, float]] = {
    "fp16": (1e-3, 1e-5),
    "bf16": (1.6e-2, 1e-5),
    "fp32": (1.3e-6, 1e-5),
    "fp64": (1e-7, 1e-7),
    **dict.fromkeys(("e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz"), (0.0, 0.0)),
}
#: The ``EPSILON`` added to MLU-OPS denominators (evaluator.h).
MLU_EPSILON = 1e-9
#: diff3's split between relative and absolute error (evaluator.h EPSILON_HALF / EPSILON_FLOAT;
#: other types keep the evaluator's 0).
MLU_DIFF3_THRESHOLDS: Mapping[str, float] = {
    "fp16": 1e-4,
    "fp32": 1e-6,
    "bf16": 0.0,
    "fp64": 0.0,
    **dict.fromkeys(("e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz"), 0.0),
}
#: diff4 is ignored below this many distinct mismatching pairs (evaluator.h ``computeDiff4``).
DIFF4_MIN_MISMATCHES = 100
#: Distinct diff4 pairs kept exactly (8 bytes each); beyond, diff4 is taken over all mismatches.
DIFF4_DISTINCT_LIMIT = 1 << 22

#: epsilonDiff histogram buckets (the study's 0, 1, 2, [3,10], [11,100], >100 for integer ε; written
#: as half-open intervals so fractional ε of non-fp16 data has a bucket too).
EPSILON_BUCKETS = ("0", "(0,1]", "(1,2]", "(2,10]", "(10,100]", ">100", "nonfinite")
#: relDiff_old histogram buckets (the study's) plus the elements outside its domain, so counts sum
#: to N.
REL_OLD_BUCKETS = (
    "0", "(0,1e-6)", "[1e-6,1e-5)", "[1e-5,1e-4)", "[1e-4,1e-3)", "[1e-3,1e-2)",
    "[1e-2,1e-1)", "[1e-1,1)", ">=1", "v == 0", "excluded", "nonfinite",
)  # fmt: skip

#: The keys every :meth:`ComparisonResult.to_dict` has, in this order (issue 4).
STABLE_KEYS = (
    "n", "n_exact", "n_eps1", "n_eps_ge2", "n_eps_other", "max_epsilon_diff", "max_abs_diff",
    "ave_abs_diff", "max_rel_diff", "max_rel_diff_old", "ave_rel_diff", "rms", "diff1", "diff2",
    "diff3", "diff4", "flags", "verdict",
)  # fmt: skip
