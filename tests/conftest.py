"""Make the repository root importable (``emu``, ``models``, ``validation``) under any pytest
invocation, whatever the working directory."""

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
