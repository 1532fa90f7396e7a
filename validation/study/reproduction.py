"""``reproduce()``: select the measured lines, plan the jobs, run what the cache lacks, judge every
line, diagnose the ones that differ, and report."""

from __future__ import annotations

import dataclasses
import io
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from ..engine import check_scheduler
from ..files import check_output_file
from ..suites import suite_config, suite_entry
from .cache import Cache, request_key
from .diagnose import diagnose
from .emulate import Request, make_jobs
from .execution import execute
from .judge import LineResult, judge
from .measured import STUDY_SEED, MeasuredLine, missing_files, read_measured
from .recipes import default_recipe
from .report import Report, print_line
from .selection import Selection

__all__ = ["reproduce", "plan_jobs", "check_out_dir"]


#: what a reproduction writes in ``--out``: replaced atomically (a link there is replaced), and
#: appended to (never through a link)
OUT_FILES, OUT_LOG = ("report.md", "reproduce.csv"), "jobs.tsv"


def check_out_dir(path, option: str = "--out", *, files=(), log=None, link=True) -> Path:
    """``path`` as a folder the run can write into, created if needed; checked before any
    compute starts. ValueError (one line naming ``option``) for a path that is a file, lies under
    a file, cannot be created or is not writable, is a symbolic link when ``link`` is False, or
    holds something other than a regular file or link at one of ``files`` (written by
    :func:`validation.files.write_atomically`), or other than a regular file at ``log`` (appended to)."""
    p = Path(path)
    if not link and p.is_symlink():
        raise ValueError(f"{option}: {str(p)!r} is a symbolic link, which is not followed; remove it")
    if p.exists() and not p.is_dir():
        raise ValueError(f"{option}: {str(p)!r} is a file, not a folder")
    anc = p
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    if anc.exists() and not anc.is_dir():
        raise ValueError(f"{option}: {str(p)!r} lies under {str(anc)!r}, which is a file")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(
            f"{option}: cannot create the folder {str(p)!r} ({err.strerror or type(err).__name__})"
        ) from None
    try:
        fd, probe = tempfile.mkstemp(prefix=".fp16emu-write-check.", dir=p)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise ValueError(
            f"{option}: the folder {str(p)!r} is not writable ({err.strerror or type(err).__name__})"
        ) from None
    for name in files:
        check_output_file(p / name, option)
    if log is not None and os.path.lexists(p / log) and ((p / log).is_symlink() or not (p / log).is_file()):
        what = "a symbolic link, which is not followed" if (p / log).is_symlink() else "not a regular file"
        raise ValueError(f"{option}: {str(p / log)!r} is {what}; remove it")
    return p


def plan_jobs(selected: list[MeasuredLine], selection: Selection, cache: Cache):
    """Group the selected lines into emulation jobs with one request per (GPU, kernel, validator,
    run set) line; returns (jobs, per-line [(request key, mode)], cached results)."""
    line_keys: dict[int, list[tuple[str, str]]] = {}
    todo: dict[tuple, dict[str, Request]] = defaultdict(dict)
    cached: dict[str, dict] = {}
    for i, m in enumerate(selected):
        problem, entry = suite_config(m.test_name).problem, suite_entry(m.test_name)
        recipe = default_recipe(m.run_set, m.gpu, m.kernel, m.validator, problem.direction)
        seeds = selection.rand0_seeds if m.run_set == "fair_rand0" else (STUDY_SEED,)
        atomic = recipe.kernel.atomic_split(problem) > 0
        members = selection.members if atomic else 0
        keys = []
        for seed in seeds:
            combo = (m.gpu, m.kernel, m.validator, m.run_set)
            key = request_key(m.test_name, m.range, seed, recipe, members, selection.granularity, problem, entry, combo)
            keys.append((key, "ensemble" if atomic else "exact"))
            hit = cache.get(key)
            if hit is not None:
                cached[key] = hit
            else:
                todo[(m.test_name, m.range, seed, recipe.rand_type)][key] = Request(
                    key, recipe, seed, members, selection.granularity
                )
        line_keys[i] = keys
    return make_jobs(todo), line_keys, cached


def reproduce(
    selection: Selection,
    measured,
    *,
    jobs: int = 1,
    out=None,
    cache_dir=None,
    progress: bool = False,
    show: str = "none",
    stream=None,
    command: str = "",
    cached_only: bool = False,
    allow_missing: bool = False,
    scheduler: str = "auto",
    heartbeat_s: float | None = None,
) -> Report:
    """Emulate every measured line ``selection`` picks and compare it field for field.

    ``measured``: the raw results folder or lines from :func:`read_measured`; ``jobs``: workers of
    ``scheduler`` (:mod:`validation.engine`: auto, local, processes or a tcp:// Dask address); ``out``: write ``report.md`` and ``reproduce.csv`` there (and cache under
    ``out/.cache`` unless ``cache_dir`` says otherwise; ``cache_dir=False`` disables the cache);
    ``show``: "all" prints every line side by side, "mismatches" only the lines that differ,
    "none" nothing (to ``stream``, default stdout); ``cached_only``: emulate nothing, report the
    lines whose emulation is in the cache (e.g. while another run is still filling it);
    ``allow_missing``: a selected measured file that is missing or empty is reported (a warning
    on stderr, a flagged summary and report) instead of being an error; ``heartbeat_s``: without
    a progress bar, a plain progress line on stderr at most this often (for logs). ``out`` and
    the cache folder are checked to be writable folders before anything is computed."""
    t0 = time.time()
    if jobs < 1:
        raise ValueError(f"--jobs: must be a positive integer, got {jobs}")
    check_scheduler(scheduler)
    if show not in ("all", "mismatches", "none"):
        raise ValueError(f"--show: {show!r} is not one of all,mismatches,none")
    if out is not None:
        check_out_dir(out, "--out", files=OUT_FILES, log=OUT_LOG)
    default_cache = cache_dir is None and out is not None
    if default_cache:
        cache_dir = str(Path(out) / ".cache")
    if cache_dir:
        check_out_dir(cache_dir, "cache folder", link=not default_cache)
    measured_dir = ""
    missing: list[tuple[Path, str]] = []
    if isinstance(measured, (str, os.PathLike)):
        measured_dir = str(measured)
        measured = read_measured(measured)
        missing = missing_files(measured_dir, selection)
        if missing and not allow_missing:
            path, why = missing[0]
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise ValueError(
                f"--measured: {path} is {why}{more}: its lines cannot be compared; "
                "pass --allow-missing to reproduce the rest and flag the gap"
            )
        for path, why in missing:
            print(f"fp16emu: warning: measured file {path} is {why}; its lines are not compared", file=sys.stderr)
    selected = selection.select(measured)
    if not selected:
        raise ValueError(
            "selection: no measured line matches the chosen run sets, GPUs, kernels, validators, ranges and tests"
        )
    cache_dir = str(cache_dir) if cache_dir else None
    cache = Cache(cache_dir)
    jobs_list, line_keys, cached = plan_jobs(selected, selection, cache)
    not_cached = 0
    if cached_only:
        keep = [i for i in range(len(selected)) if all(k in cached for k, _ in line_keys[i])]
        not_cached = len(selected) - len(keep)
        selected = [selected[i] for i in keep]
        line_keys = {j: line_keys[i] for j, i in enumerate(keep)}
        jobs_list = []
        selection = dataclasses.replace(selection, diagnose=False)
        if not selected:
            raise ValueError("--cached-only: no selected line is in the cache yet")
    stream = stream or sys.stdout
    n_emulated = sum(len(j.requests) for j in jobs_list)

    # print each test's lines as soon as all of them are known
    remaining: dict[str, set] = defaultdict(set)
    for i, m in enumerate(selected):
        for key, _ in line_keys[i]:
            if key not in cached:
                remaining[m.test_name].add(key)
    results = dict(cached)
    printed: set[int] = set()
    by_test: dict[str, list[int]] = defaultdict(list)
    for i, m in enumerate(selected):
        by_test[m.test_name].append(i)

    def judge_line(i: int) -> LineResult:
        m = selected[i]
        keys = line_keys[i]
        res = [results[k] for k, _ in keys]
        mode = "seeds" if m.run_set == "fair_rand0" else keys[0][1]
        return judge(m, res, mode)

    def emit(test: str):
        if show == "none":
            return
        out_lines = []
        for i in by_test[test]:
            if i in printed:
                continue
            printed.add(i)
            r = judge_line(i)
            if show == "all" or r.counts_as_failure:
                buf = io.StringIO()
                print_line(r, buf)
                out_lines.append(buf.getvalue().rstrip("\n"))
        if out_lines:
            text = "\n".join(out_lines)
            try:
                from tqdm import tqdm

                tqdm.write(text, file=stream)
            except ImportError:  # pragma: no cover
                print(text, file=stream)
            stream.flush()

    for test in by_test:
        if not remaining[test]:
            emit(test)

    def on_done(job, res):
        results.update(res)
        remaining[job.test].difference_update(res)
        if not remaining[job.test]:
            emit(job.test)

    log_path = None
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        log_path = Path(out) / OUT_LOG
    log_errors: list[str] = []
    execute(jobs_list, jobs, cache_dir, progress, on_done, log_path, scheduler, heartbeat_s, log_errors)
    lines = [judge_line(i) for i in range(len(selected))]
    if selection.diagnose:
        diagnose(lines, selection, jobs, cache_dir, progress, scheduler)
    report = Report(
        selection=selection,
        lines=lines,
        wall_s=time.time() - t0,
        cache_hits=sum(len(v) for v in line_keys.values()) - n_emulated,
        emulated=n_emulated,
        measured_dir=measured_dir,
        command=command,
        not_cached=not_cached,
        missing=tuple(f"{path} ({why})" for path, why in missing),
    )
    if out is not None:
        try:
            report.write(out)
        except OSError as err:
            report.write_error = (
                f"--out: cannot write the report into {str(out)!r} ({err.strerror or type(err).__name__}); "
                "a previous report there is left whole"
            )
        except ValueError as err:  # a report path that is not a regular file, or a folder gone
            report.write_error = " ".join(str(err).split())
    if log_errors and not report.write_error:
        report.write_error = log_errors[0]
    return report
