"""``fp16emu warm``: compile every kernel the commands use, once, in parallel
(:mod:`validation.warm`); and the notice a command prints when it compiles on its own
(:func:`compile_notice`)."""

from __future__ import annotations

import contextlib
import sys
import time

from numba.core import event as numba_event

import emu.jit

from .. import warm as warm_feature

__all__ = ["register_cli", "compile_notice"]


def register_cli(subparsers):
    p = subparsers.add_parser(
        "warm",
        help="compile every kernel the commands use, once, in parallel (a new install, or after an upgrade)",
        description="Compile the emulator's numba kernels for this machine into the per-user cache, in "
        "parallel worker processes, with a progress bar; the commands then start at once.",
    )
    p.add_argument("--jobs", type=int, default=None, help="worker processes (default: one per core)")
    p.set_defaults(func=_cmd_warm)
    return p


def _cmd_warm(args) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise ValueError(f"--jobs: must be at least 1, got {args.jobs}")
    warm_feature.warm(args.jobs)
    return 0


class _Notice(numba_event.Listener):
    """Says once, on stderr, when numba starts compiling (a cold cache: the first run on this
    machine, or after an upgrade), and adds up the seconds spent compiling (outermost compiles
    only); silent when every kernel loads from the cache."""

    def __init__(self):
        self.depth = 0
        self.t0 = 0.0
        self.seconds = 0.0

    def on_start(self, event):
        if self.depth == 0:
            if not self.seconds:
                where = (
                    f"cached in {emu.jit.numba.config.CACHE_DIR}" if emu.jit.CACHE else "not cached (see the warning)"
                )
                print(
                    f"fp16emu: compiling the emulator's kernels for this machine (first use; up to about "
                    f"{warm_feature.command_estimate():.0f} s on 2 cores, {where}; `fp16emu warm` compiles "
                    f"them all at once)",
                    file=sys.stderr,
                    flush=True,
                )
            self.t0 = time.perf_counter()
        self.depth += 1

    def on_end(self, event):
        self.depth -= 1
        if self.depth == 0:
            self.seconds += max(time.perf_counter() - self.t0, 1e-9)


@contextlib.contextmanager
def compile_notice():
    """Around a command: the notice when it starts compiling, and at the end how long it took."""
    notice = _Notice()
    with numba_event.install_listener("numba:compile", notice):
        try:
            yield notice
        finally:
            if notice.seconds:
                print(f"fp16emu: {notice.seconds:.0f} s of it was compiling (once)", file=sys.stderr, flush=True)
