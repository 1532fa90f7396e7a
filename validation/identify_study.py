"""Identify the unit and the gemmK grouping of the 2022 study's xdlops kernels from its measured lines.

No probes here: the only data are the study verifier's printed counts and maxima for each
convolution test (``fp16_study_raw_results``, read with :func:`validation.study.read_measured`).
For a forward test, every candidate — a matrix unit (MI100, MI200, MI300) × a gemmK order fed to
it — is emulated on the test's own inputs (the harness's seed 1, each input range), its fp16
output compared with the ``-pv_with_gpu`` validation (the non-xdlops fp32 kernel, whose
arithmetic does not depend on the candidate) as the study verifier does, and the printed line
compared field for field with the measured one. A candidate is consistent with a (test, GPU)
when it reproduces the measured line of every range exactly.

Candidate gemmK orders:

``kernel``      the order ``models.tuning`` derives for the 2022 default tuning: the k-reduction
                instructions' strided groups and KPack (``models.tuning.mfma_k_order``)
``ascending``   consecutive groups of gemmK in the kernel's gemmK layout (no stride)
``cpu-loop``    the CPU validator's loop order (c, y, x) (``models.kernels.cpu_loop_k_order``)

Backward-weight tests with split-K atomics (the KBlocks question) are not covered: their
results depend on the order of fp32 atomic adds, and the study reproduction's ensembles
(``validation.study``) are what judges them; see docs/identify.md.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

import emu
from emu.conv import ConvGemm
from emu.gemm import GemmOrder
from models import harness
from models import kernels as kernel_models

__all__ = ["ORDERS", "UNITS", "StudyCandidate", "candidate_lines", "identify_forward"]

UNITS = ("mi100", "mi200", "mi300")
ORDERS = ("kernel", "ascending", "cpu-loop")
#: the study's -rand ranges (batch_run.sh) and seed (-rand 1)
RANGES = {"r0": (-1, 1), "r1": (-10, 10), "r4": (1, 5), "r5": (5, 10)}
SEED = 1


@dataclass(frozen=True)
class StudyCandidate:
    """One kernel arithmetic: the xdlops kernel's plan with ``unit``'s arithmetic and gemmK ``order``."""

    unit: str
    order: str

    def label(self) -> str:
        return f"{self.unit} unit, gemmK {self.order}"


def _plans(problem, candidate: StudyCandidate):
    plans = kernel_models.kernel("rocmlir-2022-xdlops", hw=candidate.unit).plan(problem)
    out = []
    for g in plans:
        if candidate.order == "kernel":
            order = g.order
        elif candidate.order == "ascending":
            order = GemmOrder(k_order=None, pad_k=g.order.pad_k, split_k=g.order.split_k, notes="ascending")
        else:
            order = GemmOrder(k_order=kernel_models.cpu_loop_k_order(problem, g.gemm_id), pad_k=g.order.pad_k,
                              split_k=g.order.split_k, notes="CPU loop order")
        out.append((g.unit, order))
    return out


def _run(op, problem, plans) -> np.ndarray:
    out = op.new_result()
    chunk = op.default_n_chunk()
    for sub, s in enumerate(op.subs):
        unit, order = plans[sub]
        for group in range(problem.groups):
            a = op.a(sub, group)
            for start in range(0, s.n, chunk):
                stop = min(start + chunk, s.n)
                op.scatter(out, emu.gemm(a, op.b(sub, group, start, stop), unit, order), sub, group, start)
    return out


def _line(validation: np.ndarray, kernel16: np.ndarray, run_set: str) -> dict:
    """The study verifier's printed fields for (fp32 validation, fp16 kernel output)."""
    from .metrics import resolve_study_quirks
    from .verifier import StudyLine, study_line_of

    q = resolve_study_quirks(run_set)
    with np.errstate(over="ignore", invalid="ignore"):
        equal = np.array_equal(validation.astype(np.float16).astype(np.float32), kernel16.astype(np.float32))
    if equal and np.any(kernel16 != 0):
        # the C verifier skips exact elements and starts every maximum and sum at 0
        pair = 0.0 if q.line_format == "B" else None
        n = int(validation.size)
        line = StudyLine(n=n, n_exact=n, n_eps1=0, n_eps_ge2=0, n_eps_other=0, max_epsilon_diff=0.0,
                         val_at_max_eps=0.0, kern_at_max_eps=0.0, max_abs_diff=0.0, ave_abs_diff=0.0,
                         max_rel_diff=0.0, max_rel_diff_old=0.0, val_at_max_rel_old=pair,
                         kern_at_max_rel_old=pair, ave_rel_diff=0.0, rms=0.0, line_format=q.line_format)
    else:
        line = study_line_of(validation, kernel16, q)
    return line.fields()


def candidate_lines(test: str, candidates, ranges=tuple(RANGES), run_set: str = "fair_1") -> dict:
    """{(candidate, range): printed fields} of every candidate on ``test`` (a suite test name)
    against the -pv_with_gpu validation."""
    from .suites import suite_config

    problem = suite_config(test).problem
    out = {}
    for r in ranges:
        lo, hi = RANGES[r]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            inputs = harness.harness_inputs(problem, seed=SEED, rand_min=lo, rand_max=hi, rand_type="float",
                                            rand_side="both", dtype="f16")
        op = ConvGemm(problem, x=inputs.get("input"), w=inputs.get("filter"), dy=inputs.get("output"))
        gpu_validation = kernel_models.kernel("rocmlir-2022-nonxdlops", hw=None).plan(problem)
        validation = _run(op, problem, [(g.unit, g.order) for g in gpu_validation])
        seen = {}
        for cand in candidates:
            plans = _plans(problem, cand)
            key = tuple((u.params, o.k_order, o.pad_k, o.split_k) for u, o in plans)
            if key not in seen:  # candidates with the same arithmetic share one emulation
                kernel16 = _run(op, problem, plans).astype(np.float16)
                seen[key] = _line(validation, kernel16, run_set)
            out[(cand, r)] = seen[key]
    return out


def identify_forward(measured, tests, *, run_set: str = "fair_1", gpus=("mi100", "mi200"),
                     ranges=tuple(RANGES), candidates=None) -> dict:
    """{(test, gpu): [consistent candidates]} for forward ``tests`` from the measured lines
    (``measured``: the raw results folder or :func:`validation.study.read_measured` lines).

    A candidate is consistent when its printed line equals the measured -pv_with_gpu xdlops line
    in every field, for every range in ``ranges``. Tests without such lines are skipped."""
    from .study import read_measured

    if isinstance(measured, (str, bytes)) or hasattr(measured, "__fspath__"):
        measured = read_measured(measured)
    if candidates is None:
        candidates = [StudyCandidate(u, o) for u in UNITS for o in ORDERS]
    lines = {}
    for m in measured:
        if (m.run_set == run_set and m.kernel == "xdlops" and m.validator == "gpu" and m.gpu in gpus
                and m.range in ranges and m.test_name in tests):
            lines[(m.test_name, m.gpu, m.range)] = m.line.fields()
    from .identify import single_threaded

    result = {}
    with single_threaded():
        _each_test(tests, ranges, gpus, lines, candidates, run_set, result)
    return result


def _each_test(tests, ranges, gpus, lines, candidates, run_set, result):
    for test in tests:
        have = [r for r in ranges if all((test, g, r) in lines for g in gpus)]
        if not have:
            continue
        emulated = candidate_lines(test, candidates, have, run_set)
        for g in gpus:
            result[(test, g)] = [c for c in candidates
                                 if all(emulated[(c, r)] == lines[(test, g, r)] for r in have)]
