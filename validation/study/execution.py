"""Running jobs: in this process, or in a pool of worker processes (numba single-threaded in each).

Jobs run smallest first, so an interrupted run has finished (and cached) as many tests as it
could; each finished job is reported to ``on_done`` as it arrives, and a progress bar counts work
(multiply-adds and compared elements, in G), so its rate and ETA hold from the smallest tests to
the largest.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence

from .cache import Cache
from .emulate import Job, run_job

__all__ = ["execute"]


def _worker_init() -> None:
    # one numba thread per worker: the pool is the parallelism (results do not depend on it)
    import numba

    numba.set_num_threads(1)


def _worker(args):
    job, cache_dir = args
    t0 = time.time()
    return job, run_job(job, Cache(cache_dir)), time.time() - t0


def execute(
    jobs: Sequence[Job],
    jobs_n: int,
    cache_dir: str | None,
    progress: bool,
    on_done: Callable[[Job, dict], None] | None = None,
    log_path=None,
) -> dict[str, dict]:
    """Run ``jobs`` (a process pool when ``jobs_n`` > 1); returns {cache key: result}.
    ``log_path``: append one line per finished job (test, range, seed, inputs, lines, seconds)."""
    results: dict[str, dict] = {}
    if not jobs:
        return results
    bar = None
    if progress:
        from tqdm import tqdm

        # counted in whole work units (not rounded to 0.1 G per job: small jobs would add 0 and
        # leave the bar at 0 %), shown scaled (k, M, G)
        bar = tqdm(
            total=sum(int(j.weight) for j in jobs),
            unit="w",
            unit_scale=True,
            desc="emulating",
            dynamic_ncols=True,
            file=sys.stderr,
            smoothing=0.05,
            mininterval=0.5 if sys.stderr.isatty() else 30.0,
            leave=False,
        )

    def done(job: Job, res: dict, seconds: float) -> None:
        results.update(res)
        if log_path is not None:
            with open(log_path, "a", encoding="utf-8") as fh:
                fh.write(f"{job.test}\t{job.range}\t{job.seed}\t{job.rand_type}\t{len(job.requests)}\t{seconds:.1f}\n")
        if bar is not None:
            bar.update(int(job.weight))
            bar.set_postfix_str(f"{job.test[-28:]} {job.range}", refresh=False)
        if on_done is not None:
            on_done(job, res)

    try:
        if jobs_n <= 1:
            cache = Cache(cache_dir)
            for job in jobs:
                t0 = time.time()
                res = run_job(job, cache)
                done(job, res, time.time() - t0)
        else:
            import multiprocessing as mp

            ctx = mp.get_context("spawn")
            # workers live for the whole run: each compiles (or loads) the numba kernels once
            with ctx.Pool(jobs_n, initializer=_worker_init) as pool:
                for job, res, seconds in pool.imap_unordered(_worker, [(j, cache_dir) for j in jobs], chunksize=1):
                    done(job, res, seconds)
    finally:
        if bar is not None:
            bar.close()
    return results
