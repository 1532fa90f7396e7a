"""Library captures: a PyTorch op's operands and GPU output (``python -m validation.capture_torch``),
and the search for the accumulation schedule that reproduces them bit for bit."""

from .capture import Capture, CaptureError, is_capture, load_capture
from .search import SearchResult, search

__all__ = ["Capture", "CaptureError", "SearchResult", "is_capture", "load_capture", "search"]
