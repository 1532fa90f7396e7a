"""Sizes and layouts → a checked ``emu.conv.ConvProblem``: layouts normalised to five letters
(4-letter ones get a ``g``), channels that split evenly into groups, and output sizes that are
positive, each failure a :class:`ConfigError` naming the option as the config spelt it. Used by
both readers (:mod:`.generator`, :mod:`.driver`)."""

from __future__ import annotations

from emu.conv import ConvProblem, normalize_layout

from .records import ConfigError
from .tokens import one_line

_LAYOUT_LETTERS = {"fil_layout": "gkcyx", "in_layout": "ngchw", "out_layout": "ngkhw"}

_LAYOUT_ROLES = {"fil_layout": "filter", "in_layout": "input", "out_layout": "output"}


def normalise_layout(opt: str, value: str) -> str:
    """The 5-letter layout (miopen-gen's ``correctParameters`` via :func:`emu.conv.normalize_layout`:
    4-letter layouts get a ``g``); a ConfigError naming the bad letter otherwise."""
    try:
        return normalize_layout(value, _LAYOUT_ROLES[opt])
    except ValueError:
        _check_layout(opt, "g" + value if len(value) == 4 and "g" not in value else value, shown=value)
        raise ConfigError(
            f"{opt}: {one_line(value)!r} is not a layout over {', '.join(_LAYOUT_LETTERS[opt])}"
        ) from None


def _check_layout(opt: str, value: str, shown: str | None = None) -> None:
    allowed = _LAYOUT_LETTERS[opt]
    shown = value if shown is None else shown
    letters = ", ".join(allowed)
    if sorted(value) != sorted(allowed):
        bad = [ch for ch in value if ch not in allowed]
        if bad:
            why = f"letter {bad[0]!r} is not one of {letters}"
        else:
            missing = [ch for ch in allowed if value.count(ch) != 1]
            why = f"needs each of {letters} once ({missing[0]!r} is {'missing' if missing[0] not in value else 'repeated'})"
        raise ConfigError(f"{opt}: {one_line(shown)!r}: {why}")


def make_problem(direction, *, n, c, h, w, k, y, x, groups, pad_h, pad_w, stride, dilation, layouts, names):
    """The checked :class:`emu.conv.ConvProblem`; ``names`` are the options as the reader spells
    them (group, in and out channels, input height and width, filter height and width), for the
    messages."""
    gname, cname, kname, hname, wname, yname, xname = names
    if c % groups:
        raise ConfigError(f"{cname}: {c} is not divisible by {gname} {groups}; channels must split evenly into groups")
    if k % groups:
        raise ConfigError(f"{kname}: {k} is not divisible by {gname} {groups}; channels must split evenly into groups")
    for axis, size, flt, pad, s, d, inp, fil in (
        ("height", h, y, pad_h, stride[0], dilation[0], hname, yname),
        ("width", w, x, pad_w, stride[1], dilation[1], wname, xname),
    ):
        out = (size + pad[0] + pad[1] - d * (flt - 1) - 1) // s + 1
        if out <= 0:
            raise ConfigError(
                f"output {axis}: {out} <= 0; {inp} {size} + padding {pad[0]}+{pad[1]} is smaller than "
                f"the dilated filter {fil} {flt} (dilation {d}); it must be at least {(flt - 1) * d + 1}"
            )
    try:
        return ConvProblem(
            direction=direction,
            n=n,
            c=c,
            h=h,
            w=w,
            k=k,
            y=y,
            x=x,
            groups=groups,
            pad_h=tuple(pad_h),
            pad_w=tuple(pad_w),
            stride=tuple(stride),
            dilation=tuple(dilation),
            in_layout=layouts["in_layout"],
            fil_layout=layouts["fil_layout"],
            out_layout=layouts["out_layout"],
        )
    except ValueError as e:  # emu.conv's own checks: a backstop, the checks above come first
        raise ConfigError(f"convolution: {e}") from None
