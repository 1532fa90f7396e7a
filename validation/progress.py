"""Progress for every long step: a tqdm bar on a terminal (after a short delay, sized even where the
terminal reports no size), and a plain line now and then in logs (:class:`Heartbeat`). Shared by
the features (run, explain, design, study, captures); none of them exports it."""

from __future__ import annotations

import os
import sys
import time

__all__ = ["PROGRESS_DELAY_S", "HEARTBEAT_S", "auto_progress", "progress_bar", "bar_width", "Heartbeat"]

PROGRESS_DELAY_S = 2.0  # a bar appears once its step has run this long


def auto_progress() -> bool:
    """Whether a step gets a progress bar by default: when stderr is a terminal (the bar then
    appears only once the step has taken :data:`PROGRESS_DELAY_S` seconds)."""
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):
        return False


#: Without a terminal, a long command prints a plain progress line at most this often (seconds).
HEARTBEAT_S = 300.0


def _duration(seconds: float) -> str:
    s = round(seconds)
    h, m = divmod(s // 60, 60)
    return f"{h} h {m} min" if h else f"{m} min {s % 60} s" if m else f"{s} s"


class Heartbeat:
    """Progress for logs (nohup, CI), where a bar's carriage returns would not show: a plain line
    on stderr, ``fp16emu: 3/40 runs done, 2 min 5 s elapsed, about 25 min left``, when an item
    finishes at least ``interval_s`` seconds after the last line (or the start).

    ``total``: items expected (settable later, as :attr:`total`). ``total_work``: when given, the
    items carry unequal work (:meth:`update`'s ``work``, out of ``total_work``); the line then adds
    the share of the work done and estimates the time left from it rather than from the item
    count."""

    def __init__(self, interval_s: float, total: int = 0, unit: str = "jobs", total_work: float | None = None):
        self.interval_s = float(interval_s)
        self.total = int(total)
        self.unit = unit
        self.total_work = total_work
        self.done = 0
        self.work_done = 0.0
        self.start = self.last = time.monotonic()

    def update(self, items: int = 1, work: float | None = None) -> None:
        """Count ``items`` finished (carrying ``work``, when weighted); print a line when due."""
        self.done += items
        self.work_done += items if work is None else work
        now = time.monotonic()
        if now - self.last >= self.interval_s:
            self.last = now
            print(self.line(now - self.start), file=sys.stderr, flush=True)

    def line(self, elapsed: float) -> str:
        """The progress line after ``elapsed`` seconds."""
        total_work = self.total_work if self.total_work is not None else self.total
        share = self.work_done / total_work if total_work else 0.0
        of = f"/{self.total}" if self.total else ""
        work = f", {100 * share:.0f} % of the work" if self.total_work is not None else ""
        left = f", about {_duration(elapsed * (1 - share) / share)} left" if 0 < share < 1 else ""
        return f"fp16emu: {self.done}{of} {self.unit} done{work}, {_duration(elapsed)} elapsed{left}"


#: The bar's width where the terminal reports none (0 columns: a serial console, some CI
#: terminals, ``stty cols 0``), where tqdm's own width would be −1 and it would print nothing.
FALLBACK_COLUMNS = 80
FALLBACK_LINES = 24


def bar_width(file=None) -> dict:
    """tqdm's size options for a bar on ``file`` (default stderr): follow the terminal's width
    while it reports one, else a fixed width (``COLUMNS`` when it is a positive number, else
    :data:`FALLBACK_COLUMNS`), and a fixed height where it reports 0 lines (``LINES``, else
    :data:`FALLBACK_LINES`), so that a terminal of size 0 still shows progress."""
    file = sys.stderr if file is None else file
    try:
        size = os.get_terminal_size(file.fileno())
    except (AttributeError, OSError, ValueError):
        return {"dynamic_ncols": True}  # not a terminal: tqdm's own default width
    out: dict = {"dynamic_ncols": size.columns > 1}
    if size.columns <= 1:
        out["ncols"] = _env_size("COLUMNS", FALLBACK_COLUMNS)
    if size.lines <= 1:  # tqdm hides a bar whose position is not above the last line
        out["nrows"] = _env_size("LINES", FALLBACK_LINES)
    return out


def _env_size(name: str, default: int) -> int:
    env = os.environ.get(name, "").strip()
    return int(env) if env.isdigit() and int(env) > 1 else default


def progress_bar(total: int, enabled: bool, desc: str, unit: str = "col"):
    """A tqdm bar on stderr over ``total`` ``unit`` (gemmN columns by default), or None when not
    ``enabled``; the caller closes it (``finally``), and it leaves no line behind."""
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        unit_scale=True,
        leave=False,
        file=sys.stderr,
        delay=PROGRESS_DELAY_S,
        **bar_width(sys.stderr),
    )
