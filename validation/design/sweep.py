"""The design sweep: noise model (metric distributions of a correct kernel over seeds, analytic
bounds, recommended thresholds) and evaluation (false-alarm and detection rates of validation
functions on correct kernels and bug mutants).

Work is cut into :class:`SeedTask` jobs, one per (test, input generator, seed), run by the
top-level pure function :func:`seed_job` (picklable arguments, a dict of plain values back), on
local processes (:func:`run_jobs`); results are gathered in task order, so they do not depend on
the number of workers.

Seeds: the noise model (and the fitted ``recommended`` function) uses seeds ``FIT_SEED0 + i``;
the evaluation uses seeds 1 … n, never used to fit. A split-K atomic kernel's correct output on
seed s is member s mod 128 of its add-order ensemble, and the mutants on seed s add their partials
in that member's order too (:func:`models.bugs.emulate_mutants` with ``member``), so a mutant's
difference from the correct kernel is the bug's alone, never a different add order.

Formats: a sweep's tests share one tensor format, fp16 or bf16 (the configs' ``-t``; mixing them
is a :class:`validation.configs.ConfigError`). A bf16 sweep draws bf16 inputs (the generators'
``fmt``), rounds the kernel's output and the validation to bf16, measures epsilonDiff in bf16
ulps, fits the recommended thresholds and runs the functions in their bf16 form, and injects the
bf16 mutants (:func:`models.bugs.default_mutants`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from emu.conv import ConvGemm, sub_gemms
from emu.formats import resolve_format
from models import bugs
from models.kernels import ATOMIC_ORDERS

from ..configs import ConfigError, ConfigWarning, parse_config
from ..engine import Engine
from ..metrics import TORCH_TOLERANCES, compare
from ..run import plan
from ..run.arrays import round_output
from ..suites import suite_config, suite_entries
from ..verify.presets import Thresholds, evaluate
from .bounds import BOUND_KINDS, element_bounds, metric_bounds
from .functions import ValidationFunction
from .generators import InputGenerator
from .stats import Rate, threshold_at

__all__ = [
    "Target",
    "SeedTask",
    "seed_job",
    "run_jobs",
    "make_pool",
    "EnginePool",
    "design",
    "fit_noise",
    "rounding_floors",
    "ROUNDING_KINDS",
    "DesignResult",
    "resolve_targets",
    "NOISE_METRICS",
    "RECOMMENDED_METRICS",
    "FIT_SEED0",
    "K_SWEEP",
]

NOISE_METRICS = ("rms", "max_abs_diff", "max_rel_diff", "max_epsilon_diff", "diff1", "diff2", "miopen_rms")
RECOMMENDED_METRICS = ("rms", "max_abs_diff", "max_rel_diff")
FIT_SEED0 = 1001
#: Add orders whose per-element range the ``emulated`` function accepts for split-K atomics.
EMULATED_MEMBERS = 32
_NHWC = "-fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk"
#: ``k-sweep``: small forward tests whose reduction length K = C·3·3 runs from 72 to 2304.
K_SWEEP = tuple(
    f"-x2 --operation conv2d -t f16 {_NHWC} -batchsize=2 -in_channels={c} -out_channels=32 -in_h=8 -in_w=8 "
    f"-fil_h=3 -fil_w=3 -padding_h=1 -padding_w=1"
    for c in (8, 32, 128, 256)
)


@dataclass(frozen=True)
class Target:
    """One test: its config text and label, hardware, kernel and the validation run with it;
    ``input`` the tensors' format (fp16 or bf16, the config's ``-t``; set by
    :func:`resolve_targets`)."""

    config: str
    label: str
    hw: str = "mi200"
    kernel: str | None = None
    validator: str = "cpu"
    input: str = "fp16"


@dataclass(frozen=True)
class SeedTask:
    target: Target
    generator: InputGenerator
    seed: int
    functions: tuple[ValidationFunction, ...] = ()
    mutants: tuple = ()
    bounds: bool = False


def _macs(e) -> int:
    return e.gemm_m * e.gemm_k * (e.gemm_n or e.n_out_elements // max(e.gemm_m, 1))


def _count(count: str, text: str) -> int:
    try:
        n = int(count)
    except ValueError:
        n = -1
    if n < 1:
        raise ValueError(f"tests: {text!r}: the count after ':' must be a whole number ≥ 1")
    return n


def resolve_targets(items: Sequence[str], *, hw: str, kernel: str | None, validator: str) -> list[Target]:
    """SUITE (``rocmlir_2022``, ``rocmlir_2022:N`` = its N smallest tests, ``k-sweep[:N]``), suite
    test names and config texts, in order; each checked by :func:`validation.run.plan`, its
    tensor format recorded (``Target.input``). ConfigError when the tests mix fp16 and bf16 (a
    sweep's thresholds, functions and mutants are of one format)."""
    out: list[Target] = []
    for item in items:
        text = str(item).strip()
        name, _, count = text.partition(":")
        if name == "k-sweep":
            configs = K_SWEEP[: _count(count, text)] if count else K_SWEEP
            out += [
                Target(c, f"k-sweep/C{c.split('-in_channels=')[1].split()[0]}", hw, kernel, validator) for c in configs
            ]
            continue
        if name == "rocmlir_2022" and " " not in text:
            entries = suite_entries()
            if count:
                entries = sorted(entries, key=_macs)[: _count(count, text)]
            out += [Target(e.name, e.name, hw, kernel, validator) for e in entries]
            continue
        out.append(Target(text, text if len(text) < 60 else text[:57] + "...", hw, kernel, validator))
    for i, t in enumerate(out):
        _, kmodel, _ = plan(_config(t), hw=t.hw, kernel=t.kernel, validator=t.validator)
        out[i] = dataclasses.replace(t, input=kmodel.input)
    formats = {t.input: t.label for t in out}
    if len(formats) > 1:
        named = ", ".join(f"{label} is {fmt}" for fmt, label in formats.items())
        raise ConfigError(f"-t: design sweeps one data type at a time ({named}); sweep them apart")
    return out


def sweep_format(targets: Sequence[Target]) -> str:
    """The tensor format of ``targets`` (fp16 when there are none); ValueError when they mix."""
    formats = sorted({t.input for t in targets})
    if len(formats) > 1:
        raise ValueError(f"targets: mix {' and '.join(formats)} tests; a sweep takes one data type")
    return formats[0] if formats else "fp16"


def _config(t: Target):
    if " " not in t.config:
        try:
            return suite_config(t.config)
        except ValueError:
            pass
    return t.config


def _gemm_k(problem) -> int:
    return max(s.k for s in sub_gemms(problem))


class CompareCache:
    """:func:`validation.metrics.compare` of one validation against kernel outputs, each
    (output contents, measuring options) measured once: options are normalised (``allclose``
    None is the data type's torch defaults, which :func:`compare` uses then), and outputs are
    keyed by their bytes, so verifiers that measure alike, and mutants that leave the output
    as it was, share one comparison. ``fmt``: the tests' format, the default ``dtype_hint``."""

    def __init__(self, validation32: np.ndarray, fmt: str = "fp16"):
        self.validation32 = validation32
        self.fmt = fmt
        self._results: dict = {}
        self.computed = 0

    def result(self, seen16: np.ndarray, **opts):
        opts = {**DEFAULT_COMPARE, "dtype_hint": self.fmt, **opts}
        if opts["dtype_hint"] is None:
            opts["dtype_hint"] = self.fmt
        if opts["allclose"] is None:
            opts["allclose"] = TORCH_TOLERANCES[str(opts["dtype_hint"])]
        opts["allclose"] = tuple(float(x) for x in opts["allclose"])
        seen16 = np.ascontiguousarray(seen16)
        digest = hashlib.blake2b(seen16.view(np.uint8).reshape(-1), digest_size=16).digest()
        pairs = opts.pop("distinct_pairs")
        key = (digest, str(seen16.dtype), seen16.shape, repr(sorted(opts.items())))
        # a result with diff4's distinct pairs serves a request without them, not the reverse
        found = self._results.get((key, True)) or (None if pairs else self._results.get((key, False)))
        if found is None:
            found = self._results[key, pairs] = compare(self.validation32, seen16, distinct_pairs=pairs, **opts)
            self.computed += 1
        return found


#: The options :class:`CompareCache` fills in (those of :func:`compare` that verifiers set;
#: MLU-OPS diff4's distinct pairs only for the verifiers that check diff4).
DEFAULT_COMPARE = {"dtype_hint": "fp16", "study_quirks": None, "round_validation": None, "allclose": None,
                   "equal_nan": False, "distinct_pairs": False}  # fmt: skip


def verdict_failed(thresholds: Thresholds, seen16, cache: CompareCache) -> bool:
    """Whether ``thresholds`` fails ``seen16``, measured through ``cache`` (with MLU-OPS diff4's
    distinct pairs only when a check reads diff4)."""
    opts = thresholds.compare_options() | {"distinct_pairs": thresholds.reads_diff4}
    return not evaluate(cache.result(seen16, **opts), thresholds).passed


#: bug mutants of convolution geometry, and why a rocmlir-gen GEMM config (a 1×1 convolution
#: standing for the GEMM, :mod:`validation.configs.gemm`) cannot have them
GEMM_GEOMETRY_BUGS = {
    "padding-border": "a GEMM has no padding or image border",
    "wrong-geometry": "a GEMM has no stride or dilation",
    "swapped-layout": "a GEMM has no image layout (its transposes are -transA/-transB/-transC)",
}


def target_gemm(t: Target):
    """The :class:`validation.configs.GemmShape` of a target that is a rocmlir-gen GEMM, else None."""
    config = _config(t)
    if isinstance(config, str):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConfigWarning)  # resolve_targets has read it once already
            config = parse_config(config)
    return config.gemm


def seed_job(task: SeedTask) -> dict:
    """One (test, generator, seed): the correct kernel's metrics (and bounds), each validation
    function's verdict on it and on every mutant, and each mutant's size (fraction of changed
    outputs, largest relative change, against the correct kernel in the same split-K add order as
    the mutants), and why a mutant could not apply. The outputs are the kernel's format (fp16 or
    bf16: inputs drawn, output and validation rounded, epsilonDiff in its ulps). Pure: plain
    values back, nothing written."""
    t = task.target
    config, kmodel, vmodel = plan(_config(t), hw=t.hw, kernel=t.kernel, validator=t.validator)
    problem = config.problem
    fmt = kmodel.input
    k = _gemm_k(problem)
    inputs = task.generator.inputs(problem, task.seed, k, fmt)
    op = ConvGemm(problem, x=inputs.get("input"), w=inputs.get("filter"), dy=inputs.get("output"), fmt=fmt)
    (validation,) = op.compute([vmodel.arithmetic(problem)])
    # the correct kernel and every mutant, GEMMs shared; split-K atomics: all in the add order of
    # ensemble member seed mod 128 (models.bugs.emulate_mutants)
    member = task.seed % ATOMIC_ORDERS.members
    mutants, skipped = task.mutants, {}
    if config.gemm is not None:  # the convolution-geometry bugs have nothing to act on in a GEMM
        skipped = {m.label: bugs.NotApplicable(f"{m.name}: {GEMM_GEOMETRY_BUGS[m.name]}")
                   for m in mutants if m.name in GEMM_GEOMETRY_BUGS}  # fmt: skip
        mutants = tuple(m for m in mutants if m.label not in skipped)
    good, emulated = bugs.emulate_mutants(problem, kmodel, inputs, mutants, member=member)
    emulated = {**emulated, **skipped}
    k16 = round_output(good.kernel_fp32, fmt)  # split-K atomics: good.partials.member(member), bit for bit
    cache = CompareCache(validation, fmt)
    res = cache.result(k16, round_validation=fmt)
    out: dict = {
        "target": t.label,
        "generator": task.generator.name,
        "seed": task.seed,
        "K": k,
        "metrics": {m: float(res.metric(m)) for m in NOISE_METRICS},
        "format": fmt,
        "max_ref": float(np.max(np.abs(validation))) if np.size(validation) else 0.0,
        "n_out": int(np.size(validation)),
        "verdicts": {},
        "exact": {},
        "size": {},
        "not_applicable": {},
    }
    kinds = {f.kind for f in task.functions}
    eb = None
    if task.bounds or "predicted-bound" in kinds:
        eb = element_bounds(problem, kmodel, vmodel, inputs, validation)  # in kmodel.input's terms
    if task.bounds:
        out["bounds"] = {kind: metric_bounds(eb[kind], validation) for kind in BOUND_KINDS}
        out["chains"] = {"kernel": list(eb["chains"]["kernel"]), "validator": list(eb["chains"]["validator"])}
    seen_by_bug: dict[str, np.ndarray | None] = {"none": k16}
    ref16 = k16  # the mutants' reference: the same add order
    v16 = round_output(np.asarray(validation, np.float32), fmt).astype(np.float64)
    floor = resolve_format(fmt).smallest_subnormal  # fp16 2^-24: no division by zero
    for m in task.mutants:
        em = emulated[m.label]
        if isinstance(em, bugs.NotApplicable):
            seen_by_bug[m.label] = None
            out["exact"][m.label] = None
            out["not_applicable"][m.label] = str(em)
            continue
        seen = np.asarray(m.seen(round_output(em.kernel_fp32, fmt), validation, inputs))
        seen_by_bug[m.label] = seen
        changed = seen.view(np.uint16) != ref16.view(np.uint16)
        out["exact"][m.label] = bool(changed.any())
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = np.abs(seen.astype(np.float64) - ref16.astype(np.float64)) / np.maximum(np.abs(v16), floor)
        rel = rel[changed]
        out["size"][m.label] = [
            float(changed.mean()),
            float(np.nanmax(rel)) if rel.size and np.isfinite(rel).any() else math.inf,
        ]
    out["trust"] = _trust(validation, inputs)
    lo_hi = None
    if "emulated" in kinds and good.partials is not None:
        members = np.stack([good.partials.member(i) for i in range(EMULATED_MEMBERS)]).astype(np.float32)
        lo_hi = (members.min(axis=0), members.max(axis=0))
    for f in task.functions:
        verdicts = {}
        for bug, seen in seen_by_bug.items():
            if seen is None:
                verdicts[bug] = None
            elif f.kind == "emulated":
                verdicts[bug] = _outside_emulated(seen, ref16, lo_hi)
            elif f.kind == "predicted-bound":
                d = np.abs(seen.astype(np.float64) - v16)
                verdicts[bug] = bool(~(d <= eb["unit"]).all())  # NaN fails
            else:
                verdicts[bug] = verdict_failed(f.thresholds, seen, cache)
        out["verdicts"][f.label] = verdicts
    return out


def _outside_emulated(seen: np.ndarray, kernel16: np.ndarray, lo_hi) -> bool:
    """The ``emulated`` function: fails unless ``seen`` is the emulated kernel bit for bit (split-K
    atomics: every element inside the range of :data:`EMULATED_MEMBERS` add orders)."""
    if lo_hi is None:
        return bool((seen.view(np.uint16) != kernel16.view(np.uint16)).any())
    s = seen.astype(np.float32)
    return bool(~((s >= lo_hi[0]) & (s <= lo_hi[1])).all())


def _trust(validation: np.ndarray, inputs) -> dict:
    """The trust checks of careful harnesses: mostly-zero outputs, constant inputs."""
    v = np.asarray(validation)
    zero = float((v == 0).mean()) if v.size else 1.0
    constant = any(np.unique(np.asarray(a).reshape(-1)[:4096]).size <= 1 for a in inputs.values())
    return {"zero_fraction": zero, "constant_input": bool(constant), "trustworthy": zero <= 0.5 and not constant}


class EnginePool:
    """A :class:`validation.engine.Engine` (a process pool, a Dask LocalCluster, an existing Dask
    cluster) with the ``map``/``shutdown`` of an executor: results in task order, whatever order the workers
    finish in, so a sweep's answer does not depend on where it ran."""

    def __init__(self, engine):
        self.engine = engine.__enter__()

    def map(self, fn, tasks, chunksize: int = 1):
        items = [(i, fn, t) for i, t in enumerate(tasks)]
        done: dict[int, object] = {}
        following = 0
        for i, result in self.engine.map_unordered(_indexed_call, items):
            done[i] = result
            while following in done:
                yield done.pop(following)
                following += 1

    def shutdown(self) -> None:
        self.engine.__exit__(None, None, None)


def _indexed_call(item):
    i, fn, task = item
    return i, fn(task)


def make_pool(jobs: int, scheduler: str | None, n_tasks: int):
    """The workers of a sweep, on :class:`validation.engine.Engine` (the one engine of every
    sweep): None when they are this process (``jobs`` 1), else an :class:`EnginePool`;
    ``scheduler`` None is a local process pool (``"processes"``), else ``"auto"``, ``"local"`` or
    ``"tcp://HOST:PORT"``."""
    engine = Engine("processes" if scheduler is None else scheduler, jobs, n_tasks=n_tasks)
    return None if engine.kind == "serial" else EnginePool(engine)


def run_jobs(
    tasks: Sequence[SeedTask],
    jobs: int = 1,
    progress: Callable[[int], None] | None = None,
    pool: EnginePool | None = None,
) -> list[dict]:
    """:func:`seed_job` over ``tasks``: on ``pool``, else on a process pool of ``jobs`` workers
    (:func:`make_pool`), or in this process; results in task order."""
    if jobs < 1:
        raise ValueError(f"jobs: must be ≥ 1, got {jobs}")
    results: list[dict] = []
    own = pool is None
    if own:
        pool = make_pool(jobs, None, len(tasks))
    if pool is None:
        for t in tasks:
            results.append(seed_job(t))
            if progress:
                progress(1)
        return results
    try:
        for r in pool.map(seed_job, tasks, chunksize=1):
            results.append(r)
            if progress:
                progress(1)
    finally:
        if own:
            pool.shutdown()
    return results


@dataclass
class DesignResult:
    """Everything a design sweep computed, and what it was computed from."""

    inputs: dict
    noise: list[dict] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)  # per (validator, bug): rates over all tests
    per_target: list[dict] = field(default_factory=list)  # per (test, validator, bug)
    exact: list[dict] = field(default_factory=list)  # per bug: detected by exact comparison
    smallest: list[dict] = field(default_factory=list)
    ranking: list[dict] = field(default_factory=list)
    #: per mutant that could not apply in some runs: why (the first reason met) and in how many
    not_applicable: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"inputs": self.inputs, "records": self.records, "noise": self.noise, "per_target": self.per_target,
                "exact": self.exact, "smallest": self.smallest, "ranking": self.ranking,
                "not_applicable": self.not_applicable}  # fmt: skip


#: generator kinds whose outputs the output format's rounding acts on (``exact`` and ``sparse``
#: make integer results the kernel and the validation both hold exactly)
ROUNDING_KINDS = ("float", "away", "int")


def rounding_floors(rows: list[dict]) -> dict[str, float]:
    """The smallest thresholds a rule may recommend for inputs the output rounding acts on: one
    ulp of the output format at the largest reference magnitude for ``max_abs_diff``, one ulp
    relative (2^(1−p), p the format's precision) for ``max_rel_diff``, and for ``rms`` (RMS over
    the largest magnitude, rocMLIR's) one element one such ulp apart. Two correct roundings of
    nearly the same accumulation land on neighbouring values, so a fitted threshold of zero only
    says that the fit seeds happened to round alike (a bf16 K = 2,304 convolution has elements
    one ulp apart on other seeds). Empty for ``exact`` and ``sparse`` inputs, whose results are
    exact integers, and for rows without the reference's size."""
    if not rows or "max_ref" not in rows[0] or str(rows[0]["generator"]).split(":")[0] not in ROUNDING_KINDS:
        return {}
    fmt = resolve_format(rows[0].get("format", "fp16"))
    max_ref = max(r["max_ref"] for r in rows)
    n = max(1, min(r["n_out"] for r in rows))
    if not max_ref > 0 or not math.isfinite(max_ref):
        return {}
    ulp = 2.0 ** (math.floor(math.log2(max_ref)) - fmt.fraction_bits)
    return {"max_abs_diff": ulp, "max_rel_diff": 2.0**-fmt.fraction_bits, "rms": ulp / (max_ref * math.sqrt(n))}


def fit_noise(rows: list[dict], rate: float) -> dict:
    """Noise summary of one (test, generator) from its fit-seed rows: per metric the threshold at
    ``rate`` (:func:`validation.design.stats.threshold_at`), never below :func:`rounding_floors`."""
    out = {"target": rows[0]["target"], "generator": rows[0]["generator"], "K": rows[0]["K"],
           "seeds": [r["seed"] for r in rows], "metrics": {}}  # fmt: skip
    per = rate / len(RECOMMENDED_METRICS)
    floors = rounding_floors(rows)
    if floors:
        out["rounding_floor"] = floors
    for m in NOISE_METRICS:
        vals = [r["metrics"][m] for r in rows]
        t, est = threshold_at(vals, per if m in RECOMMENDED_METRICS else rate)
        if m in floors and not math.isnan(t) and t < floors[m]:
            t = floors[m]  # the fit seeds happened to round alike; other seeds need not
        finite = [v for v in vals if not math.isnan(v)]
        rec = {
            "min": min(finite) if finite else math.nan,
            "median": float(np.median(finite)) if finite else math.nan,
            "max": max(finite) if finite else math.nan,
            "threshold": t,
            "target_rate": per if m in RECOMMENDED_METRICS else rate,
            "estimated": est.to_dict(),
        }
        if "bounds" in rows[0] and m in rows[0]["bounds"]["worst"]:
            rec["bounds"] = {kind: max(r["bounds"][kind][m] for r in rows) for kind in BOUND_KINDS}
        out["metrics"][m] = rec
    if "chains" in rows[0]:
        out["chains"] = rows[0]["chains"]
    return out


def _recommended(fit: dict, gen: InputGenerator, fmt: str = "fp16") -> ValidationFunction:
    limits = {m: fit["metrics"][m]["threshold"] for m in RECOMMENDED_METRICS}
    th = Thresholds.from_mapping(limits, name="recommended", round_validation=fmt, dtype=fmt)
    return ValidationFunction("recommended", th, gen, dtype=fmt)


def design(
    targets: Sequence[Target],
    functions: Sequence[ValidationFunction],
    *,
    seeds: int = 20,
    mutants: Sequence | None = None,
    rate: float = 0.01,
    recommend: bool = True,
    jobs: int = 1,
    progress: Callable[[int], None] | None = None,
    total: Callable[[int], None] | None = None,
    scheduler: str | None = None,
) -> DesignResult:
    """The noise model on ``seeds`` fit seeds and the evaluation on ``seeds`` fresh ones, for
    every target, generator (those of ``functions``) and mutant (default
    :func:`models.bugs.default_mutants` of the targets' format). The targets share one format
    (fp16 or bf16) and the functions are built for it (``ValidationFunction.dtype``): ValueError
    otherwise. ``rate``: target false-alarm rate of the recommended
    thresholds (split evenly over :data:`RECOMMENDED_METRICS`). ``total`` is told the number of
    jobs before they run (for a progress bar). ``scheduler``: where the ``jobs`` workers run
    (:func:`make_pool`; the results are the same anywhere)."""
    if seeds < 1:
        raise ValueError(f"seeds: must be ≥ 1, got {seeds}")
    if not 0 < rate < 1:
        raise ValueError(f"rate: must be in (0, 1), got {rate}")
    fmt = sweep_format(targets)
    wrong = [f.label for f in functions if f.dtype != fmt]
    if wrong:
        raise ValueError(f"functions: {', '.join(wrong)} are not built for {fmt} (parse_functions(..., dtype={fmt!r}))")
    mutants = tuple(bugs.default_mutants(fmt) if mutants is None else mutants)
    gens: list[InputGenerator] = []
    for f in functions:
        if f.generator not in gens:
            gens.append(f.generator)
    fit_tasks = [SeedTask(t, g, FIT_SEED0 + i, bounds=True) for t in targets for g in gens for i in range(seeds)]
    n_eval = len(targets) * len(gens) * seeds
    if total:
        total(len(fit_tasks) + n_eval)
    pool = make_pool(jobs, scheduler, len(fit_tasks))
    try:
        return _design(targets, functions, gens, fit_tasks, seeds, mutants, rate, recommend, jobs, progress, pool)
    finally:
        if pool is not None:
            pool.shutdown()


def _design(targets, functions, gens, fit_tasks, seeds, mutants, rate, recommend, jobs, progress, pool):
    fit_rows = run_jobs(fit_tasks, jobs, progress, pool)
    noise = []
    recommended: dict[tuple[str, str], ValidationFunction] = {}
    for ti, t in enumerate(targets):
        for gi, g in enumerate(gens):
            rows = fit_rows[(ti * len(gens) + gi) * seeds : (ti * len(gens) + gi + 1) * seeds]
            fit = fit_noise(rows, rate)
            noise.append(fit)
            if recommend:
                recommended[(t.label, g.name)] = _recommended(fit, g, t.input)
    eval_tasks = []
    for t in targets:
        for g in gens:
            fs = tuple(f for f in functions if f.generator == g)
            if recommend:
                fs += (recommended[(t.label, g.name)],)
            eval_tasks += [SeedTask(t, g, 1 + i, fs, mutants) for i in range(seeds)]
    rows = run_jobs(eval_tasks, jobs, progress, pool)
    return _aggregate(rows, noise, targets, functions, gens, mutants, seeds, rate, recommend)


def _aggregate(rows, noise, targets, functions, gens, mutants, seeds, rate, recommend) -> DesignResult:
    labels = [f.label for f in functions] + ([f"recommended@{g.name}" for g in gens] if recommend else [])
    bug_labels = ["none"] + [m.label for m in mutants]
    tally: dict = {}
    per_target: dict = {}
    for r in rows:
        for vf, verdicts in r["verdicts"].items():
            for bug, failed in verdicts.items():
                if failed is None:
                    continue
                for key, store in (((vf, bug), tally), ((r["target"], r["K"], vf, bug), per_target)):
                    f, n = store.get(key, (0, 0))
                    store[key] = (f + int(failed), n + 1)
    records = []
    for vf in labels:
        for bug in bug_labels:
            f, n = tally.get((vf, bug), (0, 0))
            records.append({"validator": vf, "bug": bug, **Rate(f, n).to_dict()})
    pt = [
        {"target": k[0], "K": k[1], "validator": k[2], "bug": k[3], **Rate(*v).to_dict()} for k, v in per_target.items()
    ]
    exact = []
    not_applicable = []
    for m in mutants:
        vals = [r["exact"][m.label] for r in rows if r["exact"].get(m.label) is not None]
        exact.append({"bug": m.label, **Rate(sum(vals), len(vals)).to_dict()})
        why = [r["not_applicable"][m.label] for r in rows if m.label in r.get("not_applicable", {})]
        if why:
            not_applicable.append({"bug": m.label, "runs": len(why), "of": len(rows), "why": why[0]})
    smallest = []
    untrusted = {}
    for r in rows:
        if not r["trust"]["trustworthy"]:
            untrusted[r["target"]] = untrusted.get(r["target"], 0) + 1
    for vf in labels:
        det_frac, det_mag = math.inf, math.inf
        for r in rows:
            for bug, failed in r["verdicts"].get(vf, {}).items():
                if bug != "none" and failed and bug in r["size"]:
                    det_frac = min(det_frac, r["size"][bug][0])
                    det_mag = min(det_mag, r["size"][bug][1])
        smallest.append({"validator": vf, "smallest_fraction": det_frac, "smallest_rel_change": det_mag})
    ranking = []
    for vf in labels:
        fa = next(r for r in records if r["validator"] == vf and r["bug"] == "none")
        det = [r for r in records if r["validator"] == vf and r["bug"] != "none" and r["runs"]]
        mean_det = float(np.mean([r["rate"] for r in det])) if det else math.nan
        ranking.append({"validator": vf, "false_alarm": fa["rate"], "false_alarm_ci_high": fa["ci_high"],
                        "mean_detection": mean_det, "bugs": len(det)})  # fmt: skip
    ranking.sort(key=lambda r: ((r["false_alarm"] or 0) > rate * 5, -(r["mean_detection"] or 0), r["false_alarm"] or 0))
    inputs = {
        "tests": [
            {
                "label": t.label,
                "config": t.config,
                "hw": t.hw,
                "kernel": t.kernel or "config's own",
                "validator": t.validator,
                "gemm": None if (gemm := target_gemm(t)) is None else gemm.describe(),
            }
            for t in targets
        ],  # fmt: skip
        "validators": [f.describe() for f in functions],
        "generators": [g.name for g in gens],
        "seeds_fit": [FIT_SEED0, FIT_SEED0 + seeds - 1],
        "seeds_eval": [1, seeds],
        "mutants": [m.label for m in mutants],
        "target_false_alarm_rate": rate,
        "confidence": 0.95,
        "interval": "Clopper-Pearson",
        "untrustworthy_runs": untrusted,
        "format": sweep_format(targets),
    }
    return DesignResult(inputs, noise, records, pt, exact, smallest, ranking, not_applicable)
