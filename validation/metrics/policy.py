"""What the metrics need of a verifier that does not measure by the book: a *study policy*.

The 2022 study's instrumented verifier measured in float32 with its own ε interval and its own
relDiff_old domain, differently per run set. The metrics do not know those rules: a caller passes
them in as an object (``compare(..., study_quirks=policy)``), and the metrics call what this
protocol names. :class:`validation.verify.study2022.StudyQuirks` is the policy of the study's run
sets (``validation.verify.STUDY_RUN_SETS["fair_3"]``, or ``validation.verify.study_quirks("fair_3")``).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["StudyPolicy", "check_policy"]


@runtime_checkable
class StudyPolicy(Protocol):
    """The study verifier's quirks, as the metrics read them."""

    #: the run set's name (reported with the result)
    run_set: str
    #: a rule of :func:`emu.formats.spacing` for ε ("ulp" or "binade_below")
    epsilon_rule: str
    #: maxRelDiff_old over ``v > thr`` instead of ``|v| > thr``
    rel_old_signed: bool

    @property
    def rel_old_threshold(self) -> float:
        """``thr``: maxRelDiff_old takes elements above it."""
        ...

    def interval(self, m32: np.ndarray) -> np.ndarray:
        """The ε interval (float32) of float32 magnitudes ``m32``."""
        ...


def check_policy(quirks: Any) -> StudyPolicy | None:
    """``quirks`` when it is a study policy (or None); a run set's name or anything else is refused."""
    if quirks is None:
        return None
    if isinstance(quirks, str):
        raise ValueError(
            f"study_quirks: {quirks!r} is a name; give the run set's policy object "
            f"(validation.verify.study_quirks({quirks!r}))"
        )
    if not isinstance(quirks, StudyPolicy):
        raise TypeError(f"study_quirks: {type(quirks).__name__} is not a study policy (validation.metrics.StudyPolicy)")
    return quirks
