"""What to reproduce: run sets, GPUs, kernels, validators, ranges, tests, and the ensembles' size."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from models.kernels import ATOMIC_ORDERS

from ..configs import ConfigError
from ..configs.limits import check_count
from ..suites import suite_entries, suite_entry
from .measured import GPUS, KERNELS, RAND0_SEEDS, RANGES, RUN_SETS, VALIDATORS, MeasuredLine

__all__ = ["GRANULARITIES", "Selection", "smallest_tests", "test_macs"]

#: How the atomic add orders of an ensemble are drawn: per output element or per output tile.
GRANULARITIES = ("tile", "element")


def _split(value, option: str, allowed: Sequence[str], *, lower: bool = True) -> tuple[str, ...]:
    if value is None:
        return tuple(allowed)
    items = value.split(",") if isinstance(value, str) else list(value)
    items = [str(i).strip() for i in items if str(i).strip()]
    if lower:
        items = [i.lower() for i in items]
    aliases = {"non-xdlops": "nonxdlops", "pv": "cpu", "pv-with-gpu": "gpu", "pv_with_gpu": "gpu"}
    items = [aliases.get(i, i) for i in items]
    items = [f"r{i[4:]}" if i.startswith("rand") else i for i in items]
    if not items:
        raise ValueError(f"{option}: empty; allowed values: {','.join(allowed)}")
    bad = [i for i in items if i not in allowed]
    if bad:
        raise ValueError(f"{option}: {bad[0]!r} is not one of {','.join(allowed)}")
    return tuple(dict.fromkeys(items))


def test_macs(entry) -> int:
    """Multiply-adds of a suite test's GEMMs: what a job of it costs."""
    n = entry.gemm_n or entry.n_out_elements // max(entry.gemm_m, 1)
    return entry.gemm_m * entry.gemm_k * n * max(entry.gemm_g, 1)


def smallest_tests(count: int) -> list[str]:
    """The ``count`` suite tests with the least work (multiply-adds), smallest first."""
    return [e.name for e in sorted(suite_entries(), key=test_macs)[:count]]


#: the most fair_rand0 seeds one run may ask for (the study ran 3)
MAX_RAND0_SEEDS = 1000


@dataclass(frozen=True)
class Selection:
    """What to reproduce: run sets, GPUs, kernels, validators, ranges, tests (None = all), and
    how to model what cannot be pinned down (atomic ensembles, fair_rand0 seeds)."""

    run_sets: tuple[str, ...] = ("fair_1",)
    gpus: tuple[str, ...] = GPUS
    kernels: tuple[str, ...] = KERNELS
    validators: tuple[str, ...] = VALIDATORS
    ranges: tuple[str, ...] = tuple(RANGES)
    tests: tuple[str, ...] | None = None
    members: int = ATOMIC_ORDERS.members
    granularity: str = ATOMIC_ORDERS.granularity
    rand0_seeds: tuple[int, ...] = RAND0_SEEDS
    diagnose: bool = True

    def __post_init__(self):
        check_count(self.members, "--members", env="members")  # 1..FP16EMU_MAX_MEMBERS, as run's
        if len(self.rand0_seeds) > MAX_RAND0_SEEDS:
            raise ValueError(f"--rand0-seeds: {len(self.rand0_seeds)} seeds, over the limit of {MAX_RAND0_SEEDS}")
        if self.granularity not in GRANULARITIES:
            raise ValueError(f"--granularity: {self.granularity!r} is not one of {','.join(GRANULARITIES)}")
        if not self.rand0_seeds or any(int(s) < 1 for s in self.rand0_seeds):
            raise ValueError("--rand0-seeds: need one or more positive seeds")

    @classmethod
    def from_options(
        cls,
        *,
        run_set=None,
        gpu=None,
        kernel=None,
        validator=None,
        range=None,
        tests=None,
        smallest: int | None = None,
        **kw,
    ) -> Selection:
        """A selection from comma-separated option strings (the CLI's); ``ValueError`` with one
        line naming the option and its allowed values for anything unknown."""
        names = None
        if tests is not None:
            raw = [t.strip() for t in (tests.split(",") if isinstance(tests, str) else tests) if t.strip()]
            if not raw:
                raise ValueError("--tests: empty; give suite test names separated by commas")
            names = []
            for t in raw:
                try:
                    names.append(suite_entry(t).name)
                except ConfigError as err:
                    raise ValueError(f"--tests: {' '.join(str(err).split())}") from None
        if smallest is not None:
            if smallest < 1:
                raise ValueError(f"--smallest: must be a positive integer, got {smallest}")
            small = smallest_tests(smallest)
            names = small if names is None else [n for n in names if n in small]
        return cls(
            run_sets=_split(run_set if run_set is not None else "fair_1", "--run-set", RUN_SETS),
            gpus=_split(gpu, "--gpu", GPUS),
            kernels=_split(kernel, "--kernel", KERNELS),
            validators=_split(validator, "--validator", VALIDATORS),
            ranges=_split(range, "--range", tuple(RANGES)),
            tests=None if names is None else tuple(dict.fromkeys(names)),
            **kw,
        )

    def select(self, measured: Iterable[MeasuredLine]) -> list[MeasuredLine]:
        tests = None if self.tests is None else set(self.tests)
        return [
            m
            for m in measured
            if m.run_set in self.run_sets
            and m.gpu in self.gpus
            and m.kernel in self.kernels
            and m.validator in self.validators
            and m.range in self.ranges
            and (tests is None or m.test_name in tests)
        ]
