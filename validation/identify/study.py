"""Identify the unit, gemmK grouping and split-K count of the 2022 study's xdlops kernels from its measured lines.

No probes here: the only data are the study verifier's printed counts and maxima for each
convolution test (the study's ``raw_results``, github.com/zhanglx13/llvm-project-mlir-dev-utils
``fp16_experiment/raw_results``, read with :func:`validation.study.read_measured`).
For a forward test (or any test whose xdlops result does not depend on atomic add order), every candidate — a matrix unit (MI100, MI200, MI300) × a gemmK order fed to
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

Backward-weight tests (:func:`identify_kblocks`): the split-K count KBlocks of the xdlops
kernel's atomic path, judged on the whole line where the result is one value (two chunks or
fewer) and on the count of exact elements, over every add order or over sampled ones, where it
is not (see the section comment below).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from emu.atomics import orders_landing_in
from emu.conv import ConvArithmetic, ConvGemm
from emu.gemm import GemmOrder
from emu.rounding import fp32_to_fp16
from models import kernels as kernel_models
from models import space

from ..study import atomic_reorders, read_measured
from ..study.emulate import job_inputs
from ..study.lines import line_fields
from ..study.measured import RANGES
from ..suites import suite_config
from .search import single_threaded

__all__ = [
    "KBLOCKS",
    "ORDERS",
    "UNITS",
    "KBlocksCheck",
    "KBlocksVerdict",
    "StudyCandidate",
    "candidate_lines",
    "identify_forward",
    "identify_kblocks",
]

UNITS = ("mi100", "mi200", "mi300")
ORDERS = ("kernel", "ascending", "cpu-loop")
#: the study's -rand ranges (batch_run.sh) and seed (-rand 1)
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
            order = GemmOrder(
                k_order=kernel_models.cpu_loop_k_order(problem, g.gemm_id),
                pad_k=g.order.pad_k,
                split_k=g.order.split_k,
                notes="CPU loop order",
            )
        out.append((g.unit, order))
    return out


def _run(op, problem, plans) -> np.ndarray:
    units, orders = zip(*plans)
    return op.compute([ConvArithmetic(tuple(units), tuple(orders))])[0]


def _line(validation: np.ndarray, kernel16: np.ndarray, run_set: str) -> dict:
    """The study verifier's printed fields for (fp32 validation, fp16 kernel output)."""
    return line_fields(validation, kernel16, run_set)["fields"]


def candidate_lines(test: str, candidates, ranges=tuple(RANGES), run_set: str = "fair_1") -> dict:
    """{(candidate, range): printed fields} of every candidate on ``test`` (a suite test name)
    against the -pv_with_gpu validation."""
    problem = suite_config(test).problem
    out = {}
    for r in ranges:
        inputs = job_inputs(problem, r, SEED, "float")
        op = ConvGemm(problem, x=inputs.get("input"), w=inputs.get("filter"), dy=inputs.get("output"))
        gpu_validation = kernel_models.kernel("rocmlir-2022-nonxdlops", hw=None).plan(problem)
        distinct: dict[tuple, list] = {}  # candidates with the same arithmetic share one emulation
        key_of = {}
        for cand in candidates:
            plans = _plans(problem, cand)
            key_of[cand] = tuple((u.params, o.k_order, o.pad_k, o.split_k) for u, o in plans)
            distinct.setdefault(key_of[cand], plans)
        # one pass over the gathered operands for the validation and every distinct candidate
        models = [[(g.unit, g.order) for g in gpu_validation], *distinct.values()]
        outs = op.compute([ConvArithmetic(*map(tuple, zip(*plans))) for plans in models])
        validation = outs[0]
        lines = {key: _line(validation, fp32_to_fp16(k32), run_set) for key, k32 in zip(distinct, outs[1:])}
        for cand in candidates:
            out[(cand, r)] = lines[key_of[cand]]
    return out


def identify_forward(
    measured,
    tests,
    *,
    run_set: str = "fair_1",
    gpus=("mi100", "mi200"),
    ranges=tuple(RANGES),
    candidates=None,
    lines_out: dict | None = None,
) -> dict:
    """{(test, gpu): [consistent candidates]} for ``tests`` from the measured lines (``measured``:
    the raw results folder or :func:`validation.study.read_measured` lines).

    A candidate is consistent when its printed line equals the measured -pv_with_gpu xdlops line
    in every field, for every range in ``ranges``. Tests without such lines are skipped. Any
    direction whose xdlops result is one value: forward and backward-data tests, and
    backward-weight tests with at most two split-K chunks (ValueError for more: their atomic
    adds make the result order-dependent, see :func:`identify_kblocks`).

    ``lines_out``: a dict that receives, per (test, gpu), ``{"measured": {range: fields},
    "emulated": {(candidate, range): fields}}`` (the printed fields compared; for pictures)."""
    for test in tests:
        if atomic_reorders(test):
            raise ValueError(
                f"tests: {test} adds three or more split-K partial sums with atomics; its lines "
                "identify KBlocks (identify_kblocks), not one order"
            )

    if isinstance(measured, (str, bytes)) or hasattr(measured, "__fspath__"):
        measured = read_measured(measured)
    if candidates is None:
        candidates = [StudyCandidate(u, o) for u in UNITS for o in ORDERS]
    lines = {}
    for m in measured:
        if (
            m.run_set == run_set
            and m.kernel == "xdlops"
            and m.validator == "gpu"
            and m.gpu in gpus
            and m.range in ranges
            and m.test_name in tests
        ):
            lines[(m.test_name, m.gpu, m.range)] = m.line.fields()

    result = {}
    with single_threaded():
        _each_test(tests, ranges, gpus, lines, candidates, run_set, result, lines_out)
    return result


def _each_test(tests, ranges, gpus, lines, candidates, run_set, result, lines_out=None):
    for test in tests:
        have = [r for r in ranges if all((test, g, r) in lines for g in gpus)]
        if not have:
            continue
        emulated = candidate_lines(test, candidates, have, run_set)
        for g in gpus:
            result[(test, g)] = [c for c in candidates if all(emulated[(c, r)] == lines[(test, g, r)] for r in have)]
            if lines_out is not None:
                lines_out[(test, g)] = {"measured": {r: lines[(test, g, r)] for r in have}, "emulated": emulated}


# --- split-K KBlocks of the backward-weight tests -------------------------------------------------
#
# With S split-K chunks the xdlops kernel adds S fp32 partial sums onto a zeroed workspace with
# atomics, in an order that varies per element and per run. For S ≤ 2 the result is one value (the
# adds commute) and a candidate KBlocks is judged on the whole printed line. For S ≥ 3 one number
# of the line is judged, the count of exact elements n_exact: element e is exact in some order,
# in every order, or in none, and as the orders of different elements are independent, every
# count between #always and #ever is reachable. With S ≤ 5 every order is tried, so a measured
# count outside [#always, #ever] excludes the candidate; with S ≥ 6 sampled orders (random
# permutations and four sorted ones per element) give an inner range: a count inside it is a
# witness that the candidate is consistent, a count outside is "not shown" (not an exclusion).

KBLOCKS = space.SPLIT_KS  # the split-K axis of models.space.KernelAccumulation
EXHAUSTIVE_UP_TO = 5
SAMPLED_ORDERS = 1024

_SORTED_ORDERS = 4


def _rounding_interval(validation: np.ndarray):
    """(lo, hi, lo_inclusive, hi_inclusive): the float64 interval of values whose fp16 RNE equals
    that of each validation value, compared as values (−0 = +0; fp16 overflow to ±inf counts as
    equal to an infinite validation, as the C verifier's == does); NaN: an empty interval."""
    with np.errstate(over="ignore", invalid="ignore"):
        v16 = validation.astype(np.float16)
        up = np.nextafter(v16, np.float16(np.inf)).astype(np.float64)
        down = np.nextafter(v16, np.float16(-np.inf)).astype(np.float64)
        v = v16.astype(np.float64)
        hi = np.where(np.isinf(up), 65520.0, (v + up) / 2)  # RNE: 65520 (a tie) rounds to inf
        lo = np.where(np.isinf(down), -65520.0, (v + down) / 2)
    even = (v16.view(np.uint16) & 1) == 0
    lo_inc, hi_inc = even.copy(), even.copy()
    pos_inf, neg_inf = v == np.inf, v == -np.inf
    lo[pos_inf], hi[pos_inf], lo_inc[pos_inf], hi_inc[pos_inf] = 65520.0, np.inf, True, True
    lo[neg_inf], hi[neg_inf], lo_inc[neg_inf], hi_inc[neg_inf] = -np.inf, -65520.0, True, True
    nan = np.isnan(v)
    lo[nan], hi[nan] = np.inf, -np.inf
    return lo, hi, lo_inc, hi_inc


def _split_partials(op, problem, plans) -> np.ndarray:
    """(S, elements) fp32: each split-K chunk's result before the atomic adds (``plans``: one
    (unit, order) per sub-GEMM, all with the same split count S)."""
    units, orders = zip(*plans)
    if len({o.split_k for o in orders}) != 1:
        raise ValueError("sub-GEMMs with different split-K counts")
    return op.compute([ConvArithmetic(tuple(units), tuple(orders), keep_partials=True)])[0].parts


def _perms(S: int, seed: int) -> np.ndarray:
    if S <= EXHAUSTIVE_UP_TO:
        return np.array(list(itertools.permutations(range(S))), np.int64)
    rng = np.random.default_rng(seed)
    return np.stack([rng.permutation(S) for _ in range(SAMPLED_ORDERS)]).astype(np.int64)


@dataclass(frozen=True)
class KBlocksVerdict:
    """``verdict``: "consistent", "excluded" or "not shown" (see the section comment);
    ``detail``: per range, the measured value against the emulated value or range; ``checks``:
    the same as numbers, one :class:`KBlocksCheck` per (range, validator) judged."""

    kblocks: int
    verdict: str
    detail: tuple[str, ...]
    checks: tuple[KBlocksCheck, ...] = ()


@dataclass(frozen=True)
class KBlocksCheck:
    """One measured line against one KBlocks candidate: the measured ``n_exact`` and the emulated
    range [``lo``, ``hi``] (one value when the result is one value, ``whole_line``: then ``ok``
    means every printed field is equal); ``exhaustive``: every add order was tried."""

    range: str
    validator: str
    measured: int
    lo: int
    hi: int
    ok: bool
    whole_line: bool
    exhaustive: bool


def identify_kblocks(
    measured,
    tests,
    *,
    run_set: str = "fair_1",
    gpus=("mi100", "mi200"),
    ranges=tuple(RANGES),
    validators=("gpu", "cpu"),
    kblocks=KBLOCKS,
    seed: int = 2022,
) -> dict:
    """{(test, gpu): [KBlocksVerdict per valid KBlocks]} for backward-weight ``tests`` from the
    measured xdlops lines of both validators (module section comment)."""
    if isinstance(measured, (str, bytes)) or hasattr(measured, "__fspath__"):
        measured = read_measured(measured)
    lines = {}
    for m in measured:
        if (
            m.run_set == run_set
            and m.kernel == "xdlops"
            and m.validator in validators
            and m.gpu in gpus
            and m.range in ranges
            and m.test_name in tests
        ):
            lines[(m.test_name, m.gpu, m.validator, m.range)] = m.line.fields()
    result = {}
    with single_threaded():
        for test in tests:
            _kblocks_test(test, gpus, ranges, validators, kblocks, lines, run_set, seed, result)
    return result


def _kblocks_test(test, gpus, ranges, validators, kblocks, lines, run_set, seed, result):
    problem = suite_config(test).problem
    if problem.direction != "bwd_weight":
        raise ValueError(f"tests: {test} is a {problem.direction} test; KBlocks is a backward-weight question")
    verdicts = {g: {} for g in gpus}
    details = {g: {} for g in gpus}
    checks = {g: {} for g in gpus}
    for r in ranges:
        inputs = job_inputs(problem, r, SEED, "float")
        op = ConvGemm(problem, x=inputs.get("input"), w=inputs.get("filter"), dy=inputs.get("output"))
        vals = {}
        if "gpu" in validators:
            vals["gpu"] = _run(
                op,
                problem,
                [(g.unit, g.order) for g in kernel_models.kernel("rocmlir-2022-nonxdlops", hw=None).plan(problem)],
            )
        if "cpu" in validators:
            vals["cpu"] = _run(
                op,
                problem,
                [
                    (g.unit, g.order)
                    for g in kernel_models.kernel("cpu-validation-2022", validating="xdlops").plan(problem)
                ],
            )
        for gpu in gpus:
            for kb in kblocks:
                try:
                    plans = [
                        (g.unit, g.order)
                        for g in kernel_models.kernel("rocmlir-2022-xdlops", hw=gpu, kblocks=kb).plan(problem)
                    ]
                except ValueError:
                    continue  # not a valid split of this test's gemmK
                S = max(o.split_k for _, o in plans)
                state = verdicts[gpu].setdefault(kb, "consistent")
                notes = details[gpu].setdefault(kb, [])
                nums = checks[gpu].setdefault(kb, [])
                if S <= 2:
                    with np.errstate(over="ignore"):
                        kernel16 = _run(op, problem, plans).astype(np.float16)
                    for v, validation in vals.items():
                        want = lines.get((test, gpu, v, r))
                        if want is None:
                            continue
                        got = _line(validation, kernel16, run_set)
                        same = got == want
                        notes.append(
                            f"{r}/{v}: line {'equal' if same else 'differs'} (n_exact {want['n_exact']} "
                            f"measured, {got['n_exact']} emulated)"
                        )
                        n_got = int(got["n_exact"])
                        nums.append(KBlocksCheck(r, v, int(want["n_exact"]), n_got, n_got, same, True, True))
                        if not same:
                            state = "excluded"
                else:
                    P = _split_partials(op, problem, plans)
                    perms = _perms(S, seed)
                    for v, validation in vals.items():
                        want = lines.get((test, gpu, v, r))
                        if want is None:
                            continue
                        lo, hi, lo_inc, hi_inc = _rounding_interval(validation.reshape(-1))
                        always = np.empty(P.shape[1], np.bool_)
                        ever = np.empty(P.shape[1], np.bool_)
                        orders_landing_in(P, perms, lo, hi, lo_inc, hi_inc, always, ever)
                        n_lo, n_hi = int(always.sum()), int(ever.sum())
                        n = int(want["n_exact"])
                        inside = n_lo <= n <= n_hi
                        exhaustive = S <= EXHAUSTIVE_UP_TO
                        notes.append(
                            f"{r}/{v}: n_exact {n} measured, [{n_lo}, {n_hi}] "
                            f"{'over every order' if exhaustive else 'over sampled orders'}"
                        )
                        nums.append(KBlocksCheck(r, v, n, n_lo, n_hi, inside, False, exhaustive))
                        if not inside:
                            if exhaustive:
                                state = "excluded"
                            elif state == "consistent":
                                state = "not shown"
                verdicts[gpu][kb] = state
    for gpu in gpus:
        result[(test, gpu)] = [
            KBlocksVerdict(kb, verdicts[gpu][kb], tuple(details[gpu][kb]), tuple(checks[gpu][kb]))
            for kb in verdicts[gpu]
        ]
