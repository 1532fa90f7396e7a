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
