"""The ``fp16emu`` command: one thin module per feature (parse, call the library, print).

:mod:`.parser` builds the parser and maps errors to exit codes (``main``); :mod:`.run` (``run``, ``compare``),
:mod:`.explain`, :mod:`.study`, :mod:`.design`, :mod:`.identify` (``probe``, ``identify``,
``identify-study``) and :mod:`.units` each add their subcommands.
"""

from .parser import main

__all__ = ["main"]
