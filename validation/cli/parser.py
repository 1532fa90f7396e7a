"""The ``fp16emu`` command: the parser and the exit codes; each subcommand lives in its own module
of this package (:mod:`.run`, :mod:`.explain`, :mod:`.study`, :mod:`.design`, :mod:`.identify`,
:mod:`.units`).

Exit codes: 0 pass (or no verdict asked), 1 fail, 2 usage or input error (one line,
``fp16emu COMMAND: error: …``, no traceback).
"""

from __future__ import annotations

import errno
import gc
import os
import signal
import sys

from ..engine import ending_on_signals
from ..plots import check_path
from . import design, diff, explain, listing, study, units, warm
from . import identify as identify_cli
from . import run as run_cli
from .common import Parser, UsageError, error_line

__all__ = ["main", "UsageError", "COMMANDS"]


#: every subcommand, in the order of ``fp16emu --help``
COMMANDS = ("run", "compare", "units", "study", "explain", "probe", "identify", "design", "diff", "list", "warm")


def _build_parser():
    parser = Parser(
        prog="fp16emu",
        description="Bit-exact CPU emulation of GPU fp16 kernels, and why they differ from their reference.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    run_cli.register_cli(sub)
    units.register_cli(sub)
    study.register_cli(sub)
    explain.register_cli(sub)
    identify_cli.register_cli(sub)
    design.register_cli(sub)
    diff.register_cli(sub)
    listing.register_cli(sub)
    warm.register_cli(sub)
    return parser


def _config_first(argv: list[str]) -> list[str]:
    """``fp16emu run "-batchsize=64 …"``: a config text that starts with '-' is not an option."""
    if (
        len(argv) >= 2
        and argv[0] in ("run", "explain")
        and argv[1].startswith("-")
        and (" " in argv[1] or argv[1].count("=") == 1 and not argv[1].startswith("--"))
    ):
        return [argv[0], f"--config={argv[1]}"] + argv[2:]
    return argv


def _command(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names (for the error line), None before one is given."""
    return argv[0] if argv and not argv[0].startswith("-") and argv[0] in COMMANDS else None


def main(argv=None) -> int:
    """``fp16emu``: every error, whichever command, is one line ``fp16emu COMMAND: error: …`` on
    stderr and exit 2 (:func:`validation.cli.common.error_line`). SIGTERM / SIGINT: exit 143 / 130
    and one line within a second; the command-line process (``argv`` None) then leaves its
    objects to the end of the process (``gc.freeze``): the interpreter's last collection took a
    second or more after a Dask cluster, while the exit handlers (children, semaphores) still run."""
    heard: list[int] = []
    if argv is None:
        _quiet_resource_tracker()
    code = _main(argv, heard)
    if argv is None and heard:
        gc.freeze()
    return code


#: multiprocessing's resource tracker is a process of its own, started with this environment; it
#: warns of the semaphores a command ended by a signal leaves to it (a Dask cluster's), then removes
#: them: the warning would follow the command's one line
_TRACKER_QUIET = "ignore::UserWarning:multiprocessing.resource_tracker"


def _quiet_resource_tracker() -> None:
    given = os.environ.get("PYTHONWARNINGS", "")
    if _TRACKER_QUIET not in given.split(","):
        os.environ["PYTHONWARNINGS"] = f"{given},{_TRACKER_QUIET}" if given else _TRACKER_QUIET


def _main(argv, heard: list[int]) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = _command(argv)
    try:
        argv = _config_first(argv)
        args = _build_parser().parse_args(argv)
        if args.command in ("run", "explain"):
            given = sum(a == "--config" or a.startswith("--config=") for a in argv[1:]) + (args.config is not None)
            if given > 1:
                raise UsageError(f"the config is given {given} times (CONFIG and --config); give it once")
            args.config = args.config if args.config is not None else args.config_option
            if not args.config:
                raise UsageError(
                    "give a CONFIG (an argument string, a RUN line, an MIOpenDriver command or a suite test name)"
                )
        if getattr(args, "plot", None):  # before any computation: a picture that cannot be written is exit 2
            check_path(args.plot)
        # SIGTERM / SIGINT: 143 / 130 and one line within a second, in every phase (issue 41.7)
        with (
            ending_on_signals(lambda signum: _stopped_line(command, signum), heard=heard),
            warm.compile_notice() as notice,
        ):
            try:
                code = args.func(args)
            except KeyboardInterrupt:
                notice.seconds = 0  # ended by a signal: its one line, not the compile time too
                raise
            if heard or code in (130, 143):
                notice.seconds = 0
            return code
    except (UsageError, ValueError) as err:  # ValueError: a bad config or input, reported by the library
        print(error_line(command, err), file=sys.stderr)
        return 2
    except MemoryError as err:  # numpy's ArrayMemoryError included: a resource, not a FAIL verdict (exit 1)
        detail = " ".join(str(err).split())[:160] or "an allocation failed"
        print(
            error_line(
                command,
                f"out of memory ({detail}); lower the problem's size or raise the memory "
                "available (ulimit -v, FP16EMU_MAX_MEMORY_GIB)",
            ),
            file=sys.stderr,
        )
        return 2
    except BrokenPipeError:  # output piped into head and the like
        sys.stderr.close()
        return 0
    except OSError as err:
        if err.errno not in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EMFILE, errno.ENFILE):
            raise
        # a resource exhausted (a full disk, ulimit -f, ulimit -n): exit 2 and one line, not a traceback
        where = f" ({err.filename})" if err.filename else ""
        print(error_line(command, f"cannot go on: {err.strerror}{where}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:  # Ctrl-C: 130; SIGTERM (engine.Terminated): 143
        code = getattr(err, "exit_code", 130)
        print(_stopped_line(command, code - 128), file=sys.stderr)
        return code


def _stopped_line(command: str | None, signum: int) -> str:
    """The one line of a command ended by a signal: ``fp16emu CMD: terminated`` (SIGTERM) or
    ``… interrupted`` (SIGINT)."""
    what = "terminated" if signum == signal.SIGTERM else "interrupted"
    return f"fp16emu{' ' + command if command else ''}: {what}"
