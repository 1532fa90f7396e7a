"""Writing the user's files safely: atomically (a temporary file in the same folder, then a
rename), never through a link, never onto something that is not a regular file."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["check_output_file", "write_atomically"]


def check_output_file(path, option: str = "output") -> Path:
    """``path`` as a file :func:`write_atomically` can write, checked before any work."""
    if path is None or not str(path).strip():
        raise ValueError(f"{option}: give a file name (got an empty path)")
    path = Path(path)
    with contextlib.suppress(FileNotFoundError):
        st = os.lstat(path)
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            raise ValueError(f"{option}: {str(path)!r} is not a regular file")
    if not path.parent.is_dir():
        raise ValueError(f"{option}: the folder {str(path.parent)!r} does not exist")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise ValueError(f"{option}: the folder {str(path.parent)!r} is not writable")
    return path


def write_atomically(path, write: Callable, option: str = "output") -> Path:
    """Write ``path`` through ``write(binary file object)``: into a temporary file beside it, then
    renamed over it, so a failed write leaves the old file intact and a link at ``path`` is
    replaced, not followed. ValueError naming ``option`` when ``path`` is empty, lies in a folder
    that does not exist, or is a device, a folder or a FIFO (``/dev/null`` included)."""
    path = check_output_file(path, option)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise ValueError(f"{option}: cannot write in {str(path.parent)!r} ({err.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path
