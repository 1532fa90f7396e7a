"""MIOpenDriver convolution command lines (``MIOpenDriver conv|convfp16|convbfp16|convint8 -n 128
-c 64 ...``) → :class:`Config`.

The flags, their one-letter forms and their defaults are MIOpenDriver's (MIOpen's
``driver/conv_driver.hpp``, ``AddCmdLineArgs``, github.com/ROCm/MIOpen; the MIOpenDriver
documentation lists the same flags). Only 2-D convolutions with zero padding are modelled;
``-F`` picks the direction (1 fwd, 2 bwd data, 4 bwd weight); ``--pad_mode same|valid`` recomputes
the padding as MIOpen does. The data come from MIOpen's own generator, which is not reproduced.
"""

from __future__ import annotations

from collections.abc import Mapping

from .problem import make_problem, normalise_layout
from .records import DIRECTIONS, Config, ConfigError, RandomSpec
from .tokens import did_you_mean, one_line, parse_c_int

#: MIOpenDriver sub-commands for convolutions and their data types.
DRIVER_COMMANDS: Mapping[str, str] = {"conv": "f32", "convfp16": "f16", "convbfp16": "bf16", "convint8": "i8"}


# long name → (short letter, default)
_DRIVER_FLAGS: dict[str, tuple[str, str]] = {
    "spatial_dim": ("_", "2"),
    "forw": ("F", "0"),
    "batchsize": ("n", "100"),
    "in_channels": ("c", "3"),
    "in_d": ("!", "32"),
    "in_h": ("H", "32"),
    "in_w": ("W", "32"),
    "in_layout": ("I", ""),
    "out_layout": ("O", ""),
    "fil_layout": ("f", ""),
    "out_channels": ("k", "32"),
    "fil_d": ("@", "3"),
    "fil_h": ("y", "3"),
    "fil_w": ("x", "3"),
    "conv_stride_d": ("#", "1"),
    "conv_stride_h": ("u", "1"),
    "conv_stride_w": ("v", "1"),
    "pad_d": ("$", "0"),
    "pad_h": ("p", "0"),
    "pad_w": ("q", "0"),
    "pad_val": ("r", "0"),
    "trans_output_pad_d": ("%", "0"),
    "trans_output_pad_h": ("Y", "0"),
    "trans_output_pad_w": ("X", "0"),
    "iter": ("i", "10"),
    "verify": ("V", "1"),
    "verification_cache": ("C", ""),
    "time": ("t", "0"),
    "wall": ("w", "0"),
    "search": ("s", "0"),
    "printconv": ("P", "1"),
    "dump_output": ("o", "0"),
    "in_data": ("d", ""),
    "weights": ("e", ""),
    "bias": ("b", ""),
    "mode": ("m", "conv"),
    "pad_mode": ("z", "default"),
    "tensor_vect": ("Z", "0"),
    "vector_length": ("L", "1"),
    "dilation_d": ("^", "1"),
    "dilation_h": ("l", "1"),
    "dilation_w": ("j", "1"),
    "in_bias": ("a", ""),
    "group_count": ("g", "1"),
    "dout_data": ("D", ""),
    "solution": ("S", "-1"),
    "gpualloc": ("G", "0"),
    "in_cast_type": ("U", "-1"),
    "out_cast_type": ("T", "-1"),
    "wei_cast_type": ("R", "-1"),
}
_DRIVER_SHORT = {short: long for long, (short, _) in _DRIVER_FLAGS.items()}
_DRIVER_INT = [
    "spatial_dim",
    "forw",
    "batchsize",
    "in_channels",
    "in_h",
    "in_w",
    "out_channels",
    "fil_h",
    "fil_w",
    "conv_stride_h",
    "conv_stride_w",
    "pad_h",
    "pad_w",
    "pad_val",
    "dilation_h",
    "dilation_w",
    "group_count",
    "verify",
]
_DRIVER_LAYOUTS = {
    "in_layout": {"NCHW": "nchw", "NHWC": "nhwc"},
    "out_layout": {"NCHW": "nkhw", "NHWC": "nhwk"},
    "fil_layout": {"NCHW": "kcyx", "NHWC": "kyxc"},
}


def parse_driver(tokens: list[str], *, source: str, direction: str | None) -> Config:
    """An MIOpenDriver command's words after the program name (sub-command first) → :class:`Config`;
    ``direction`` picks one of the directions ``-F`` enables."""
    if not tokens:
        raise ConfigError(f"MIOpenDriver: no sub-command; allowed: {', '.join(DRIVER_COMMANDS)}")
    cmd = tokens[0]
    if cmd not in DRIVER_COMMANDS:
        raise ConfigError(
            f"MIOpenDriver sub-command {one_line(cmd)!r}: not a convolution; allowed: "
            f"{', '.join(DRIVER_COMMANDS)}{did_you_mean(cmd, DRIVER_COMMANDS)}"
        )
    values = {long: default for long, (_, default) in _DRIVER_FLAGS.items()}
    options = []
    i = 1
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if not tok.startswith("-") or tok == "-":
            raise ConfigError(f"MIOpenDriver argument {one_line(tok)!r}: expected a flag (-x VALUE or --name VALUE)")
        if tok.startswith("--"):
            name, eq, value = tok[2:].partition("=")
            if name not in _DRIVER_FLAGS:
                raise ConfigError(f"MIOpenDriver flag --{one_line(name)}: unknown{did_you_mean(name, _DRIVER_FLAGS)}")
        else:
            short = tok[1:2]
            name = _DRIVER_SHORT.get(short)
            if name is None or len(tok) != 2:
                raise ConfigError(
                    f"MIOpenDriver flag {one_line(tok)!r}: unknown; short flags are one letter, e.g. -n 128"
                )
            eq, value = "", ""
        if not eq:
            if i >= len(tokens):
                raise ConfigError(f"MIOpenDriver flag {one_line(tok)}: needs a value")
            value = tokens[i]
            i += 1
        if name == "help":
            raise ConfigError("MIOpenDriver flag --help: asks for help, not a convolution")
        values[name] = value
        options.append((name, value))

    ints = {name: parse_c_int(name, values[name], 32) for name in _DRIVER_INT}
    if ints["spatial_dim"] != 2:
        raise ConfigError(f"spatial_dim: {ints['spatial_dim']} is not modelled; only 2-D convolutions (2)")
    if values["mode"] != "conv":
        raise ConfigError(f"mode: {one_line(values['mode'])!r} is not modelled; only conv (trans is not)")
    if ints["pad_val"] != 0:
        raise ConfigError(f"pad_val: {ints['pad_val']} is not modelled; only zero padding (0)")

    forw = ints["forw"]
    if not 0 <= forw <= 7:
        raise ConfigError(f"forw (-F): {forw} is not allowed; use 1 (fwd), 2 (bwd data), 4 (bwd weight) or a sum")
    enabled = [d for d, bit in (("fwd", 1), ("bwd_data", 2), ("bwd_weight", 4)) if forw == 0 or forw & bit]
    if direction is not None:
        if direction not in DIRECTIONS:
            raise ConfigError(f"direction: {direction!r} is not one of {', '.join(DIRECTIONS)}")
        if direction not in enabled:
            raise ConfigError(f"direction: {direction} is not enabled by -F {forw} (it enables {', '.join(enabled)})")
        chosen = direction
    elif len(enabled) == 1:
        chosen = enabled[0]
    else:
        raise ConfigError(
            f"forw (-F): {forw} runs {', '.join(enabled)}; give -F 1 (fwd), 2 (bwd data) or 4 (bwd weight), "
            "or pass direction="
        )

    layouts = {}
    for opt, table in _DRIVER_LAYOUTS.items():
        raw = values[opt] or "NCHW"
        if raw not in table:
            raise ConfigError(f"{opt}: {one_line(raw)!r} is not one of {', '.join(table)}")
        layouts[opt] = normalise_layout(opt, table[raw])

    g = ints["group_count"]
    if g < 1:
        raise ConfigError(f"group_count (-g): {g} is not allowed; it must be a positive integer")
    for name in ("batchsize", "in_channels", "out_channels", "in_h", "in_w", "fil_h", "fil_w"):
        if ints[name] < 1:
            raise ConfigError(
                f"{name} (-{_DRIVER_FLAGS[name][0]}): {ints[name]} is not allowed; it must be a positive integer"
            )
    for name in ("conv_stride_h", "conv_stride_w", "dilation_h", "dilation_w"):
        if ints[name] < 1:
            raise ConfigError(
                f"{name} (-{_DRIVER_FLAGS[name][0]}): {ints[name]} is not allowed; it must be a positive integer"
            )
    for name in ("pad_h", "pad_w"):
        if ints[name] < 0:
            raise ConfigError(f"{name} (-{_DRIVER_FLAGS[name][0]}): {ints[name]} is negative; it must be >= 0")

    pads = [ints["pad_h"], ints["pad_w"]]
    strides = (ints["conv_stride_h"], ints["conv_stride_w"])
    dils = (ints["dilation_h"], ints["dilation_w"])
    fil = (ints["fil_h"], ints["fil_w"])
    inp = (ints["in_h"], ints["in_w"])
    pad_mode = values["pad_mode"]
    if pad_mode not in ("default", "same", "valid"):
        raise ConfigError(f"pad_mode: {one_line(pad_mode)!r} is not one of default, same, valid")
    if all(d == 1 for d in dils) or all(f == 1 for f in fil):
        if pad_mode == "same":
            for i2 in range(2):
                if inp[i2] % strides[i2] == 0:
                    pads[i2] = max(fil[i2] - strides[i2], 0) // 2
                else:
                    pads[i2] = max(fil[i2] - inp[i2] % strides[i2], 0) // 2
        elif pad_mode == "valid":
            pads = [0, 0]

    problem = make_problem(
        chosen,
        n=ints["batchsize"],
        c=ints["in_channels"],
        h=inp[0],
        w=inp[1],
        k=ints["out_channels"],
        y=fil[0],
        x=fil[1],
        groups=g,
        pad_h=(pads[0], pads[0]),
        pad_w=(pads[1], pads[1]),
        stride=strides,
        dilation=dils,
        layouts=layouts,
        names=(
            "group_count (-g)",
            "in_channels (-c)",
            "out_channels (-k)",
            "in_h (-H)",
            "in_w (-W)",
            "fil_h (-y)",
            "fil_w (-x)",
        ),
    )
    return Config(
        problem=problem,
        dtype=DRIVER_COMMANDS[cmd],
        xdlops=None,
        validation="miopen" if ints["verify"] else None,
        random=RandomSpec("miopen_driver", None, "float", None, None, "both", ""),
        perf_config=None,
        source=source,
        tool="MIOpenDriver",
        options=tuple(options),
    )
