"""Which reader a config text goes to: a suite test name to :mod:`.suites`, any other text to
:mod:`.lit` (generator arguments, lit RUN lines, MIOpenDriver commands)."""

from __future__ import annotations

from collections.abc import Mapping

from .lit import parse_text, suite_name
from .records import Config, ConfigError
from .suites import suite_config

__all__ = ["parse_config"]


def parse_config(
    text: str,
    *,
    substitutions: Mapping[str, str] | None = None,
    direction: str | None = None,
    x2_defaults: bool | None = None,
    xdlops: bool | None = None,
) -> Config:
    """Read one convolution config (see :mod:`validation.configs` for the forms accepted).

    Parameters
    ----------
    text
        Generator arguments, a lit RUN line, an MIOpenDriver command, or a suite test name.
    substitutions
        lit substitutions to use instead of :data:`DEFAULT_SUBSTITUTIONS` (merged over them).
    direction
        "fwd", "bwd_data" or "bwd_weight": picks one of the directions an MIOpenDriver ``-F``
        enables (needed for ``-F 0``); for generator text it sets the direction when no
        ``-operation`` is given and must agree with it otherwise.
    x2_defaults
        Which defaults ``-p`` populates: None (default) follows ``-x2``; True uses the ``-x2``
        set whatever the kernel (the 2022 study's "fair" runs did this for both kernels).
    xdlops
        Override the kernel choice (True: xdlops, False: non-xdlops); None keeps the text's.

    Raises
    ------
    ConfigError
        With a one-line message naming the field and what is allowed.
    """
    name = suite_name(text)
    if name is not None:
        if direction is not None or x2_defaults is not None:
            raise ConfigError("suite test name: direction= and x2_defaults= do not apply; the suite fixes them")
        return suite_config(name, xdlops=xdlops, substitutions=substitutions)
    return parse_text(text, substitutions=substitutions, direction=direction, x2_defaults=x2_defaults, xdlops=xdlops)
