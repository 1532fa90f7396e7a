"""Running jobs through :class:`validation.engine.Engine`: in this process, a process pool or Dask
(numba single-threaded in each worker).

Jobs run smallest first, so an interrupted run has finished (and cached) as many tests as it
could; each finished job is reported to ``on_done`` as it arrives, and a progress bar counts work
(multiply-adds and compared elements, in G), so its rate and ETA hold from the smallest tests to
the largest.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence

from ..engine import Engine
from ..files import append_text
from ..progress import Heartbeat
from .cache import Cache
from .emulate import Job, run_job

__all__ = ["execute"]


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
    scheduler: str = "auto",
    heartbeat_s: float | None = None,
    log_errors: list[str] | None = None,
) -> dict[str, dict]:
    """Run ``jobs`` on ``jobs_n`` workers of ``scheduler`` (:class:`validation.engine.Engine`);
    returns {cache key: result}. ``log_path``: append one line per finished job (test, range,
    seed, inputs, lines, seconds). Progress: work done (G multiply-adds and compared elements),
    jobs done, and where the jobs run (the Dask dashboard link). ``heartbeat_s``: without a bar,
    print one plain line on stderr (jobs and share of the work done, time elapsed and left) when
    a job finishes at least this many seconds after the last such line: for logs, where a bar's
    carriage returns would not show. A line that cannot be appended to ``log_path`` (a full disk,
    ``ulimit -f``) stops the log, not the run: why is appended to ``log_errors`` (raised as an
    OSError when that is None)."""
    results: dict[str, dict] = {}
    if not jobs:
        return results
    bar = None
    if progress:
        from tqdm import tqdm

        from ..progress import bar_width

        # counted in whole work units (not rounded to 0.1 G per job: small jobs would add 0 and
        # leave the bar at 0 %), shown scaled (k, M, G)
        bar = tqdm(
            total=sum(int(j.weight) for j in jobs),
            unit="w",
            unit_scale=True,
            desc="emulating",
            file=sys.stderr,
            smoothing=0.05,
            mininterval=0.5 if sys.stderr.isatty() else 30.0,
            leave=False,
            **bar_width(sys.stderr),  # a terminal of 0 columns still shows progress
        )

    n_done = 0
    where = ""
    beat = None
    if bar is None and heartbeat_s is not None:
        beat = Heartbeat(heartbeat_s, len(jobs), "jobs", total_work=sum(j.weight for j in jobs) or 1.0)

    def done(job: Job, res: dict, seconds: float) -> None:
        nonlocal n_done, log_path
        n_done += 1
        results.update(res)
        if log_path is not None:
            try:  # never through a link, never blocking on a FIFO (validation.files.append_text)
                append_text(
                    log_path,
                    f"{job.test}\t{job.range}\t{job.seed}\t{job.rand_type}\t{len(job.requests)}\t{seconds:.1f}\n",
                    "--out",
                )
            except (OSError, ValueError) as err:
                if log_errors is None:
                    raise
                why = err.strerror or type(err).__name__ if isinstance(err, OSError) else str(err).split(": ", 1)[-1]
                log_errors.append(f"--out: cannot append to {str(log_path)!r} ({why}); the job log stopped there")
                log_path = None
        if bar is not None:
            bar.update(int(job.weight))
            bar.set_postfix_str(f"jobs {n_done}/{len(jobs)}{where} {job.test[-28:]} {job.range}", refresh=False)
        if beat is not None:
            beat.update(1, job.weight)
        if on_done is not None:
            on_done(job, res)

    def started(engine: Engine) -> None:
        nonlocal where
        if engine.kind != "serial":
            print(f"fp16emu: {len(jobs)} jobs: {engine.describe()}", file=sys.stderr)
            if engine.dashboard:
                where = f" {engine.dashboard}"

    try:
        with Engine(scheduler, jobs_n, len(jobs)) as engine:
            for note in engine.notes:
                print(f"fp16emu: note: {note}", file=sys.stderr)
            for job, res, seconds in engine.map_unordered(_worker, [(j, cache_dir) for j in jobs], started):
                done(job, res, seconds)
    finally:
        if bar is not None:
            bar.close()
    return results
