"""Which reader a config text goes to, and lit: :func:`parse_text` takes a generator argument
string, a lit RUN line (its ``%`` substitutions expanded) or an MIOpenDriver command;
:func:`suite_name` says when a text is a suite test name instead (:mod:`.parse` dispatches);
:func:`parse_lit_file` reads every generator or MIOpenDriver RUN command of a lit test file."""

from __future__ import annotations

import re
from collections.abc import Mapping

from .driver import DRIVER_COMMANDS, parse_driver
from .generator import GENERATOR_TOOLS, parse_generator
from .records import Config, ConfigError
from .tokens import one_line, split_words

#: lit substitutions and what they expand to by default. ``%random_data``: the 2022 study's rewrite
#: of the tests (``batch_run.sh``, github.com/zhanglx13/llvm-project-mlir-dev-utils @3b042e7) used
#: ``-rand 1``; the value rocMLIR's own lit configuration gave it for the e2e tests is not known.
#: ``%xdlops`` is ``-x2`` on xdlops GPUs (MI100, MI200), ``%pv`` the CPU validation.
DEFAULT_SUBSTITUTIONS: Mapping[str, str] = {
    "%random_data": "-rand 1",
    "%xdlops": "-x2",
    "%pv_with_gpu": "-pv_with_gpu",
    "%pv": "-pv",
    "%arch": "gfx908",
}


def _run_commands(text: str) -> list[str]:
    """The RUN commands of a lit text, continuation lines (ending in ``\\``) joined."""
    commands: list[str] = []
    pending: str | None = None
    for line in text.splitlines():
        m = re.search(r"\bRUN:(.*)$", line)
        if not m:
            continue
        part = m.group(1).strip()
        cont = part.endswith("\\")
        if cont:
            part = part[:-1].rstrip()
        pending = part if pending is None else pending + " " + part
        if not cont:
            commands.append(pending)
            pending = None
    if pending is not None:
        commands.append(pending)
    return commands


def _tool_name(word: str) -> str:
    """The program name of a command word (its directory dropped)."""
    return word.rsplit("/", 1)[-1]


def _apply_substitutions(tokens: list[str], subs: Mapping[str, str]) -> list[str]:
    """``tokens`` with the lit substitutions expanded (``%s`` kept); an unknown one is an error."""
    out: list[str] = []
    names = sorted(subs, key=len, reverse=True)
    for tok in tokens:
        if tok in subs:
            out.extend(split_words(subs[tok]))
            continue
        if tok == "%s":  # lit: the test file, miopen-gen's positional input
            out.append(tok)
            continue
        if "%" in tok:
            new = tok
            for n in names:
                new = re.sub(re.escape(n) + r"(?![A-Za-z0-9_])", lambda _m, v=subs[n]: v, new)
            unknown = re.search(r"%[A-Za-z_][A-Za-z0-9_]*", new)
            if unknown and unknown.group(0) != "%s":
                known = ", ".join(sorted(subs))
                raise ConfigError(f"lit substitution {unknown.group(0)}: unknown; known: {known}, %s")
            if new != tok:
                out.extend(split_words(new))
                continue
        out.append(tok)
    return out


def _parse_command(
    tokens: list[str],
    *,
    source: str,
    is_lit: bool,
    substitutions: Mapping[str, str],
    direction: str | None,
    x2_defaults: bool | None,
    xdlops: bool | None,
) -> Config:
    """The first command of a pipe → :class:`Config`, by its program: MIOpenDriver or a generator."""
    if "|" in tokens:
        tokens = tokens[: tokens.index("|")]
    if not tokens:
        raise ConfigError("config text: no command before the first '|'")
    head = _tool_name(tokens[0])
    if head in ("MIOpenDriver", "MIOpenDriver.exe"):
        return parse_driver(tokens[1:], source=source, direction=direction)
    if head in DRIVER_COMMANDS and len(tokens) > 1 and tokens[1].startswith("-"):
        return parse_driver(tokens, source=source, direction=direction)
    if head in GENERATOR_TOOLS:
        tool, args = head, tokens[1:]
    elif tokens[0].startswith(("-", "%")):
        tool, args = "miopen-gen", tokens
    else:
        raise ConfigError(
            f"config text: {one_line(tokens[0], 40)!r} is not a generator ({', '.join(GENERATOR_TOOLS)}), "
            "MIOpenDriver, an option or a suite test name"
        )
    args = _apply_substitutions(args, substitutions)
    return parse_generator(
        args,
        tool=tool,
        label=("lit:" + tool) if is_lit else tool,
        source=source,
        direction=direction,
        x2_defaults=x2_defaults,
        xdlops=xdlops,
    )


def suite_name(text) -> str | None:
    """The suite test name ``text`` is (one bare word that names no program and no option), else None."""
    if not isinstance(text, str) or not text.strip() or "RUN:" in text:
        return None
    tokens = split_words(text.strip())
    known_programs = GENERATOR_TOOLS + ("MIOpenDriver", "MIOpenDriver.exe")
    if len(tokens) == 1 and not tokens[0].startswith(("-", "%")) and _tool_name(tokens[0]) not in known_programs:
        return tokens[0]
    return None


def parse_text(
    text: str,
    *,
    substitutions: Mapping[str, str] | None = None,
    direction: str | None = None,
    x2_defaults: bool | None = None,
    xdlops: bool | None = None,
) -> Config:
    """Read one convolution config given as text (not a suite test name: :func:`validation.configs.parse_config`
    takes those too).

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
    if not isinstance(text, str):
        raise ConfigError(f"config text: expected a string, got {type(text).__name__}")
    subs = dict(DEFAULT_SUBSTITUTIONS)
    if substitutions:
        subs.update(substitutions)
    stripped = text.strip()
    if not stripped:
        raise ConfigError(
            "config text: empty; give miopen-gen arguments, a lit RUN line, an MIOpenDriver command or a suite name"
        )
    kw = {"substitutions": subs, "direction": direction, "x2_defaults": x2_defaults, "xdlops": xdlops}
    if "RUN:" in stripped:
        commands = _run_commands(stripped)
        if len(commands) != 1:
            raise ConfigError(f"lit text: {len(commands)} RUN commands; pass one (parse_lit_file reads a whole file)")
        return _parse_command(split_words(commands[0]), source=text, is_lit=True, **kw)
    tokens = split_words(stripped)
    if not tokens:
        raise ConfigError("config text: no words in it")
    return _parse_command(tokens, source=text, is_lit=False, **kw)


def parse_lit_file(text: str, **kwargs) -> list[Config]:
    """Every RUN command of a lit test file whose first program is a generator or MIOpenDriver,
    in file order (other RUN commands, e.g. pure FileCheck runs, are skipped)."""
    out = []
    for cmd in _run_commands(text):
        tokens = split_words(cmd)
        head = _tool_name(tokens[0]) if tokens else ""
        if head in GENERATOR_TOOLS or head in ("MIOpenDriver", "MIOpenDriver.exe"):
            out.append(parse_text("// RUN: " + cmd, **kwargs))
    return out
