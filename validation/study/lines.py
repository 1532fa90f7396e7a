"""The study verifier's printed line for one emulated (validation, kernel) pair."""

from __future__ import annotations

import numpy as np

from ..verify.study2022 import StudyLine, differing_elements, format_study_line, resolve_study_quirks, study_line_of

__all__ = ["line_fields", "zero_line", "differing_elements"]


def zero_line(n: int, fmt: str) -> StudyLine:
    """The line the C verifier prints when every element is equal: it skips exact elements and
    starts every maximum and sum at 0."""
    pair = 0.0 if fmt == "B" else None
    return StudyLine(
        n=n,
        n_exact=n,
        n_eps1=0,
        n_eps_ge2=0,
        n_eps_other=0,
        max_epsilon_diff=0.0,
        val_at_max_eps=0.0,
        kern_at_max_eps=0.0,
        max_abs_diff=0.0,
        ave_abs_diff=0.0,
        max_rel_diff=0.0,
        max_rel_diff_old=0.0,
        val_at_max_rel_old=pair,
        kern_at_max_rel_old=pair,
        ave_rel_diff=0.0,
        rms=0.0,
        line_format=fmt,
    )


def line_fields(validation: np.ndarray, kernel16: np.ndarray, quirks: str, differing=None) -> dict:
    """The study verifier's printed fields for one (validation fp32, kernel fp16) pair:
    ``{"fields": {name: text}, "line": text}``. All-equal outputs with a nonzero element take the
    verifier's shortcut (:func:`zero_line`). ``differing``: the pair's
    :func:`differing_elements`, when the caller compares the pair under several run sets."""
    q = resolve_study_quirks(quirks)
    if differing is None:
        differing = differing_elements(validation, kernel16)
    if differing[0].size == 0 and np.any(kernel16 != 0):
        line = zero_line(int(validation.size), q.line_format)
    else:
        line = study_line_of(validation, kernel16, q, differing=differing)
    return {"fields": line.fields(), "line": format_study_line(line)}
