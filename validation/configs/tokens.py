"""Words and values of a config text: shell-style word splitting, C-style integers (as LLVM's
``cl`` parser reads them), booleans and floats, close-match suggestions for misspelt names, and the
one-line excerpts every error message quotes. Each failure raises :class:`ConfigError`."""

from __future__ import annotations

import difflib
import re
import shlex

from .records import ConfigError


def one_line(text: str, limit: int = 60) -> str:
    """``text`` on one line (whitespace runs as one space), cut to ``limit`` characters with "..."."""
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def split_words(text: str) -> list[str]:
    """Shell-style words (POSIX quoting; ``|`` is a word of its own even when not spaced)."""
    lex = shlex.shlex(text, posix=True, punctuation_chars="|")
    lex.whitespace_split = True
    lex.commenters = ""
    try:
        return list(lex)
    except ValueError as e:  # unbalanced quotes, a trailing escape
        raise ConfigError(f"config text: cannot split {one_line(text)!r} into words ({e})") from None


def did_you_mean(word: str, choices) -> str:
    """``"; did you mean a, b?"`` with up to three close matches of ``word``, or ""."""
    m = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.6)
    return f"; did you mean {', '.join(m)}?" if m else ""


def parse_c_int(name: str, text: str, bits: int) -> int:
    """An integer as LLVM's cl parser reads it (radix auto-sensed: 0x.., 0b.., 0o.., 0.. octal)."""
    s = text.strip()
    m = re.fullmatch(r"([+-]?)(0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO][0-7]+|0[0-7]+|[0-9]+)", s)
    if not m:
        raise ConfigError(f"{name}: {one_line(text)!r} is not an integer")
    sign, digits = m.groups()
    if len(digits) > 70:
        raise ConfigError(f"{name}: {one_line(text)!r} does not fit a {bits}-bit integer")
    if digits[:2] in ("0x", "0X"):
        v = int(digits, 16)
    elif digits[:2] in ("0b", "0B"):
        v = int(digits, 2)
    elif digits[:2] in ("0o", "0O"):
        v = int(digits, 8)
    elif len(digits) > 1 and digits[0] == "0":
        v = int(digits[1:], 8)
    else:
        v = int(digits)
    v = -v if sign == "-" else v
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not lo <= v <= hi:
        raise ConfigError(f"{name}: {v} does not fit a {bits}-bit integer")
    return v


def parse_bool(name: str, text: str) -> bool:
    """A boolean as LLVM's cl parser reads it: true/false (any of three casings), 1 or 0."""
    if text in ("true", "TRUE", "True", "1"):
        return True
    if text in ("false", "FALSE", "False", "0"):
        return False
    raise ConfigError(f"{name}: {one_line(text)!r} is not a boolean; allowed: true, false, 1, 0")


def parse_float(name: str, text: str) -> float:
    """A floating-point number (Python's ``float`` syntax)."""
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"{name}: {one_line(text)!r} is not a number") from None
