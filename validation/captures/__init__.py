"""Library captures: a PyTorch op's operands and GPU output, and the search for the accumulation
schedule that reproduces them bit for bit.

Laid out as the feature works (docs/library.md names each part): ``format`` (the capture format,
shared by the kit and the reader), ``kit`` (the GPU side: ``python -m validation.captures.kit``,
also a plain file), ``capture`` (the reader), ``gemms`` (a capture as GEMMs; candidates and
results), ``space`` (every schedule family and its bounds), ``samples`` and ``search`` (the
sampled search and its tiers), ``scaled`` (the fp8 search), ``mixups`` (the user's own mix-ups of a
file and a bug suspect's likely cause), ``report`` (the reading and its
reports), ``plots``, ``cli`` (``fp16emu identify CAPTURE.npz``)."""

from .capture import Capture, CaptureError, is_capture, load_capture
from .gemms import SearchResult
from .report import CaptureReading, read_capture
from .search import search as search_capture

__all__ = [
    "Capture",
    "CaptureError",
    "CaptureReading",
    "SearchResult",
    "is_capture",
    "load_capture",
    "read_capture",
    "search_capture",
]
