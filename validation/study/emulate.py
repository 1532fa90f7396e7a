"""One emulation job: a test's inputs for one range and seed, every model its lines need computed in
one pass over the convolution's GEMMs, and the verifier's line of every requested combination.

A job's requests share the inputs and the gathered operands; each distinct kernel or validator
model is computed once (the non-xdlops kernel is both the kernel of non-xdlops lines and the
``-pv_with_gpu`` validation), and each (validator, kernel) pair's differing elements are found
once for every run set that prints a line of it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from emu.conv import ConvGemm
from emu.rounding import fp32_to_fp16
from models import harness
from models.kernels import ATOMIC_ORDERS, KernelModel

from ..suites import suite_config, suite_entry
from .cache import Cache
from .envelope import ensemble_results
from .lines import differing_elements, line_fields
from .measured import RANGES
from .recipes import Recipe
from .selection import test_macs

__all__ = ["Request", "Job", "make_jobs", "run_job", "job_inputs", "PASS_ELEMENTS"]

#: Elements × models of one emulation pass above which kernels and validators are computed in
#: separate passes (each validator alone) to bound memory on the 205M-output tests.
PASS_ELEMENTS = 300_000_000


@dataclass(frozen=True)
class Request:
    """One line to emulate: its cache key, recipe, seed and ensemble settings (``members`` 0:
    a deterministic kernel)."""

    key: str
    recipe: Recipe
    seed: int
    members: int
    granularity: str


@dataclass(frozen=True)
class Job:
    """The lines of one (test, range, seed, input generator); ``weight`` estimates its work."""

    test: str
    range: str
    seed: int
    rand_type: str
    requests: tuple[Request, ...]
    weight: float


def make_jobs(todo: Mapping[tuple, Mapping[str, Request]]) -> list[Job]:
    """Jobs from requests grouped by (test, range, seed, input generator), smallest work first."""
    jobs = []
    for (test, rng, seed, rand_type), reqs in todo.items():
        problem, entry = suite_config(test).problem, suite_entry(test)
        models = {r.recipe.kernel for r in reqs.values()} | {r.recipe.validator for r in reqs.values()}
        weight = test_macs(entry) * len(models) + problem.tensor_size(problem.result_role) * 40 * len(reqs)
        jobs.append(Job(test, rng, seed, rand_type, tuple(reqs.values()), weight))
    jobs.sort(key=lambda j: j.weight)
    return jobs


def job_inputs(problem, range_key: str, seed: int, rand_type: str) -> dict:
    """The harness's tensors for one of the study's ranges (``-rand SEED -rand_type T -rand_min
    lo -rand_max hi``, every tensor random)."""
    lo, hi = RANGES[range_key]
    return harness.harness_inputs(
        problem, seed=seed, rand_min=lo, rand_max=hi, rand_type=rand_type, rand_side="both", dtype="f16"
    )


class _JobRun:
    """The state of one job while it runs: the models' outputs and the finished lines."""

    def __init__(self, job: Job, cache: Cache):
        self.job, self.cache = job, cache
        self.problem = suite_config(job.test).problem
        inputs = job_inputs(self.problem, job.range, job.seed, job.rand_type)
        self.op = ConvGemm(self.problem, x=inputs.get("input"), w=inputs.get("filter"), dy=inputs.get("output"))
        self.size = self.problem.tensor_size(self.problem.result_role)
        self.canon = self._same_bits_models()
        self.kernels = list(dict.fromkeys(self.canon[r.recipe.kernel] for r in job.requests))
        self.validators = list(dict.fromkeys(self.canon[r.recipe.validator] for r in job.requests))
        self.atomic = {m for m in self.kernels if m.atomic_split(self.problem)}
        self.results: dict[str, dict] = {}
        self.kernels16: dict[KernelModel, np.ndarray] = {}
        self.kernels32: dict = {}  # fp32 outputs (SplitPartials for the atomic kernels)
        self.memo: dict[tuple, dict] = {}  # lines shared by requests with the same arithmetic
        self.differing: dict[tuple, tuple] = {}  # (validator, kernel) → its differing elements

    def _same_bits_models(self) -> dict[KernelModel, KernelModel]:
        """Each model of the job → the first model that computes the same bits on this job's
        inputs (e.g. a validator with input flush where no input is subnormal or −0), so that
        it is computed once."""
        canon: dict[KernelModel, KernelModel] = {}
        arithmetic: dict[KernelModel, tuple] = {}  # each first model → (its arithmetic, its atomic split)
        for r in self.job.requests:
            for m in (r.recipe.kernel, r.recipe.validator):
                if m in canon:
                    continue
                a, split = m.arithmetic(self.problem), m.atomic_split(self.problem)
                same = next(
                    (c for c, (ca, cs) in arithmetic.items() if cs == split and self.op.same_arithmetic(a, ca)), None
                )
                if same is None:
                    arithmetic[m] = (a, split)
                canon[m] = m if same is None else same
        return canon

    def compute(self, models: Sequence[KernelModel]) -> dict:
        """One pass over the convolution for ``models``: flat fp32 outputs, SplitPartials for the
        atomic kernels."""
        arithmetic = [
            m.arithmetic(self.problem, keep_partials=m in self.atomic, seed=ATOMIC_ORDERS.seed) for m in models
        ]
        return dict(zip(models, self.op.compute(arithmetic)))

    def store(self, req: Request, res: dict) -> None:
        res["recipe"] = req.recipe.label()
        self.results[req.key] = res
        self.cache.put(req.key, res)

    def set_kernel(self, model: KernelModel, out) -> None:
        self.kernels32[model] = out
        if model not in self.atomic:
            self.kernels16[model] = fp32_to_fp16(out)

    def finish(self, req: Request, validation: np.ndarray) -> None:
        kernel, validator = self.canon[req.recipe.kernel], self.canon[req.recipe.validator]
        same = (kernel, validator, req.recipe.quirks, req.members, req.granularity)
        if same not in self.memo:  # e.g. non-xdlops lines: the same arithmetic on MI100 and MI200
            pair = (validator, kernel)
            if pair not in self.differing:
                self.differing[pair] = differing_elements(validation, self.kernels16[kernel])
            self.memo[same] = {
                "mode": "exact",
                **line_fields(validation, self.kernels16[kernel], req.recipe.quirks, self.differing[pair]),
            }
        self.store(req, dict(self.memo[same]))

    def finish_ensemble(
        self, kernel: KernelModel, reqs: Sequence[Request], validation_of: Callable[[KernelModel], np.ndarray]
    ) -> None:
        groups: dict[tuple, list[Request]] = defaultdict(list)
        for r in reqs:
            groups[(r.members, r.granularity)].append(r)
        for (n_members, granularity), group in groups.items():
            lines: dict[tuple, list[Request]] = {}
            for r in group:
                lines.setdefault((self.canon[r.recipe.validator], r.recipe.quirks), []).append(r)
            validations = {v: validation_of(v) for v, _ in lines}
            results = ensemble_results(self.kernels32[kernel], validations, list(lines), n_members, granularity)
            for line, rs in lines.items():
                for r in rs:
                    self.store(r, dict(results[line]))

    def finish_all(self, validation_of: Callable[[KernelModel], np.ndarray], validators: set) -> None:
        """Every request whose validator is in ``validators``."""
        canon = self.canon
        for req in self.job.requests:
            validator = canon[req.recipe.validator]
            if validator in validators and canon[req.recipe.kernel] not in self.atomic:
                self.finish(req, validation_of(validator))
        for kernel in self.kernels:
            if kernel in self.atomic:
                reqs = [
                    r
                    for r in self.job.requests
                    if canon[r.recipe.kernel] == kernel and canon[r.recipe.validator] in validators
                ]
                if reqs:
                    self.finish_ensemble(kernel, reqs, validation_of)

    def run(self) -> dict[str, dict]:
        every = list(dict.fromkeys(self.kernels + self.validators))
        if self.size * len(every) <= PASS_ELEMENTS:
            outs = self.compute(every)
            for m in self.kernels:
                self.set_kernel(m, outs[m])
            self.finish_all(outs.__getitem__, set(self.validators))
            return self.results
        # big tests: kernels first (as many per pass as the budget allows; fp32 kept only where a
        # validator needs it), then one validator at a time
        per_pass = max(1, PASS_ELEMENTS // max(self.size, 1))
        for i in range(0, len(self.kernels), per_pass):
            group = self.kernels[i : i + per_pass]
            outs = self.compute(group)
            for m in group:
                self.set_kernel(m, outs[m])
                if m not in self.validators and m not in self.atomic:
                    self.kernels32.pop(m)
            del outs
        for j, v in enumerate(self.validators):
            if v in self.kernels32 and v not in self.atomic:
                validation = self.kernels32[v]
            else:
                validation = self.compute([v])[v]
            self.finish_all(lambda _v, validation=validation: validation, {v})
            del validation
            self.differing.clear()
            later = self.validators[j + 1 :]
            for m in list(self.kernels32):  # keep fp32 kernels only while a later validator needs them
                if m not in later and m not in self.atomic:
                    self.kernels32.pop(m)
        return self.results


def run_job(job: Job, cache: Cache) -> dict[str, dict]:
    """Emulate the lines of one job; returns {cache key: result}, each result also stored in the
    cache as it is finished."""
    return _JobRun(job, cache).run()
