"""Shared by the hypothesis fuzz modules (issue 13): the example counts scaled by
``FP16EMU_FUZZ_SCALE`` (``make fuzz``), the tally of inputs and answers, and the report that
``FP16EMU_FUZZ_REPORT=FILE`` asks for (every module's counts of this pytest process, in one file).

Imported as ``tests.fuzzing`` (one module object, so one tally across the fuzz modules)."""

import json
import os
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, settings

SCALE = max(1, int(os.environ.get("FP16EMU_FUZZ_SCALE", "1")))
#: seconds any single input may take
BOUND_S = 5.0
COUNTS: Counter = Counter()


def fuzz(n: int):
    """hypothesis settings: ``n`` examples in ``make test``, ``n * FP16EMU_FUZZ_SCALE`` in ``make fuzz``."""
    return settings(
        max_examples=n * SCALE,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


def tally(target: str, answer: str, seconds: float, bound_s: float = BOUND_S) -> None:
    """Count one input of ``target`` and its answer; fail when it took ``bound_s`` or longer."""
    COUNTS[f"{target}: inputs"] += 1
    COUNTS[f"{target}: {answer}"] += 1
    COUNTS[f"{target}: max seconds x1000"] = max(COUNTS[f"{target}: max seconds x1000"], round(seconds * 1000))
    assert seconds < bound_s, f"{target}: {seconds:.1f} s for one input"


def write_report() -> None:
    """Write every count so far to ``FP16EMU_FUZZ_REPORT`` when it is set (called as each fuzz
    module finishes, so the file holds all the modules run in this process)."""
    path = os.environ.get("FP16EMU_FUZZ_REPORT")
    if path:
        Path(path).write_text(json.dumps(dict(sorted(COUNTS.items())), indent=1) + "\n")
