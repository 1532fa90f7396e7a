"""The study's measured lines: run sets, GPUs, kernels, validators, ranges, and the raw files."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..verify.presets import parse_study_line

__all__ = [
    "RANGES",
    "RUN_SETS",
    "GPUS",
    "KERNELS",
    "VALIDATORS",
    "STUDY_SEED",
    "RAND0_SEEDS",
    "KNOWN_ABSENT",
    "MeasuredLine",
    "measured_file",
    "missing_files",
    "read_measured",
]

#: The study's input ranges (``batch_run.sh``: rand0, rand1, rand4, rand5).
RANGES: Mapping[str, tuple[int, int]] = {"r0": (-1, 1), "r1": (-10, 10), "r4": (1, 5), "r5": (5, 10)}
RUN_SETS = ("fair_1", "fair_2", "fair_3", "fair_rand0")
GPUS = ("mi100", "mi200")
KERNELS = ("xdlops", "nonxdlops")
VALIDATORS = ("cpu", "gpu")
#: ``-rand 1`` in fair_1, fair_2 and fair_3.
STUDY_SEED = 1
#: Seeds whose lines stand for fair_rand0's unknown clock seeds.
RAND0_SEEDS = (1, 2, 3)

#: Combinations (run set, GPU, kernel, validator, range) the study's public raw results do not
#: hold: ``verify_results_fair_3_MI200`` has no ``verify_f16_nonxdlops_pv-with-gpu_rand*.txt``
#: (github.com/zhanglx13/llvm-project-mlir-dev-utils @3b042e7, fp16_experiment/raw_results): a
#: whole validator set, so skipped on purpose rather than lost. Any other selected file that is
#: missing or empty is an error (or, with ``allow_missing``, a flagged gap in the report).
KNOWN_ABSENT = frozenset(("fair_3", "mi200", "nonxdlops", "gpu", r) for r in RANGES)

_FILE_RE = re.compile(r"^verify_f16_(xdlops|nonxdlops)_(pv|pv-with-gpu)_rand(\d+)\.txt$")
_DIR_RE = re.compile(r"^verify_results_(.+)_(MI\d+)$")
_VALIDATOR_OF_FLAG = {"pv": "cpu", "pv-with-gpu": "gpu"}


@dataclass(frozen=True)
class MeasuredLine:
    """One measured line of the study: which run it belongs to and its parsed fields."""

    run_set: str
    gpu: str  # mi100 / mi200
    kernel: str  # xdlops / nonxdlops
    validator: str  # cpu (-pv) / gpu (-pv_with_gpu)
    range: str  # r0 / r1 / r4 / r5
    test_name: str
    line: Any  # validation.verify.StudyLine
    test_index: int = 0
    source: str = ""

    @property
    def combo(self) -> tuple[str, str, str, str, str]:
        return (self.run_set, self.gpu, self.kernel, self.validator, self.range)


def read_measured(directory) -> list[MeasuredLine]:
    """Every line of the study's raw results folder ``directory`` (the folder holding
    ``verify_results_<run set>_<GPU>/``), keyed by run set, GPU, kernel, validator, range and
    test. Raises ``ValueError`` naming the folder or file that does not fit."""
    root = Path(directory)
    if not root.is_dir():
        raise ValueError(f"--measured: {str(root)!r} is not a folder")
    out: list[MeasuredLine] = []
    folders = sorted(p for p in root.iterdir() if p.is_dir() and _DIR_RE.match(p.name))
    if not folders:
        raise ValueError(
            f"--measured: {str(root)!r} holds no verify_results_<run set>_<GPU> folders "
            f"(expected the study's raw_results folder)"
        )
    for folder in folders:
        run_set, gpu = _DIR_RE.match(folder.name).groups()
        for path in sorted(folder.iterdir()):
            m = _FILE_RE.match(path.name)
            if m is None:
                continue
            kernel, flag, r = m.groups()
            rng = f"r{int(r)}"
            if rng not in RANGES:
                raise ValueError(
                    f"--measured: {path}: range rand{r} is not one of {', '.join('rand' + k[1:] for k in RANGES)}"
                )
            for lineno, text in _text_lines(path):
                if not text.strip():
                    continue
                try:
                    line = parse_study_line(text)
                except ValueError as err:
                    raise ValueError(f"--measured: {path}:{lineno}: {err}") from None
                if line.tail is None:
                    raise ValueError(f"--measured: {path}:{lineno}: no test name after the verifier line")
                out.append(
                    MeasuredLine(
                        run_set=run_set,
                        gpu=gpu.lower(),
                        kernel=kernel,
                        validator=_VALIDATOR_OF_FLAG[flag],
                        range=rng,
                        test_name=line.tail.test_name,
                        line=line,
                        test_index=line.tail.test_index,
                        source=str(path),
                    )
                )
    return out


def _text_lines(path: Path):
    """(line number, text) of a measured file; ValueError naming the file and line for bytes that
    are not UTF-8 text or a file that cannot be read."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise ValueError(f"--measured: {path}: cannot be read ({err.strerror or type(err).__name__})") from None
    for lineno, chunk in enumerate(raw.splitlines(keepends=True), 1):
        try:
            yield lineno, chunk.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(
                f"--measured: {path}:{lineno}: not UTF-8 text (byte 0x{chunk[err.start]:02x} at column {err.start + 1})"
            ) from None


def measured_file(root, run_set: str, gpu: str, kernel: str, validator: str, range_key: str) -> Path:
    """The raw results file of one combination under the raw results folder ``root``."""
    flag = {v: k for k, v in _VALIDATOR_OF_FLAG.items()}[validator]
    return (
        Path(root) / f"verify_results_{run_set}_{gpu.upper()}" / f"verify_f16_{kernel}_{flag}_rand{range_key[1:]}.txt"
    )


def missing_files(root, selection) -> list[tuple[Path, str]]:
    """(file, "missing" or "empty") for each combination ``selection`` asks for whose raw results
    file under ``root`` is absent or holds no line; :data:`KNOWN_ABSENT` combinations are left out."""
    out = []
    for combo in itertools.product(
        selection.run_sets, selection.gpus, selection.kernels, selection.validators, selection.ranges
    ):
        if combo in KNOWN_ABSENT:
            continue
        path = measured_file(root, *combo)
        if not path.is_file():
            out.append((path, "missing"))
        elif not any(text.strip() for _, text in _text_lines(path)):
            out.append((path, "empty"))
    return out
