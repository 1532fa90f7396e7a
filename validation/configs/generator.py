"""miopen-gen / rock-gen / rocmlir-gen argument lists → :class:`Config`.

The options follow LLVM's ``cl`` rules as miopen-gen used them in mid/late 2022 (rocMLIR @3df931f1,
github.com/ROCm/rocMLIR, ``mlir/tools/rock-gen/rock-gen.cpp``: miopen-gen renamed, same options):
``-name=value``, ``--name=value``, ``-name value`` and ``--name value`` are all accepted; boolean
options take ``=true|false|1|0`` or nothing; each option may occur once; 4-letter layouts get a
``g`` (``kcyx`` → ``gkcyx``, ``nhwc`` → ``nhwgc``, others ``g`` + layout); ``-padding_h`` sets both
sides unless ``-padding_h_l``/``_r`` are given; too-short padded inputs get extra right padding as
miopen-gen's ``correctParameters`` adds it; ``-p`` overwrites every size with ``populateDefaults``'
values (without ``-x2``: N 128, C 8, K 128, 32×32 input, 3×3 filter; with ``-x2``: N 128, C 1024,
K 1024, 14×14, 1×1), padding 0, stride and dilation 1. The random-data options (``-rand``,
``-rand_type``, ``-rand_side``, ``-rand_min``/``-rand_max``) become a :class:`RandomSpec`.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping

from .gemm import GEMM_DEFAULTS, GemmShape
from .problem import make_problem, normalise_layout
from .records import DIRECTIONS, Config, ConfigError, ConfigWarning, RandomSpec
from .tokens import did_you_mean, one_line, parse_bool, parse_c_int, parse_float

#: Programs whose arguments are generator options.
GENERATOR_TOOLS = ("miopen-gen", "rock-gen", "rocmlir-gen", "mlir-miopen-driver", "mlir-rock-driver")
#: Old-style drivers that took generator options directly, plus their own ``-c`` flag.
_DRIVER_STYLE_TOOLS = ("mlir-miopen-driver", "mlir-rock-driver")

_KNOWN_DTYPES = {"f32": "f32", "fp32": "f32", "f16": "f16", "fp16": "f16", "bf16": "bf16", "i8": "i8"}

# kind: "int" (32-bit), "int64", "bool", "str", "float", or a dict of allowed values
_OPERATIONS = {
    "conv2d": "fwd",
    "conv2d_bwd_data": "bwd_data",
    "conv2d_bwd_weight": "bwd_weight",
    "conv": "fwd",
    "conv_bwd_data": "bwd_data",
    "conv_bwd_weight": "bwd_weight",
}
_SIZE_OPTIONS = (
    "groupsize",
    "batchsize",
    "in_channels",
    "in_h",
    "in_w",
    "out_channels",
    "fil_h",
    "fil_w",
    "out_h",
    "out_w",
)
_ATTR_OPTIONS = (
    "dilation_h",
    "dilation_w",
    "conv_stride_h",
    "conv_stride_w",
    "padding_h",
    "padding_h_l",
    "padding_h_r",
    "padding_w",
    "padding_w_l",
    "padding_w_r",
)
#: rocmlir-gen's GEMM (``-operation gemm``; :mod:`.gemm`): its own sizes and transposes
_GEMM_OPERATION = "gemm"
_GEMM_SIZES = ("m", "k", "n")
_GEMM_FLAGS = ("transA", "transB", "transC")
_GEMM_ONLY = _GEMM_SIZES + _GEMM_FLAGS + ("store-method",)
_GEMM_TAKES = "-g (-groupsize), -m, -k, -n, -transA, -transB, -transC, -store-method"
_GEN_OPTIONS: dict[str, object] = {
    "operation": _OPERATIONS,
    "arch": "str",
    "num_cu": "int",
    "perf_config": "str",
    "fil_layout": "str",
    "in_layout": "str",
    "out_layout": "str",
    **{k: "int64" for k in _SIZE_OPTIONS},
    **{k: "int64" for k in _GEMM_SIZES},
    **{k: "bool" for k in _GEMM_FLAGS},
    "store-method": "str",
    **{k: "int" for k in _ATTR_OPTIONS},
    "x2": "bool",
    "t": "str",
    "conv-config": "str",
    "p": "bool",
    "host": "bool",
    "host-harness": "bool",
    "print-results": "bool",
    "print-inputs": "bool",
    "print-validation-results": "bool",
    "verifier": "str",
    "pv": "bool",
    "pv_with_cpp": "bool",
    "pv_with_mlir": "bool",
    "pv_with_gpu": "bool",
    "cpu-kernels": "bool",
    "rand": "str",
    "rand_type": "str",
    "rand_side": "str",
    "rand_min": "int",
    "rand_max": "int",
    "RMS_threshold": "float",
    "absDiff_threshold": "float",
    "relDiff_threshold": "float",
    "threshold": "float",
    "nv": "bool",
    "print-verify-results": "str",
    "device": "int",
    "o": "str",
    "func-under-test": "str",
    # later rocmlir-gen spellings of the kernel choice
    "mfma": "str",
    "dot": "str",
    "atomic_add": "str",
    "wmma": "str",
}
_GEN_ALIASES = {
    "fut": "func-under-test",
    "ph": "host-harness",
    "pr": "print-results",
    "pi": "print-inputs",
    "pvr": "print-validation-results",
    "prc": "cpu-kernels",
    "p_verify": "print-verify-results",
    "dev": "device",
    "g": "groupsize",
}
_VERIFIERS = ("cpu", "gpu", "cpp", "mlir")
_RAND_TYPES = ("int", "float")
_RAND_SIDES = ("both", "filter", "input", "output")
_LAYOUT_DEFAULTS = {"fil_layout": "gkcyx", "in_layout": "ngchw", "out_layout": "ngkhw"}


def _split_generator_args(tokens: list[str], tool: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    """LLVM-cl style option splitting → ([(canonical, value, spelling)], positionals)."""
    known = dict(_GEN_OPTIONS)
    if tool in _DRIVER_STYLE_TOOLS:
        known["c"] = "bool"  # mlir-miopen-driver's own "-c" (build the host harness)
    opts: list[tuple[str, str, str]] = []
    positionals: list[str] = []
    seen: dict[str, str] = {}
    i = 0
    only_positional = False
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if only_positional or not tok.startswith("-") or tok == "-":
            positionals.append(tok)
            continue
        if tok == "--":
            only_positional = True
            continue
        body = tok[2:] if tok.startswith("--") else tok[1:]
        name, eq, value = body.partition("=")
        canonical = _GEN_ALIASES.get(name, name)
        if canonical not in known:
            choices = list(known) + list(_GEN_ALIASES)
            raise ConfigError(f"option {one_line(tok)!r}: unknown to {tool}{did_you_mean(name, choices)}")
        kind = known[canonical]
        if kind == "bool":
            value = value if eq else "true"
            parse_bool(f"-{canonical}", value)
        elif not eq:
            if i >= len(tokens):
                raise ConfigError(f"option -{name}: needs a value (-{name}=VALUE or -{name} VALUE)")
            value = tokens[i]
            i += 1
        if canonical in seen:
            raise ConfigError(
                f"option -{canonical}: given twice ({seen[canonical]} and {one_line(tok)}); {tool} allows it once"
            )
        seen[canonical] = one_line(tok)
        opts.append((canonical, value, tok))
    return opts, positionals


def parse_generator(
    tokens: list[str],
    *,
    tool: str,
    source: str,
    direction: str | None,
    x2_defaults: bool | None,
    xdlops: bool | None,
    label: str | None = None,
) -> Config:
    """Generator arguments (the program name dropped, substitutions expanded) → :class:`Config`
    (the rules in this module's docstring); ``label`` is the :attr:`Config.tool` recorded."""
    opts, positionals = _split_generator_args(tokens, tool)
    if len(positionals) > 1:
        raise ConfigError(
            f"arguments: {len(positionals)} positional words ({one_line(' '.join(positionals), 40)}); "
            f"{tool} takes at most one (its input file)"
        )
    given = {name: value for name, value, _ in opts}

    ints: dict[str, int] = {}
    for name, value, _ in opts:
        kind = _GEN_OPTIONS.get(name)
        if kind == "int":
            ints[name] = parse_c_int(name, value, 32)
        elif kind == "int64":
            ints[name] = parse_c_int(name, value, 64)
        elif kind == "float":
            parse_float(name, value)

    # -- operation / direction
    op_dir = None
    is_gemm = given.get("operation") == _GEMM_OPERATION
    if is_gemm:
        op_dir = "fwd"  # the 1x1 forward convolution that computes the GEMM (.gemm)
        if direction not in (None, "fwd"):
            raise ConfigError(f"direction: {direction!r} contradicts -operation gemm (a GEMM is one forward product)")
    elif "operation" in given:
        op = given["operation"]
        if op not in _OPERATIONS:
            allowed = ", ".join((*_OPERATIONS, _GEMM_OPERATION))
            raise ConfigError(f"operation: {one_line(op)!r} is not one of {allowed}")
        op_dir = _OPERATIONS[op]
    if not is_gemm:
        for name in _GEMM_ONLY:
            if name in given:
                raise ConfigError(f"{name}: a GEMM option (rocmlir-gen -operation gemm); this config is a convolution")
    if direction is not None:
        if direction not in DIRECTIONS:
            raise ConfigError(f"direction: {direction!r} is not one of {', '.join(DIRECTIONS)}")
        if op_dir is not None and op_dir != direction:
            raise ConfigError(f"direction: {direction!r} contradicts -operation {given['operation']} in the text")
        op_dir = direction
    op_dir = op_dir or "fwd"

    if "conv-config" in given:
        raise ConfigError("conv-config: not supported; give the convolution as separate options")

    # -- data type
    dtype_raw = given.get("t", "f32")
    dtype = _KNOWN_DTYPES.get(dtype_raw)
    if dtype is None:
        warnings.warn(
            f"-t {dtype_raw!r} is not a data type miopen-gen knows (f32, fp32, f16, fp16, bf16, i8); "
            "kept as given, the real tool would not build a kernel for it",
            ConfigWarning,
            stacklevel=4,
        )
        dtype = dtype_raw

    # -- kernel
    x2 = parse_bool("x2", given["x2"]) if "x2" in given else False
    kernel_xdlops = x2
    if "mfma" in given:
        mf = given["mfma"]
        if mf not in ("on", "off", "infer"):
            raise ConfigError(f"mfma: {one_line(mf)!r} is not one of on, off, infer")
        if mf != "infer":
            kernel_xdlops = mf == "on"
    if xdlops is not None:
        kernel_xdlops = bool(xdlops)

    # -- validation (callbacks run in command-line order; the last one wins)
    validation = None
    for name, value, _ in opts:
        if name == "verifier":
            if value and value not in _VERIFIERS:
                raise ConfigError(f"verifier: {one_line(value)!r} is not one of {', '.join(_VERIFIERS)} (or empty)")
            validation = value or validation
        elif name in ("pv", "pv_with_cpp", "pv_with_mlir", "pv_with_gpu") and parse_bool(name, value):
            validation = {"pv": "cpu", "pv_with_cpp": "cpp", "pv_with_mlir": "mlir", "pv_with_gpu": "gpu"}[name]
    if "cpu-kernels" in given and parse_bool("cpu-kernels", given["cpu-kernels"]):
        validation = None

    # -- random data
    random = _random_spec(given, ints)
    if is_gemm:
        return _gemm_config(
            given,
            ints,
            dtype=dtype,
            xdlops=kernel_xdlops,
            validation=validation,
            random=random,
            source=source,
            tool=label or tool,
            num_cu=120 if x2 else ints.get("num_cu"),
            options=tuple((name, value) for name, value, _ in opts),
        )

    # -- layouts
    layouts = {}
    for opt in ("fil_layout", "in_layout", "out_layout"):
        raw = given.get(opt, _LAYOUT_DEFAULTS[opt])
        norm = normalise_layout(opt, raw)
        # miopen-gen's verifyLayout (inserting g never separates these pairs)
        if opt == "fil_layout" and "yx" not in norm and "xy" not in norm:
            raise ConfigError(f"fil_layout: {one_line(raw)!r} must keep y and x adjacent (e.g. kcyx, kyxc, yxck)")
        if opt == "in_layout" and "hw" not in norm and "wh" not in norm:
            raise ConfigError(f"in_layout: {one_line(raw)!r} must keep h and w adjacent (e.g. nchw, nhwc)")
        layouts[opt] = norm

    # -- sizes
    for name in _SIZE_OPTIONS + _ATTR_OPTIONS:
        if name in ints and name.startswith(("padding", "out_")) and ints[name] < 0:
            raise ConfigError(f"{name}: {ints[name]} is negative; it must be >= 0")
    v = {name: ints.get(name, -1) for name in _SIZE_OPTIONS}
    v["groupsize"] = ints.get("groupsize", 1)
    for name in ("dilation_h", "dilation_w", "conv_stride_h", "conv_stride_w"):
        v[name] = ints.get(name, 1)
    for name in ("padding_h", "padding_h_l", "padding_h_r", "padding_w", "padding_w_l", "padding_w_r"):
        v[name] = ints.get(name, 0)

    # padding_h vs padding_h_l/_r (correctParameters' validatePadding)
    for side in ("h", "w"):
        comb, left, right = v[f"padding_{side}"], v[f"padding_{side}_l"], v[f"padding_{side}_r"]
        if comb > 0:
            if left == 0 and right == 0:
                v[f"padding_{side}_l"] = v[f"padding_{side}_r"] = comb
            elif left != comb or right != comb:
                raise ConfigError(
                    f"padding_{side}: {comb} conflicts with padding_{side}_l={left}, padding_{side}_r={right}; "
                    f"give either padding_{side} or the two sides"
                )

    populate = parse_bool("p", given["p"]) if "p" in given else False
    use_x2_defaults = x2 if x2_defaults is None else bool(x2_defaults)

    if not populate:
        _extend_right_padding(v)
    else:
        # populateDefaults overwrites every size, as miopen-gen does (after correctParameters)
        if use_x2_defaults:
            v.update(batchsize=128, in_channels=1024, out_channels=1024, in_h=14, in_w=14, fil_h=1, fil_w=1)
        else:
            v.update(batchsize=128, in_channels=8, out_channels=128, in_h=32, in_w=32, fil_h=3, fil_w=3)
        v.update(groupsize=1, dilation_h=1, dilation_w=1, conv_stride_h=1, conv_stride_w=1)
        v.update(padding_h_l=0, padding_h_r=0, padding_w_l=0, padding_w_r=0)

    for name in ("groupsize", "batchsize", "in_channels", "in_h", "in_w", "out_channels", "fil_h", "fil_w"):
        if v[name] <= 0:
            if name not in ints and not populate:
                raise ConfigError(f"{name}: not given; {tool} needs it unless -p populates the defaults")
            raise ConfigError(f"{name}: {v[name]} is not allowed; it must be a positive integer")
    for name in ("dilation_h", "dilation_w", "conv_stride_h", "conv_stride_w"):
        if v[name] < 1:
            raise ConfigError(f"{name}: {v[name]} is not allowed; it must be a positive integer")

    problem = make_problem(
        op_dir,
        n=v["batchsize"],
        c=v["in_channels"],
        h=v["in_h"],
        w=v["in_w"],
        k=v["out_channels"],
        y=v["fil_h"],
        x=v["fil_w"],
        groups=v["groupsize"],
        pad_h=(v["padding_h_l"], v["padding_h_r"]),
        pad_w=(v["padding_w_l"], v["padding_w_r"]),
        stride=(v["conv_stride_h"], v["conv_stride_w"]),
        dilation=(v["dilation_h"], v["dilation_w"]),
        layouts=layouts,
        names=("groupsize", "in_channels", "out_channels", "in_h", "in_w", "fil_h", "fil_w"),
    )
    for name, got in (("out_h", problem.out_h), ("out_w", problem.out_w)):
        if name in ints and ints[name] != got:
            raise ConfigError(f"{name}: {ints[name]} does not match the computed output size {got}")

    perf = given.get("perf_config") or None
    return Config(
        problem=problem,
        dtype=dtype,
        xdlops=kernel_xdlops,
        validation=validation,
        random=random,
        perf_config=perf,
        source=source,
        tool=label or tool,
        populate_defaults=populate,
        x2_defaults=populate and use_x2_defaults,
        arch=given.get("arch") or None,
        num_cu=120 if x2 else ints.get("num_cu"),
        options=tuple((name, value) for name, value, _ in opts),
    )


def _gemm_config(given: Mapping[str, str], ints: Mapping[str, int], **fields) -> Config:
    """``-operation gemm`` → the :class:`Config` of its 1×1 forward convolution (:mod:`.gemm`)."""
    for name in _SIZE_OPTIONS + _ATTR_OPTIONS + ("fil_layout", "in_layout", "out_layout"):
        if name in given and name != "groupsize":
            raise ConfigError(f"{name}: a convolution option; -operation gemm takes {_GEMM_TAKES}")
    store = given.get("store-method", "set")
    if store == "atomic_add":
        raise ConfigError(
            "store-method: atomic_add (adding the product onto C's prior values) is not modelled; allowed: set"
        )
    if store != "set":
        raise ConfigError(f"store-method: {one_line(store)!r} is not one of set, atomic_add")
    populate = parse_bool("p", given["p"]) if "p" in given else False
    sizes = {"groupsize": ints.get("groupsize", 1), **{name: ints.get(name, -1) for name in _GEMM_SIZES}}
    if populate:
        sizes.update(GEMM_DEFAULTS)  # rocmlir-gen's populateDefaults overwrites every size
    for name in ("groupsize", *_GEMM_SIZES):
        shown = "g (groupsize)" if name == "groupsize" else name
        if sizes[name] <= 0:
            if name not in ints:
                raise ConfigError(
                    f"{shown}: not given; -operation gemm needs -m, -k and -n (-g defaults to 1) unless -p"
                )
            raise ConfigError(f"{shown}: {sizes[name]} is not allowed; it must be a positive integer")
    flags = {name: parse_bool(name, given[name]) if name in given else False for name in _GEMM_FLAGS}
    shape = GemmShape(
        g=sizes["groupsize"],
        m=sizes["m"],
        n=sizes["n"],
        k=sizes["k"],
        trans_a=flags["transA"],
        trans_b=flags["transB"],
        trans_c=flags["transC"],
    )
    g = shape.g
    problem = make_problem(
        "fwd",
        n=shape.n,
        c=g * shape.k,
        h=1,
        w=1,
        k=g * shape.m,
        y=1,
        x=1,
        groups=g,
        pad_h=(0, 0),
        pad_w=(0, 0),
        stride=(1, 1),
        dilation=(1, 1),
        layouts=shape.layouts,
        names=("g", "k", "m", "n", "n", "k", "k"),
    )
    return Config(
        problem=problem,
        perf_config=given.get("perf_config") or None,
        populate_defaults=populate,
        arch=given.get("arch") or None,
        gemm=shape,
        **fields,
    )


def _random_spec(given: Mapping[str, str], ints: Mapping[str, int]) -> RandomSpec:
    raw = given.get("rand", "fixed")
    rand_type = given.get("rand_type", "int")
    if rand_type not in _RAND_TYPES:
        raise ConfigError(f"rand_type: {one_line(rand_type)!r} is not one of {', '.join(_RAND_TYPES)}")
    side = given.get("rand_side", "both")
    if side not in _RAND_SIDES:
        raise ConfigError(f"rand_side: {one_line(side)!r} is not one of {', '.join(_RAND_SIDES)}")
    lo, hi = ints.get("rand_min"), ints.get("rand_max")
    for name, val in (("rand_min", lo), ("rand_max", hi)):
        if val is not None and not -32768 <= val <= 32767:
            raise ConfigError(f"{name}: {val} does not fit the harness's C short (-32768..32767)")
    if raw in ("fixed", "none"):
        return RandomSpec(raw, None, rand_type, lo, hi, side, raw)
    m = re.match(r"[0-9]+", raw)
    if not m:
        raise ConfigError(
            f"rand: {one_line(raw)!r} is not allowed; give a seed (a non-negative integer, 0 = time), fixed or none"
        )
    digits = m.group(0)
    if len(digits) > 10 or int(digits) > 2**31 - 1:
        raise ConfigError(f"rand: {one_line(digits, 20)} is too large; the seed is a C int (at most {2**31 - 1})")
    seed = int(digits)
    return RandomSpec("seed", seed, rand_type, lo, hi, side, raw)


def _extend_right_padding(v: dict) -> None:
    """miopen-gen's correctParameters: if the padded input is shorter than the filter and stride
    need for the output size it computes (C integer division), pad more on the right."""

    def c_div(a: int, b: int) -> int:
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q

    for side, inp, fil in (("h", "in_h", "fil_h"), ("w", "in_w", "fil_w")):
        hi, y = v[inp], v[fil]
        left, right = v[f"padding_{side}_l"], v[f"padding_{side}_r"]
        stride, dil = v[f"conv_stride_{side}"], v[f"dilation_{side}"]
        if hi < 0 or y < 0 or stride < 1 or dil < 1:
            continue  # reported later
        out = c_div(hi + left + right - (y - 1) * dil - 1, stride) + 1
        minimum = 1 + (y - 1) * dil + (out - 1) * stride
        specified = hi + left + right
        if minimum > specified:
            v[f"padding_{side}_r"] = right + (minimum - specified)
