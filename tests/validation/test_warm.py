"""``fp16emu warm`` (validation.warm): what its workers compile lands in the cache the commands
read, so a later process compiles nothing; the job list and the command's answers."""

import os
import subprocess
import sys
from pathlib import Path

from validation.warm import JOBS, main

ROOT = Path(__file__).resolve().parents[2]

# a later process: the fma32 GEMM and rows of the warm jobs, counting what numba compiles
_AFTER = """
import numpy as np
from numba.core import event
import emu, models
n = []
class L(event.Listener):
    def on_start(self, e): n.append(str(e.data["dispatcher"]))
    def on_end(self, e): pass
event.register("numba:compile", L())
rng = np.random.default_rng(5)
u = models.unit("fma32")
emu.gemm(rng.uniform(-1, 1, (9, 33)).astype(np.float16), rng.uniform(-1, 1, (33, 70)).astype(np.float16), None, u)
print(len(n), n[:3])
"""


def _env(cache):
    return dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_CACHE_DIR=str(cache))


def test_a_warm_job_compiles_into_the_cache_a_later_process_loads(tmp_path):
    cache = tmp_path / "numba"
    cache.mkdir(mode=0o700)
    warm = [sys.executable, "-m", "validation.warm", "--jobs", "1", "--only", "fma (fma32) gemm"]
    r = subprocess.run(warm, cwd=tmp_path, env=_env(cache), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "1/1 jobs" in r.stderr and " compiled, " in r.stderr and "done in" in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-c", _AFTER], cwd=tmp_path, env=_env(cache), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == "0", r.stdout  # other shapes, same types: nothing compiled
    r = subprocess.run(warm, cwd=tmp_path, env=_env(cache), capture_output=True, text=True)
    assert r.returncode == 0 and "(cached)" in r.stderr, r.stderr  # a second warm finds it all


def test_the_jobs_have_distinct_names_and_cover_every_family(capsys):
    names = [j.name for j in JOBS]
    assert len(set(names)) == len(names)
    for family in ("fused-exact", "pairwise", "two-stage", "truncated", "fma", "fp64"):
        assert any(n.startswith(family + " ") and n.endswith(" rows") for n in names), family
        assert any(n.startswith(family + " ") and n.endswith(" gemm") for n in names), family
    assert main(["--list"]) == 0
    assert capsys.readouterr().out.count("\n") == len(JOBS)


def test_the_command_refuses_no_workers(tmp_path):
    cmd = [sys.executable, "-m", "validation.cli", "warm", "--jobs", "0"]
    r = subprocess.run(cmd, cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True)
    assert r.returncode == 2 and "--jobs" in r.stderr, r.stderr


def test_a_command_on_a_cold_cache_compiles_its_jobs_first_in_parallel_then_never_again(tmp_path):
    """``fp16emu units`` on an empty cache runs the warm-up jobs of its units' families in worker
    processes (the progress bar of ``warm``), marks them in the cache, and a second call finds the
    marks and compiles nothing; the table is the same both times."""
    cache = tmp_path / "numba"
    cache.mkdir(mode=0o700)
    cmd = [sys.executable, "-m", "validation.cli", "units", "--units", "fp64,fma32"]
    first = subprocess.run(cmd, cwd=tmp_path, env=_env(cache), capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert "in parallel" in first.stderr and "2/2 jobs" in first.stderr, first.stderr
    marks = sorted(p.name for p in cache.glob("*/warm-*.done"))
    assert marks == ["warm-fma-fma32-rows.done", "warm-fp64-fp64-rows.done"], marks
    second = subprocess.run(cmd, cwd=tmp_path, env=_env(cache), capture_output=True, text=True)
    assert second.returncode == 0 and second.stderr == "", second.stderr  # no notice: nothing compiled
    assert second.stdout == first.stdout


def test_the_jobs_of_units_are_their_families_rows_and_with_gemm_the_decode():
    from validation.warm import jobs_for_units

    assert jobs_for_units(["h100", "a100", "v100"]) == ["truncated (h100) rows"]  # one family, one job
    assert jobs_for_units(["mi300"], gemm=True) == [
        "two-stage (mi300) rows",
        "two-stage (mi300) gemm",
        "operand decode (C- and F-ordered)",
    ]
    names = {j.name for j in JOBS}
    import models

    for unit in models.UNIT_NAMES:  # every named unit maps onto jobs that exist
        assert set(jobs_for_units([unit], gemm=True)) <= names, unit
