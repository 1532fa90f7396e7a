"""The oracle shared by tests/oracle: MMA-Sim (PyPI ``mmasim`` 2.1.1, CPU, needs torch)."""

import os
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def mmasim():
    """The imported ``mmasim`` package (skips when torch or mmasim is not installed).

    ``mmasim.arithmetic.fma`` compiles a small C++ extension at import through
    ``torch.utils.cpp_extension``, which runs ``ninja`` from PATH: the venv's own ``ninja`` (a
    dependency of mmasim) is put first so the build works without an activated venv.
    """
    pytest.importorskip("torch")
    bindir = str(Path(sys.executable).parent)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    mm = pytest.importorskip("mmasim")
    import mmasim.amd  # noqa: F401
    import mmasim.arithmetic.fma  # noqa: F401
    import mmasim.nv_ptx  # noqa: F401

    return mm
