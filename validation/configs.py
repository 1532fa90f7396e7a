"""Reading convolution test configs: miopen-gen / rocmlir-gen arguments, lit RUN lines, MIOpenDriver
command lines and suite test names → a :class:`Config` (an ``emu.conv.ConvProblem`` plus the
kernel, validation and random-data flags).

:func:`parse_config` takes any of:

(a) a miopen-gen / rock-gen / rocmlir-gen argument string, with or without the tool's name:
    ``--operation conv2d -t f16 -p=false -fil_layout=gkcyx ... %pv %random_data %xdlops``;
(b) a whole lit RUN line (``// RUN: miopen-gen <args> | mlir-miopen-driver -c | ...``): the
    generator's arguments are taken from the first command of the pipe, and the lit substitutions
    ``%random_data``, ``%xdlops``, ``%pv``, ``%pv_with_gpu``, ``%arch`` are expanded (``%s``, the test
    file, is the generator's positional input file and is ignored);
(c) an MIOpenDriver command: ``MIOpenDriver conv|convfp16|convbfp16|convint8 -n 128 -c 64 ...``;
(d) the name of a test of a shipped suite (:mod:`validation.suites`).

The generator options follow LLVM's ``cl`` rules as miopen-gen used them (mid/late 2022, see
``reference/rocmlir_kernels_2022.md`` §1.3, §2(f)): ``-name=value``, ``--name=value``, ``-name value``
and ``--name value`` are all accepted; boolean options take ``=true|false|1|0`` or nothing; each
option may occur once; 4-letter layouts get a ``g`` (``kcyx`` → ``gkcyx``, ``nhwc`` → ``nhwgc``,
others ``g`` + layout); ``-padding_h`` sets both sides unless ``-padding_h_l``/``_r`` are given;
too-short padded inputs get extra right padding as miopen-gen adds it; ``-p`` overwrites every size
with the defaults (without ``-x2``: N 128, C 8, K 128, 32×32 input, 3×3 filter; with ``-x2``:
N 128, C 1024, K 1024, 14×14, 1×1), padding 0, stride and dilation 1.

Every problem raises :class:`ConfigError` (a ``ValueError``) with a one-line message naming the
field and what is allowed.
"""

from __future__ import annotations

import difflib
import re
import shlex
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from emu.conv import ConvProblem, normalize_layout, sub_gemms
from models.harness import harness_range

__all__ = [
    "ConfigError",
    "ConfigWarning",
    "RandomSpec",
    "Config",
    "parse_config",
    "parse_lit_file",
    "n_out_elements",
    "DEFAULT_SUBSTITUTIONS",
    "GENERATOR_TOOLS",
    "DRIVER_COMMANDS",
]


class ConfigError(ValueError):
    """A config that cannot be read: the message is one line naming the field and what is allowed."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


class ConfigWarning(UserWarning):
    """A config that reads but would not behave as intended on the real tool (e.g. ``-t f1``)."""


DIRECTIONS = ("fwd", "bwd_data", "bwd_weight")

#: lit substitutions and what they expand to by default. ``%random_data``: the study's rewrite
#: (``batch_run.sh``) used ``-rand 1``; the e2e lit value could not be retrieved (kernels doc §3.4).
#: ``%xdlops`` is ``-x2`` on xdlops GPUs (MI100, MI200), ``%pv`` the CPU validation.
DEFAULT_SUBSTITUTIONS: Mapping[str, str] = {
    "%random_data": "-rand 1",
    "%xdlops": "-x2",
    "%pv_with_gpu": "-pv_with_gpu",
    "%pv": "-pv",
    "%arch": "gfx908",
}

#: Programs whose arguments are generator options.
GENERATOR_TOOLS = ("miopen-gen", "rock-gen", "rocmlir-gen", "mlir-miopen-driver", "mlir-rock-driver")
#: Old-style drivers that took generator options directly, plus their own ``-c`` flag.
_DRIVER_STYLE_TOOLS = ("mlir-miopen-driver", "mlir-rock-driver")

#: MIOpenDriver sub-commands for convolutions and their data types.
DRIVER_COMMANDS: Mapping[str, str] = {"conv": "f32", "convfp16": "f16", "convbfp16": "bf16", "convint8": "i8"}

_KNOWN_DTYPES = {"f32": "f32", "fp32": "f32", "f16": "f16", "fp16": "f16", "bf16": "bf16", "i8": "i8"}

# ------------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class RandomSpec:
    """How the harness fills the tensors, as the config gives it.

    ``mode``: "fixed" (the 0.5, −1, 0.75 pattern; miopen-gen's default), "none" (min = max = 1),
    "seed" (glibc ``srand(seed)`` per tensor; seed 0 = ``time(0)``) or "miopen_driver" (MIOpen's
    own generator, not the rocMLIR harness: not reproduced). ``rand_min``/``rand_max`` are as
    given (``None``: the harness default for ``rand_type``, see :attr:`range`).
    """

    mode: str = "fixed"
    seed: int | None = None
    rand_type: str = "int"
    rand_min: int | None = None
    rand_max: int | None = None
    rand_side: str = "both"
    raw: str = "fixed"

    @property
    def range(self) -> tuple[int, int]:
        """The (min, max) the harness uses for the selected tensors."""
        if self.mode == "none":
            return (1, 1)
        return harness_range(self.rand_type, self.rand_min, self.rand_max)

    def harness_kwargs(self) -> dict:
        """Keyword arguments for :func:`models.harness.harness_inputs`."""
        if self.mode == "miopen_driver":
            raise ConfigError("random data: MIOpenDriver's own generator is not reproduced; only rocMLIR harness data is")
        seed: int | str | None = {"fixed": None, "none": "none"}.get(self.mode, self.seed)
        return dict(
            seed=seed,
            rand_min=self.rand_min,
            rand_max=self.rand_max,
            rand_type=self.rand_type,
            rand_side=self.rand_side,
        )


@dataclass(frozen=True)
class Config:
    """One convolution test as a config text describes it."""

    problem: ConvProblem
    dtype: str
    #: True for the xdlops kernel (``-x2``, ``%xdlops``, ``-mfma=on``); None if the text cannot say
    #: (MIOpenDriver picks its own solver).
    xdlops: bool | None
    #: "cpu" (``-pv``, the Aug-2022 C++ reference), "cpp", "mlir", "gpu" (``-pv_with_gpu``),
    #: "miopen" (MIOpenDriver's ``-V 1`` check) or None.
    validation: str | None
    random: RandomSpec
    perf_config: str | None
    source: str
    tool: str
    populate_defaults: bool = False
    x2_defaults: bool = False
    name: str | None = None
    arch: str | None = None
    num_cu: int | None = None
    #: every option read, as (canonical name, value text) in order
    options: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    @property
    def direction(self) -> str:
        return self.problem.direction

    @property
    def pv_cpu(self) -> bool:
        """CPU validation (``-pv``, ``-pv_with_cpp``, ``-pv_with_mlir``)."""
        return self.validation in ("cpu", "cpp", "mlir")

    @property
    def pv_gpu(self) -> bool:
        """GPU validation (``-pv_with_gpu``)."""
        return self.validation == "gpu"

    @property
    def seed(self) -> int | None:
        return self.random.seed

    @property
    def rand_type(self) -> str:
        return self.random.rand_type

    @property
    def rand_min(self) -> int | None:
        return self.random.rand_min

    @property
    def rand_max(self) -> int | None:
        return self.random.rand_max

    @property
    def n_out_elements(self) -> int:
        return n_out_elements(self.problem)

    @property
    def gemms(self) -> list:
        """The GEMMs the direction runs (:func:`emu.conv.sub_gemms`: one for fwd and
        bwd_weight, the non-empty sub-GEMMs for bwd_data)."""
        return sub_gemms(self.problem)

    def harness_kwargs(self) -> dict:
        """Keyword arguments for :func:`models.harness.harness_inputs` (``dtype`` included)."""
        kw = self.random.harness_kwargs()
        if self.dtype in ("f16", "f32", "bf16"):
            kw["dtype"] = self.dtype
        return kw


def n_out_elements(problem: ConvProblem) -> int:
    """Elements of the tensor the direction writes: fwd the output, bwd_data the input,
    bwd_weight the filter."""
    p = problem
    if p.direction == "fwd":
        return p.n * p.k * p.out_h * p.out_w
    if p.direction == "bwd_data":
        return p.n * p.c * p.h * p.w
    return p.k * (p.c // p.groups) * p.y * p.x


# ------------------------------------------------------------------------------------------------
# Tokens


def _one_line(text: str, limit: int = 60) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _tokens(text: str) -> list[str]:
    lex = shlex.shlex(text, posix=True, punctuation_chars="|")
    lex.whitespace_split = True
    lex.commenters = ""
    try:
        return list(lex)
    except ValueError as e:  # unbalanced quotes, a trailing escape
        raise ConfigError(f"config text: cannot split {_one_line(text)!r} into words ({e})") from None


def _close(word: str, choices) -> str:
    m = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.6)
    return f"; did you mean {', '.join(m)}?" if m else ""


def _parse_c_int(name: str, text: str, bits: int) -> int:
    """An integer as LLVM's cl parser reads it (radix auto-sensed: 0x.., 0b.., 0o.., 0.. octal)."""
    s = text.strip()
    m = re.fullmatch(r"([+-]?)(0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO][0-7]+|0[0-7]+|[0-9]+)", s)
    if not m:
        raise ConfigError(f"{name}: {_one_line(text)!r} is not an integer")
    sign, digits = m.groups()
    if len(digits) > 70:
        raise ConfigError(f"{name}: {_one_line(text)!r} does not fit a {bits}-bit integer")
    if digits[:2] in ("0x", "0X"):
        v = int(digits[2:], 16)
    elif digits[:2] in ("0b", "0B"):
        v = int(digits[2:], 2)
    elif digits[:2] in ("0o", "0O"):
        v = int(digits[2:], 8)
    elif len(digits) > 1 and digits[0] == "0":
        v = int(digits[1:], 8)
    else:
        v = int(digits)
    v = -v if sign == "-" else v
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not lo <= v <= hi:
        raise ConfigError(f"{name}: {v} does not fit a {bits}-bit integer")
    return v


def _parse_bool(name: str, text: str) -> bool:
    if text in ("true", "TRUE", "True", "1"):
        return True
    if text in ("false", "FALSE", "False", "0"):
        return False
    raise ConfigError(f"{name}: {_one_line(text)!r} is not a boolean; allowed: true, false, 1, 0")


def _parse_float(name: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"{name}: {_one_line(text)!r} is not a number") from None


# ------------------------------------------------------------------------------------------------
# miopen-gen options

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
_GEN_OPTIONS: dict[str, object] = {
    "operation": _OPERATIONS,
    "arch": "str",
    "num_cu": "int",
    "perf_config": "str",
    "fil_layout": "str",
    "in_layout": "str",
    "out_layout": "str",
    **{k: "int64" for k in _SIZE_OPTIONS},
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
}
_VERIFIERS = ("cpu", "gpu", "cpp", "mlir")
_RAND_TYPES = ("int", "float")
_RAND_SIDES = ("both", "filter", "input", "output")
_LAYOUT_LETTERS = {"fil_layout": "gkcyx", "in_layout": "ngchw", "out_layout": "ngkhw"}
_LAYOUT_DEFAULTS = {"fil_layout": "gkcyx", "in_layout": "ngchw", "out_layout": "ngkhw"}


_LAYOUT_ROLES = {"fil_layout": "filter", "in_layout": "input", "out_layout": "output"}


def _normalise_layout(opt: str, value: str) -> str:
    """The 5-letter layout (miopen-gen's ``correctParameters`` via :func:`emu.conv.normalize_layout`:
    4-letter layouts get a ``g``); a ConfigError naming the bad letter otherwise."""
    try:
        return normalize_layout(value, _LAYOUT_ROLES[opt])
    except ValueError:
        _check_layout(opt, "g" + value if len(value) == 4 and "g" not in value else value, shown=value)
        raise ConfigError(f"{opt}: {_one_line(value)!r} is not a layout over {', '.join(_LAYOUT_LETTERS[opt])}") from None


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
        raise ConfigError(f"{opt}: {_one_line(shown)!r}: {why}")


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
            raise ConfigError(f"option {_one_line(tok)!r}: unknown to {tool}{_close(name, choices)}")
        kind = known[canonical]
        if kind == "bool":
            value = value if eq else "true"
            _parse_bool(f"-{canonical}", value)
        elif not eq:
            if i >= len(tokens):
                raise ConfigError(f"option -{name}: needs a value (-{name}=VALUE or -{name} VALUE)")
            value = tokens[i]
            i += 1
        if canonical in seen:
            raise ConfigError(
                f"option -{canonical}: given twice ({seen[canonical]} and {_one_line(tok)}); {tool} allows it once"
            )
        seen[canonical] = _one_line(tok)
        opts.append((canonical, value, tok))
    return opts, positionals


def _apply_substitutions(tokens: list[str], subs: Mapping[str, str]) -> list[str]:
    out: list[str] = []
    names = sorted(subs, key=len, reverse=True)
    for tok in tokens:
        if tok in subs:
            out.extend(_tokens(subs[tok]))
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
                out.extend(_tokens(new))
                continue
        out.append(tok)
    return out


def _parse_generator(
    tokens: list[str],
    *,
    tool: str,
    source: str,
    direction: str | None,
    x2_defaults: bool | None,
    xdlops: bool | None,
    label: str | None = None,
) -> Config:
    opts, positionals = _split_generator_args(tokens, tool)
    if len(positionals) > 1:
        raise ConfigError(
            f"arguments: {len(positionals)} positional words ({_one_line(' '.join(positionals), 40)}); "
            f"{tool} takes at most one (its input file)"
        )
    given = {name: value for name, value, _ in opts}

    ints: dict[str, int] = {}
    for name, value, _ in opts:
        kind = _GEN_OPTIONS.get(name)
        if kind == "int":
            ints[name] = _parse_c_int(name, value, 32)
        elif kind == "int64":
            ints[name] = _parse_c_int(name, value, 64)
        elif kind == "float":
            _parse_float(name, value)

    # -- operation / direction
    op_dir = None
    if "operation" in given:
        op = given["operation"]
        if op not in _OPERATIONS:
            raise ConfigError(f"operation: {_one_line(op)!r} is not one of {', '.join(_OPERATIONS)}")
        op_dir = _OPERATIONS[op]
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
    x2 = _parse_bool("x2", given["x2"]) if "x2" in given else False
    kernel_xdlops = x2
    if "mfma" in given:
        mf = given["mfma"]
        if mf not in ("on", "off", "infer"):
            raise ConfigError(f"mfma: {_one_line(mf)!r} is not one of on, off, infer")
        if mf != "infer":
            kernel_xdlops = mf == "on"
    if xdlops is not None:
        kernel_xdlops = bool(xdlops)

    # -- validation (callbacks run in command-line order; the last one wins)
    validation = None
    for name, value, _ in opts:
        if name == "verifier":
            if value and value not in _VERIFIERS:
                raise ConfigError(f"verifier: {_one_line(value)!r} is not one of {', '.join(_VERIFIERS)} (or empty)")
            validation = value or validation
        elif name in ("pv", "pv_with_cpp", "pv_with_mlir", "pv_with_gpu") and _parse_bool(name, value):
            validation = {"pv": "cpu", "pv_with_cpp": "cpp", "pv_with_mlir": "mlir", "pv_with_gpu": "gpu"}[name]
    if "cpu-kernels" in given and _parse_bool("cpu-kernels", given["cpu-kernels"]):
        validation = None

    # -- random data
    random = _random_spec(given, ints)

    # -- layouts
    layouts = {}
    for opt in ("fil_layout", "in_layout", "out_layout"):
        raw = given.get(opt, _LAYOUT_DEFAULTS[opt])
        norm = _normalise_layout(opt, raw)
        # miopen-gen's verifyLayout (inserting g never separates these pairs)
        if opt == "fil_layout" and "yx" not in norm and "xy" not in norm:
            raise ConfigError(f"fil_layout: {_one_line(raw)!r} must keep y and x adjacent (e.g. kcyx, kyxc, yxck)")
        if opt == "in_layout" and "hw" not in norm and "wh" not in norm:
            raise ConfigError(f"in_layout: {_one_line(raw)!r} must keep h and w adjacent (e.g. nchw, nhwc)")
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

    populate = _parse_bool("p", given["p"]) if "p" in given else False
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

    problem = _make_problem(
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


def _random_spec(given: Mapping[str, str], ints: Mapping[str, int]) -> RandomSpec:
    raw = given.get("rand", "fixed")
    rand_type = given.get("rand_type", "int")
    if rand_type not in _RAND_TYPES:
        raise ConfigError(f"rand_type: {_one_line(rand_type)!r} is not one of {', '.join(_RAND_TYPES)}")
    side = given.get("rand_side", "both")
    if side not in _RAND_SIDES:
        raise ConfigError(f"rand_side: {_one_line(side)!r} is not one of {', '.join(_RAND_SIDES)}")
    lo, hi = ints.get("rand_min"), ints.get("rand_max")
    for name, val in (("rand_min", lo), ("rand_max", hi)):
        if val is not None and not -32768 <= val <= 32767:
            raise ConfigError(f"{name}: {val} does not fit the harness's C short (-32768..32767)")
    if raw in ("fixed", "none"):
        return RandomSpec(raw, None, rand_type, lo, hi, side, raw)
    m = re.match(r"[0-9]+", raw)
    if not m:
        raise ConfigError(
            f"rand: {_one_line(raw)!r} is not allowed; give a seed (a non-negative integer, 0 = time), fixed or none"
        )
    digits = m.group(0)
    if len(digits) > 10 or int(digits) > 2**31 - 1:
        raise ConfigError(f"rand: {_one_line(digits, 20)} is too large; the seed is a C int (at most {2**31 - 1})")
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


def _make_problem(direction, *, n, c, h, w, k, y, x, groups, pad_h, pad_w, stride, dilation, layouts, names):
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


# ------------------------------------------------------------------------------------------------
# MIOpenDriver

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
_DRIVER_INT = (
    "spatial_dim forw batchsize in_channels in_h in_w out_channels fil_h fil_w conv_stride_h conv_stride_w "
    "pad_h pad_w pad_val dilation_h dilation_w group_count verify"
).split()
_DRIVER_LAYOUTS = {
    "in_layout": {"NCHW": "nchw", "NHWC": "nhwc"},
    "out_layout": {"NCHW": "nkhw", "NHWC": "nhwk"},
    "fil_layout": {"NCHW": "kcyx", "NHWC": "kyxc"},
}


def _parse_driver(tokens: list[str], *, source: str, direction: str | None) -> Config:
    if not tokens:
        raise ConfigError(f"MIOpenDriver: no sub-command; allowed: {', '.join(DRIVER_COMMANDS)}")
    cmd = tokens[0]
    if cmd not in DRIVER_COMMANDS:
        raise ConfigError(
            f"MIOpenDriver sub-command {_one_line(cmd)!r}: not a convolution; allowed: "
            f"{', '.join(DRIVER_COMMANDS)}{_close(cmd, DRIVER_COMMANDS)}"
        )
    values = {long: default for long, (_, default) in _DRIVER_FLAGS.items()}
    options = []
    i = 1
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if not tok.startswith("-") or tok == "-":
            raise ConfigError(f"MIOpenDriver argument {_one_line(tok)!r}: expected a flag (-x VALUE or --name VALUE)")
        if tok.startswith("--"):
            name, eq, value = tok[2:].partition("=")
            if name not in _DRIVER_FLAGS:
                raise ConfigError(f"MIOpenDriver flag --{_one_line(name)}: unknown{_close(name, _DRIVER_FLAGS)}")
        else:
            short = tok[1:2]
            name = _DRIVER_SHORT.get(short)
            if name is None or len(tok) != 2:
                raise ConfigError(
                    f"MIOpenDriver flag {_one_line(tok)!r}: unknown; short flags are one letter, e.g. -n 128"
                )
            eq, value = "", ""
        if not eq:
            if i >= len(tokens):
                raise ConfigError(f"MIOpenDriver flag {_one_line(tok)}: needs a value")
            value = tokens[i]
            i += 1
        if name == "help":
            raise ConfigError("MIOpenDriver flag --help: asks for help, not a convolution")
        values[name] = value
        options.append((name, value))

    ints = {name: _parse_c_int(name, values[name], 32) for name in _DRIVER_INT}
    if ints["spatial_dim"] != 2:
        raise ConfigError(f"spatial_dim: {ints['spatial_dim']} is not modelled; only 2-D convolutions (2)")
    if values["mode"] != "conv":
        raise ConfigError(f"mode: {_one_line(values['mode'])!r} is not modelled; only conv (trans is not)")
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
            raise ConfigError(f"{opt}: {_one_line(raw)!r} is not one of {', '.join(table)}")
        layouts[opt] = _normalise_layout(opt, table[raw])

    g = ints["group_count"]
    if g < 1:
        raise ConfigError(f"group_count (-g): {g} is not allowed; it must be a positive integer")
    for name in ("batchsize", "in_channels", "out_channels", "in_h", "in_w", "fil_h", "fil_w"):
        if ints[name] < 1:
            raise ConfigError(f"{name} (-{_DRIVER_FLAGS[name][0]}): {ints[name]} is not allowed; it must be a positive integer")
    for name in ("conv_stride_h", "conv_stride_w", "dilation_h", "dilation_w"):
        if ints[name] < 1:
            raise ConfigError(f"{name} (-{_DRIVER_FLAGS[name][0]}): {ints[name]} is not allowed; it must be a positive integer")
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
        raise ConfigError(f"pad_mode: {_one_line(pad_mode)!r} is not one of default, same, valid")
    if all(d == 1 for d in dils) or all(f == 1 for f in fil):
        if pad_mode == "same":
            for i2 in range(2):
                if inp[i2] % strides[i2] == 0:
                    pads[i2] = max(fil[i2] - strides[i2], 0) // 2
                else:
                    pads[i2] = max(fil[i2] - inp[i2] % strides[i2], 0) // 2
        elif pad_mode == "valid":
            pads = [0, 0]

    problem = _make_problem(
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
        names=("group_count (-g)", "in_channels (-c)", "out_channels (-k)", "in_h (-H)", "in_w (-W)", "fil_h (-y)", "fil_w (-x)"),
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


# ------------------------------------------------------------------------------------------------
# lit RUN lines


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
    return word.rsplit("/", 1)[-1]


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
    if "|" in tokens:
        tokens = tokens[: tokens.index("|")]
    if not tokens:
        raise ConfigError("config text: no command before the first '|'")
    head = _tool_name(tokens[0])
    if head in ("MIOpenDriver", "MIOpenDriver.exe"):
        return _parse_driver(tokens[1:], source=source, direction=direction)
    if head in DRIVER_COMMANDS and len(tokens) > 1 and tokens[1].startswith("-"):
        return _parse_driver(tokens, source=source, direction=direction)
    if head in GENERATOR_TOOLS:
        tool, args = head, tokens[1:]
    elif tokens[0].startswith(("-", "%")):
        tool, args = "miopen-gen", tokens
    else:
        raise ConfigError(
            f"config text: {_one_line(tokens[0], 40)!r} is not a generator ({', '.join(GENERATOR_TOOLS)}), "
            "MIOpenDriver, an option or a suite test name"
        )
    args = _apply_substitutions(args, substitutions)
    return _parse_generator(
        args,
        tool=tool,
        label=("lit:" + tool) if is_lit else tool,
        source=source,
        direction=direction,
        x2_defaults=x2_defaults,
        xdlops=xdlops,
    )


def parse_config(
    text: str,
    *,
    substitutions: Mapping[str, str] | None = None,
    direction: str | None = None,
    x2_defaults: bool | None = None,
    xdlops: bool | None = None,
) -> Config:
    """Read one convolution config (see the module docstring for the forms accepted).

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
    kw = dict(substitutions=subs, direction=direction, x2_defaults=x2_defaults, xdlops=xdlops)
    if "RUN:" in stripped:
        commands = _run_commands(stripped)
        if len(commands) != 1:
            raise ConfigError(
                f"lit text: {len(commands)} RUN commands; pass one (parse_lit_file reads a whole file)"
            )
        return _parse_command(_tokens(commands[0]), source=text, is_lit=True, **kw)
    tokens = _tokens(stripped)
    if not tokens:
        raise ConfigError("config text: no words in it")
    known_programs = GENERATOR_TOOLS + ("MIOpenDriver", "MIOpenDriver.exe")
    if len(tokens) == 1 and not tokens[0].startswith(("-", "%")) and _tool_name(tokens[0]) not in known_programs:
        from validation.suites import suite_config  # the suites read configs through this module

        if direction is not None or x2_defaults is not None:
            raise ConfigError("suite test name: direction= and x2_defaults= do not apply; the suite fixes them")
        return suite_config(tokens[0], xdlops=xdlops, substitutions=substitutions)
    return _parse_command(tokens, source=text, is_lit=False, **kw)


def parse_lit_file(text: str, **kwargs) -> list[Config]:
    """Every RUN command of a lit test file whose first program is a generator or MIOpenDriver,
    in file order (other RUN commands, e.g. pure FileCheck runs, are skipped)."""
    out = []
    for cmd in _run_commands(text):
        tokens = _tokens(cmd)
        head = _tool_name(tokens[0]) if tokens else ""
        if head in GENERATOR_TOOLS or head in ("MIOpenDriver", "MIOpenDriver.exe"):
            out.append(parse_config("// RUN: " + cmd, **kwargs))
    return out


def with_name(config: Config, name: str, tool: str) -> Config:
    """``config`` relabelled (used by the suites)."""
    return replace(config, name=name, tool=tool)
