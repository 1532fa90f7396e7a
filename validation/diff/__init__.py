"""``fp16emu diff A.npz B.npz``: why did the output change between two captures of one op?

:func:`diff_captures` identifies each capture (:func:`validation.captures.read_capture`), compares
the outputs they share (the same operands, or B's operands holding A's as a block of rows: batch 1
inside batch 64), and gives one reading: ``same-bits``, ``rounding`` (both reproduced, by
different schedules, named), ``bug-suspect`` (one is reproduced by no schedule) or ``mix-up``.
"""

from .core import DIFF_EXIT_CODES, DIFF_READINGS, CaptureDiff, diff_captures, shared_rows

__all__ = ["DIFF_EXIT_CODES", "DIFF_READINGS", "CaptureDiff", "diff_captures", "shared_rows"]
