"""The capture kit's old name: ``python -m validation.capture_torch …`` and ``from
validation.capture_torch import capture`` keep working; the kit is
:mod:`validation.captures.kit` (with the capture format, :mod:`validation.captures.format`)."""

from __future__ import annotations

import sys

if __package__:
    from .captures.kit import *  # noqa: F403
    from .captures.kit import __all__, main
else:  # run as a plain file from a checkout: the kit beside it in captures/
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent / "captures"))
    from kit import *  # type: ignore[no-redef]  # noqa: F403
    from kit import __all__, main  # type: ignore[no-redef]  # noqa: F401

if __name__ == "__main__":
    sys.exit(main())
