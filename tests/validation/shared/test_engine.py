"""validation.engine: the same results whatever the scheduler, lost workers retried, signals handled.

The reproduce test needs ``../shared/reference/fp16_study_raw_results`` (skipped without it) and
dask.distributed (skipped without it); the others run anywhere.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import reference_data as ref  # noqa: E402  (registered by conftest.py)

import validation.study as study
from validation.engine import Engine, Terminated, check_scheduler, dask_available

ROOT = Path(__file__).resolve().parents[3]
needs_dask = pytest.mark.skipif(not dask_available(), reason="dask.distributed is not installed")


def test_scheduler_values_are_checked():
    for ok in ("auto", "local", "processes", "tcp://10.0.0.1:8786"):
        assert check_scheduler(ok) == ok
    for bad in ("dask", "tcp://nohost", ""):
        with pytest.raises(ValueError, match=r"^--scheduler: .* is not one of auto, local, processes, tcp://HOST:PORT"):
            check_scheduler(bad)
    with pytest.raises(ValueError, match="^--jobs: must be a positive integer"):
        Engine("processes", 0)


def test_jobs_are_capped_by_the_work_and_the_cores_with_a_note():
    e = Engine("processes", 1000, 3)
    assert e.jobs == min(3, len(os.sched_getaffinity(0)))
    assert e.notes and "--jobs 1000 capped at" in e.notes[0] and "3 jobs to run" in e.notes[0]
    one = Engine("auto", 1000, 1)
    assert (one.kind, one.jobs) == ("serial", 1)


def test_describe_names_the_workers_in_the_right_number():
    one, two = Engine("local", 1, 5), Engine("local", 2, 5)
    if one.kind == "local":  # without dask.distributed both fall back to a process pool
        assert one.describe() == "Dask LocalCluster, 1 worker × 1 thread"
    if two.jobs == 2:
        assert two.describe() in ("Dask LocalCluster, 2 workers × 1 thread", "process pool, 2 workers")


@needs_dask
def test_scheduler_processes_local_1_and_2_workers_give_identical_csv(tmp_path):
    raw = ref.require("fp16_study_raw_results")
    sel = study.Selection.from_options(run_set="fair_1", gpu="mi200", range="r0", smallest=2, members=16)
    csvs = {}
    for name, scheduler, jobs in (
        ("processes", "processes", 2),
        ("local1", "local", 1),
        ("local2", "local", 2),
    ):
        out = tmp_path / name
        study.reproduce(sel, raw, jobs=jobs, scheduler=scheduler, out=out, show="none")
        csvs[name] = (out / "reproduce.csv").read_bytes()
    assert csvs["local1"] == csvs["processes"]
    assert csvs["local2"] == csvs["processes"]
    assert len(csvs["processes"].splitlines()) > 2


def _flaky(marker_and_value):
    """Fails the first time it runs for a marker: raises, or kills its worker process."""
    marker, value, how = marker_and_value
    if not os.path.exists(marker):
        Path(marker).write_text("failed once")
        if how == "kill":
            os._exit(1)
        raise RuntimeError("first attempt fails")
    return value * 2


@needs_dask
def test_a_local_cluster_starts_when_the_default_dashboard_port_is_taken():
    """Two runs at once (or anything else on 8787): each LocalCluster takes a free port, with or
    without bokeh, instead of failing with "Port 8787 is already in use"."""
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", 8787))
            s.listen()
        except OSError:
            pass  # already taken by something else: the case under test all the same
        with Engine("local", 1, 2) as engine:
            assert sorted(engine.map_unordered(abs, [-1, -2])) == [1, 2]


@needs_dask
def test_a_job_that_raises_or_loses_its_worker_is_retried(tmp_path):
    items = [(str(tmp_path / "raise"), 1, "raise"), (str(tmp_path / "kill"), 2, "kill"), (str(tmp_path / "x"), 3, "-")]
    with Engine("local", 2, len(items)) as engine:
        got = sorted(engine.map_unordered(_flaky, items))
    assert got == [2, 4, 6]
    assert (tmp_path / "raise").exists() and (tmp_path / "kill").exists()


_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from validation.engine import Engine, Terminated
    try:
        with Engine("processes", 2, 4) as engine:
            print("started", flush=True)
            for _ in engine.map_unordered(time.sleep, [60, 60, 60, 60]):
                pass
    except Terminated:
        print("fp16emu: terminated", file=sys.stderr)
        sys.exit(143)
    """
)


def _children(pid):
    kids = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids |= {int(x) for x in (task / "children").read_text().split()}
        except OSError:
            pass
    return kids


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "zombie" in status.read_text())


def _start_pool_script():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen(
        [sys.executable, "-c", _SCRIPT], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert p.stdout.readline().strip() == "started"
    deadline = time.time() + 30
    while len(_children(p.pid)) < 2 and time.time() < deadline:  # the pool workers (+ resource tracker)
        time.sleep(0.2)
    time.sleep(1.0)
    return p, _children(p.pid)


def _wait_gone(pids, seconds=20):
    deadline = time.time() + seconds
    while any(_alive(x) for x in pids) and time.time() < deadline:
        time.sleep(0.2)
    return [x for x in pids if _alive(x)]


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_sigterm_stops_the_pool_cleanly():
    p, kids = _start_pool_script()
    assert kids
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143
    assert "Traceback" not in err and "leaked" not in err and "BrokenPipe" not in err
    assert "terminated" in err
    assert _wait_gone(kids) == []


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_workers_die_with_a_killed_parent():
    p, kids = _start_pool_script()
    assert kids
    p.kill()
    p.communicate(timeout=60)
    assert _wait_gone(kids) == []


def test_terminated_is_an_interrupt_with_exit_code_143():
    assert issubclass(Terminated, KeyboardInterrupt) and Terminated.exit_code == 143


def test_numba_cache_is_off_with_a_warning_when_its_folder_is_unusable(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        NUMBA_CACHE_DIR=str(blocker / "cache"),  # under a file: never writable, even for root
        NUMBA_CACHE_LOCATOR_CLASSES="UserProvidedCacheLocator",  # numba's other places ruled out
        XDG_CACHE_HOME=str(tmp_path / "xdg"),
    )
    r = subprocess.run(
        [sys.executable, "-c", "import emu; print('imported')"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert "imported" in r.stdout
    assert "numba's cache is off" in r.stderr and "compiled in every process" in r.stderr
    assert not (tmp_path / "xdg").exists()  # no silent fallback elsewhere


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_sigterm_during_study_reproduce_is_one_line_and_exit_143(tmp_path):
    raw = ref.require("fp16_study_raw_results")
    cmd = [sys.executable, "-m", "validation.cli", "study", "reproduce", "--measured", str(raw), "--smallest", "20"]
    cmd += ["--jobs", "2", "--scheduler", "processes", "--no-cache", "--show", "none", "--no-progress"]
    cmd += ["--out", str(tmp_path / "out")]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    while line.startswith("fp16emu: note:"):  # e.g. --jobs capped on a one-core machine
        line = p.stderr.readline()
    assert "jobs: process pool" in line, line  # printed once the pool's workers exist
    kids = _children(p.pid)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    assert err.strip() == "fp16emu: terminated (finished tests are cached; run again to resume)"
    assert _wait_gone(kids) == []
