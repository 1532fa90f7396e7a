"""What a run may ask for, checked before anything is allocated: the data type (the kernel and
validator models are of fp16 and bf16 kernels) and the work a problem asks for — multiply-adds, memory and the
number of GEMMs — estimated in O(1) from its shapes, refused past a stated limit.

The limits (defaults below) are raised with environment variables: ``FP16EMU_MAX_MACS`` (e.g.
``2e13``), ``FP16EMU_MAX_MEMORY_GIB`` and ``FP16EMU_MAX_GEMMS``. Every refusal is a
:class:`ConfigError` (a ``ValueError``): one line with the estimate, the limit and how to raise it.
"""

from __future__ import annotations

import math
import os
from typing import NamedTuple

from .records import Config, ConfigError

__all__ = [
    "MAX_MACS",
    "MAX_MEMORY_GIB",
    "MAX_GEMMS",
    "MAX_SEED",
    "Work",
    "physical_memory_gib",
    "address_space_gib",
    "memory_limit",
    "estimate_work",
    "check_work",
    "check_dtype",
    "data_format",
    "MODELLED_DTYPES",
    "check_seed",
    "check_rand_bound",
    "MAX_MEMBERS",
    "MAX_SEARCH_SECONDS",
    "check_count",
    "check_seconds",
    "check_macs",
]

#: Default limits: 10 T multiply-adds (about 20 times the largest rocMLIR 2022 fp16 suite test,
#: 474 G), 64 GiB of estimated memory (or the machine's physical memory when smaller), 2^18 GEMMs
#: (sub-GEMMs × groups).
MAX_MACS = 10**13
MAX_MEMORY_GIB = 64.0
MAX_GEMMS = 1 << 18
#: The largest ``-rand`` seed a config may give (miopen-gen reads it as a C int).
MAX_SEED = 2**31 - 1

#: Estimated bytes per element: operands (fp32 values drawn, fp16 kept) and the result (fp32 per
#: model ×2, fp16 output, metric temporaries in fp64).
_OPERAND_BYTES = 8
_RESULT_BYTES = 40

#: The most atomic add orders an ensemble may draw (``--members``; 32 times the default 128: each
#: member is the whole output judged again), and the longest search a run may be given
#: (``--search-budget``, seconds).
MAX_MEMBERS = 4096
MAX_SEARCH_SECONDS = 3600.0

_DEFAULT_COUNTS = {"members": MAX_MEMBERS}

_ENV = {
    "macs": "FP16EMU_MAX_MACS",
    "memory": "FP16EMU_MAX_MEMORY_GIB",
    "gemms": "FP16EMU_MAX_GEMMS",
    "members": "FP16EMU_MAX_MEMBERS",
}


class Work(NamedTuple):
    """The work of one run of a problem (kernel model + validator model): multiply-adds of one
    model, estimated peak memory in bytes, and GEMMs run per model (sub-GEMMs × groups)."""

    macs: int
    memory_bytes: int
    gemms: int

    def text(self) -> str:
        return f"{_si(self.macs)} multiply-adds, about {self.memory_bytes / 2**30:.3g} GiB, {self.gemms} GEMMs"


def _si(n: float) -> str:
    for unit, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f}"


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def estimate_work(problem) -> Work:
    """:class:`Work` of ``problem`` (an ``emu.conv.ConvProblem``) from its sizes alone, in O(1):
    nothing is allocated and no sub-GEMM is listed (backward data's yTilda·xTilda residues are
    counted, not visited; a residue at or beyond the filter size runs nothing)."""
    p = problem
    g = p.groups
    cg, kg = p.c // g, p.k // g
    elements = {
        "input": p.n * p.c * p.h * p.w,
        "filter": p.k * cg * p.y * p.x,
        "output": p.n * p.k * p.out_h * p.out_w,
    }
    result = elements[p.result_role]
    operands = sum(v for r, v in elements.items() if r != p.result_role)
    if p.direction in ("fwd", "bwd_weight"):
        macs = g * kg * cg * p.y * p.x * p.n * p.out_h * p.out_w
        subs = 1
    else:
        slices = []
        residues = []
        for stride, dil, fil, out, inp, pad in (
            (p.stride[0], p.dilation[0], p.y, p.out_h, p.h, p.pad_h[0]),
            (p.stride[1], p.dilation[1], p.x, p.out_w, p.w, p.pad_w[0]),
        ):
            tilda = stride // math.gcd(stride, dil)
            size = out + _ceil_div(dil * (fil - 1), stride)
            left = max(0, pad - dil * (tilda - 1)) // stride
            right = min(size, _ceil_div(pad + inp - 1, stride) + 1)
            slices.append(max(0, right - left))
            residues.append(min(tilda, fil))
        # Σ over residues of yDotSlice = Y (every filter row belongs to one residue)
        macs = g * cg * kg * p.n * slices[0] * slices[1] * p.y * p.x
        subs = residues[0] * residues[1]
    memory = _OPERAND_BYTES * operands + _RESULT_BYTES * result
    return Work(int(macs), int(memory), int(subs * g))


def physical_memory_gib() -> float | None:
    """This machine's physical memory in GiB, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (AttributeError, ValueError, OSError):
        return None


def address_space_gib() -> float | None:
    """The process's address-space limit (``ulimit -v``, ``RLIMIT_AS``) in GiB, or None when unlimited."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return None
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    return soft / 2**30


def memory_limit(max_memory_gib: float | None = None) -> tuple[int, float, str]:
    """The memory this process may use: (bytes, GiB, what sets it). ``max_memory_gib``, else
    ``FP16EMU_MAX_MEMORY_GIB``, else :data:`MAX_MEMORY_GIB`, the machine's physical memory or
    the process's address-space limit (``ulimit -v``), whichever is smallest; an explicit limit
    is still capped by ``ulimit -v`` (nothing can allocate past it)."""
    physical = physical_memory_gib()
    default, note = MAX_MEMORY_GIB, ""
    if physical is not None and physical < default:
        default, note = physical, " (this machine's memory)"
    gib = _limit("memory", default, max_memory_gib)
    if max_memory_gib is not None or os.environ.get(_ENV["memory"], "").strip():
        note = ""
    rlimit = address_space_gib()
    if rlimit is not None and rlimit < gib:
        # the interpreter, numpy and numba's kernels take part of the address space already
        gib, note = rlimit, " (this process's address-space limit, ulimit -v)"
    return int(gib * 2**30), gib, note


def _limit(kind: str, default: float, override: float | None) -> float:
    if override is not None:
        return float(override)
    raw = os.environ.get(_ENV[kind])
    if raw is None or not raw.strip():
        return float(default)
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{_ENV[kind]}: {raw!r} is not a number") from None
    if not value > 0:
        raise ConfigError(f"{_ENV[kind]}: {raw!r} must be a positive number")
    return value


def check_work(
    problem, *, max_macs: float | None = None, max_memory_gib: float | None = None, max_gemms: float | None = None
) -> Work:
    """:func:`estimate_work`, refused with a :class:`ConfigError` past the limits (arguments,
    else the environment variables, else :data:`MAX_MACS`, :data:`MAX_MEMORY_GIB`,
    :data:`MAX_GEMMS`)."""
    work = estimate_work(problem)
    macs_limit = _limit("macs", MAX_MACS, max_macs)
    _, mem_limit, mem_note = memory_limit(max_memory_gib)
    gemm_limit = _limit("gemms", MAX_GEMMS, max_gemms)
    if work.memory_bytes > mem_limit * 2**30:
        raise ConfigError(
            f"work: the problem needs about {work.memory_bytes / 2**30:.3g} GiB "
            f"({problem.tensor_size('input')} input, {problem.tensor_size('filter')} filter, "
            f"{problem.tensor_size('output')} output elements), over the limit of {mem_limit:.3g} GiB{mem_note}; "
            + ("raise ulimit -v to allow more" if "ulimit" in mem_note else f"set {_ENV['memory']} to raise it")
        )
    if work.macs > macs_limit:
        raise ConfigError(
            f"work: the problem needs {_si(work.macs)} multiply-adds per model, over the limit of "
            f"{_si(macs_limit)}; set {_ENV['macs']} to raise it"
        )
    if work.gemms > gemm_limit:
        raise ConfigError(
            f"work: the problem runs {work.gemms} GEMMs per model (sub-GEMMs × groups), over the limit of "
            f"{gemm_limit:g}; set {_ENV['gemms']} to raise it"
        )
    return work


#: The data types whose kernels are modelled: the config's spelling → the element format's name
#: (``emu.formats``): fp16 and bf16, the two 16-bit types miopen-gen's ``-t`` and MIOpenDriver's
#: ``convfp16``/``convbfp16`` name and every AMD unit multiplies (``models.UNIT_INPUTS``).
MODELLED_DTYPES = {"f16": "fp16", "bf16": "bf16"}
#: The fp8 spellings of later rocmlir-gen versions (gfx940 and newer, 2023 on): their kernels are
#: not the 2022 ones fp16emu models, so they are refused by name rather than as unknown words.
FP8_SPELLINGS = (
    "fp8",
    "bf8",
    "f8E4M3FNUZ",
    "f8E5M2FNUZ",
    "f8E4M3FN",
    "f8E5M2",
    "fp8_fp8",
    "fp8_bf8",
    "bf8_fp8",
    "bf8_bf8",
)


def data_format(config: Config) -> str:
    """The element format of ``config``'s tensors as ``emu.formats`` names it ("fp16" or "bf16");
    a :class:`ConfigError` from :func:`check_dtype` for any other data type."""
    check_dtype(config)
    return MODELLED_DTYPES[config.dtype]


def check_dtype(config: Config) -> None:
    """Refuse a config whose data type is not fp16 or bf16 (the kernel models are of those): one
    line naming the option that set it (``-t``, or MIOpenDriver's sub-command) and the accepted
    values."""
    if config.dtype in MODELLED_DTYPES:
        return
    given = dict(config.options)
    if config.tool == "MIOpenDriver":
        raise ConfigError(
            f"MIOpenDriver sub-command: data type {config.dtype} is not modelled; fp16emu emulates fp16 and bf16 "
            "kernels: use convfp16 or convbfp16"
        )
    if "t" not in given:
        why = f"-t: not given, and {config.tool.removeprefix('lit:')}'s default is f32 (not modelled)"
    else:
        shown = given["t"] if given["t"] == config.dtype else f"{given['t']} ({config.dtype})"
        why = f"-t: {shown!r} is not modelled"
        if given["t"].lower() in {s.lower() for s in FP8_SPELLINGS}:
            why += " (fp8 convolutions came with later rocmlir-gen versions for gfx940+, not the 2022 kernels modelled)"
    raise ConfigError(f"{why}; fp16emu emulates fp16 and bf16 kernels only: give -t f16 (or fp16) or -t bf16")


def check_seed(seed, option: str = "--seed") -> int | None:
    """``seed`` as the config's ``-rand`` accepts it: a whole number in 0..2^31−1 (0: the clock,
    as the harness did), or None; ConfigError otherwise (never reduced silently)."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int) and not hasattr(seed, "__index__"):
        raise ConfigError(f"{option}: {seed!r} is not a whole number in 0..{MAX_SEED}")
    seed = int(seed)
    if not 0 <= seed <= MAX_SEED:
        raise ConfigError(f"{option}: {seed} is outside 0..{MAX_SEED} (a C int, as the config's -rand; 0 = the clock)")
    return seed


def check_rand_bound(value, option: str) -> int | None:
    """A ``--rand-min``/``--rand-max`` override as the config's ``-rand_min``/``-rand_max`` accept
    it: a whole number that fits the harness's C short (−32768..32767), or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) and not hasattr(value, "__index__"):
        raise ConfigError(f"{option}: {value!r} is not a whole number in -32768..32767")
    value = int(value)
    if not -32768 <= value <= 32767:
        raise ConfigError(f"{option}: {value} does not fit the harness's C short (-32768..32767)")
    return value


def check_count(value, option: str, *, low: int = 1, high: int | None = None, env: str | None = None) -> int:
    """``value`` as a whole number in ``low``..``high`` (``env``: the limit's kind in the environment,
    e.g. "members" for ``FP16EMU_MAX_MEMBERS``, which replaces ``high``); ConfigError naming
    ``option``, the accepted range and how to raise the limit otherwise. A bool, a fraction, NaN
    or a string is refused, never truncated."""
    if env is not None:
        high = int(_limit(env, high if high is not None else _DEFAULT_COUNTS[env], None))
    span = f"{low}..{high}" if high is not None else f"≥ {low}"
    if isinstance(value, bool) or not isinstance(value, int) and not hasattr(value, "__index__"):
        raise ConfigError(f"{option}: {value!r} is not a whole number ({span})")
    value = int(value)
    if value < low:
        raise ConfigError(f"{option}: {value} is below {low}; give a whole number {span}")
    if high is not None and value > high:
        raise ConfigError(
            f"{option}: {value} is over the limit of {high}"
            + (f"; set {_ENV[env]} to raise it" if env is not None else f"; give a whole number {span}")
        )
    return value


def check_seconds(value, option: str, *, high: float = MAX_SEARCH_SECONDS) -> float:
    """``value`` as a number of seconds in 0..``high`` (0: none); ConfigError naming ``option``
    otherwise (negative, NaN, infinite or not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise ConfigError(f"{option}: {value!r} is not a number of seconds (0..{high:g})")
    seconds = float(value)
    if not 0 <= seconds <= high:  # NaN fails both comparisons
        raise ConfigError(f"{option}: {value!r} is not a number of seconds in 0..{high:g} (0: no search)")
    return seconds


def check_macs(macs: int, what: str, max_macs: float | None = None) -> int:
    """``macs`` multiply-adds (of one model of ``what``: a capture, a GEMM) refused with a
    :class:`ConfigError` past the limit (``max_macs``, else ``FP16EMU_MAX_MACS``, else
    :data:`MAX_MACS`), as :func:`check_work` refuses a problem's."""
    limit = _limit("macs", MAX_MACS, max_macs)
    if macs > limit:
        raise ConfigError(
            f"work: {what} needs {_si(macs)} multiply-adds, over the limit of {_si(limit)}; set {_ENV['macs']} to raise it"
        )
    return int(macs)
