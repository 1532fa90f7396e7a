"""Every notebook in notebooks/ executes without an error (nbclient), and is stored in git with its
outputs stripped. Timing targets (each < 20 s, all < 90 s on a warm numba cache) are measured, not
asserted: the durations are printed with ``pytest -s``."""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 7


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_without_outputs(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell.get("outputs", []) == [], f"{path.name}: a code cell has outputs (strip them)"
            assert cell.get("execution_count") is None, f"{path.name}: a code cell has an execution count"
    first = nb["cells"][0]
    assert first["cell_type"] == "markdown" and "**Question:**" in "".join(first["source"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_shares_the_one_numba_cache(path):
    """Issue 30.3: one numba cache for every entry point. The notebooks set NUMBA_CACHE_DIR to a
    folder of their own (.cache/numba) and compiled every kernel again there (two minutes of a
    fresh clone's make test); emu.jit's per-user folder is the one they use now."""
    assert "NUMBA_CACHE_DIR" not in path.read_text(encoding="utf-8")


def test_notebooks_in_git_are_stripped():
    """What git holds (HEAD), not only the working copy, has no outputs."""
    try:
        names = subprocess.run(["git", "ls-files", "notebooks/*.ipynb"], cwd=ROOT, capture_output=True, text=True,
                               check=True).stdout.split()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    for name in names:
        shown = subprocess.run(["git", "show", f"HEAD:{name}"], cwd=ROOT, capture_output=True, text=True)
        if shown.returncode:
            continue  # not committed yet
        nb = json.loads(shown.stdout)
        assert all(c.get("outputs", []) == [] for c in nb["cells"] if c["cell_type"] == "code"), name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(str(path), as_version=4)
    t0 = time.perf_counter()
    nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    ).execute()
    print(f"{path.name}: {time.perf_counter() - t0:.1f} s")
