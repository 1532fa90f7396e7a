"""What a differing GPU output matches: a bounded search over the run's options, and a
characterisation of the differences when nothing matches.

When ``run --gpu-output`` finds the GPU's array differs from the emulated kernel, the usual cause
is not a bug but a wrong option: the array came from another GPU (``--hw``), the other kernel
(``--kernel``) or another tuning (``--perf-config``); a raw dump was read in the wrong axis order
(``--layout``); the harness used another seed or input range (``--seed``, ``--rand-type``,
``--rand-min``/``--rand-max``). :func:`search_matches` changes one option at a time and reports
each change under which the emulation gives the array bit for bit (split-K atomics: every
element an outcome of some add order), cheapest checks first:

1. ``layout``: the array read in every other axis order of the result tensor (no arithmetic);
2. ``array``: whether the file is the validation function's output rounded to the output format
   (fp16 or bf16), not a kernel's (no arithmetic);
3. ``model``: the other GPUs, the other kernel and the valid entries of the 2022 tuning list, all
   on the run's own inputs, in one pass over them (:meth:`emu.conv.ConvGemm.compute`);
4. ``inputs``: nearby and common seeds (seed ± 1 … ± 3, 0, 1, 42), the other distribution (float
   reals in [-1, 1] vs the int generator's [-5, 5)) and the 2022 study's ranges, one pass each on
   new harness inputs.

A bf16 run's stages run the bf16 models (every GPU has a bf16 unit; the kernels, tunings, seeds
and ranges as for fp16, the inputs truncated to bf16 as the harness stored them) and compare bf16
outputs; the distances are in bf16 ulps.

The search stops after the first stage that finds a match (in the ``inputs`` stage, at the first
match), when ``budget_s`` seconds have passed or ``max_candidates`` options were tried; the
result says which options were tried, how long it took and why it stopped.

:func:`describe_differences` characterises the differences from the emulated kernel: how many,
how far apart in ulps of the output format (a histogram), and where: scattered over the output tiles and axes as
random placement would be, or clustered. Scattered differences of an ulp or two are different
arithmetic (another unit, k order or tuning); clustered or large ones are a bug suspect; nearly
every element differing points at the inputs, the layout or the file's reading rather than the
kernel.
"""

from __future__ import annotations

import dataclasses
import itertools
import shlex
import time
from dataclasses import dataclass, field

import numpy as np

from emu.conv import ConvGemm
from emu.formats import ulp
from models import harness
from models import kernels as kernel_models
from models.hardware import HW_NAMES
from models.kernels import ATOMIC_ORDERS
from models.tuning import NONXDLOPS_TUNINGS_2022, XDLOPS_TUNINGS_2022

from ..progress import progress_bar
from .arrays import round_output
from .gpu import compare_gpu_output, from_layout, gpu_values
from .inputs import resolve_inputs

__all__ = [
    "STAGES",
    "SEEDS",
    "ULP_BINS",
    "MatchSearch",
    "search_matches",
    "describe_differences",
    "reproduce_command",
]

#: The search's stages, cheapest first (module docstring).
STAGES = ("layout", "array", "model", "inputs")
#: Common seeds tried after the run's seed ± 1 … ± :data:`SEED_RADIUS` (0 is not among them: the
#: harness reads ``-rand 0`` as ``srand(time(0))``, which no one can reproduce).
SEEDS = (1, 42, 1234)
SEED_RADIUS = 3
#: The 2022 study's input ranges (besides the harness defaults), for the ``inputs`` stage.
STUDY_RANGES = ((-1, 1), (-10, 10), (1, 5), (5, 10))
#: Histogram bins of the ulp distances: (label, lowest, highest) in ulps of the output format (fp16
#: or bf16) at the emulated value.
ULP_BINS = (("1", 0, 1), ("2", 1, 2), ("3-4", 2, 4), ("5-16", 4, 16), ("17-256", 16, 256), (">256", 256, np.inf))
#: Share of differing elements above which the differences point at inputs/layout/reading.
MOST = 0.5
#: A pattern is "clustered" when an axis or the tiles are hit by fewer than this share of the
#: distinct indices random placement of as many differences would hit (other arithmetic hits some
#: channels more than others, by a factor of two or so; a faulty tile or row hits one of many).
CLUSTER_SHARE = 0.25
#: Differences are "small" when at least this share lies within :data:`SMALL_ULPS` ulps and
#: none is a NaN or an infinity on one side only (another unit's rounding: mostly 1 ulp, a few more
#: where the sum cancels).
SMALL_SHARE = 0.9
SMALL_ULPS = 4
#: Below this many differences no pattern (scattered or clustered) is claimed.
FEW = 8

# option name → the run command's flag
_FLAGS = {
    "hw": "--hw",
    "kernel": "--kernel",
    "perf_config": "--perf-config",
    "seed": "--seed",
    "rand_type": "--rand-type",
    "rand_min": "--rand-min",
    "rand_max": "--rand-max",
    "layout": "--layout",
}


@dataclass
class MatchSearch:
    """The result of :func:`search_matches`.

    ``matches``: each option change (``{"hw": "mi100"}``, ``{"layout": "nkhw"}``, ``{"seed": 8}``,
    ``{"rand_type": "int", "rand_min": -5, "rand_max": 5}``, ``{"array": "validation"}``) under
    which the emulation gives the array bit for bit; ``tried``: every change tried, in order,
    each with its stage and the number of elements that still differ (``n_differ``);
    ``stopped``: why the search ended ("match", "budget", "candidates" or "done");
    ``not_tried``: stages skipped and why; ``differences``: :func:`describe_differences` of the
    array against the run's own emulation."""

    matches: list[dict] = field(default_factory=list)
    tried: list[dict] = field(default_factory=list)
    elapsed_s: float = 0.0
    budget_s: float = 0.0
    max_candidates: int = 0
    stopped: str = "done"
    not_tried: list[str] = field(default_factory=list)
    differences: dict = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)
    searched: bool = True
    #: the output format searched (fp16 or bf16): what every candidate is rounded to
    format: str = "fp16"

    @property
    def closest(self) -> list[dict]:
        """The three tried options leaving the fewest elements different (matches first)."""
        return sorted(self.tried, key=lambda t: t["n_differ"])[:3]

    def counts(self) -> dict[str, int]:
        """Options tried per option name (``{"layout": 23, "hw": 2, …}``)."""
        out: dict[str, int] = {}
        for t in self.tried:
            out[_name(t["option"])] = out.get(_name(t["option"]), 0) + 1
        return out

    def to_dict(self) -> dict:
        return {
            "matches": [dict(m) for m in self.matches],
            "commands": list(self.commands),
            "tried": len(self.tried),
            "tried_by_option": self.counts(),
            "options_tried": [dict(t) for t in self.tried],
            "closest": [dict(t) for t in self.closest],
            "elapsed_s": round(self.elapsed_s, 3),
            "budget_s": self.budget_s,
            "max_candidates": self.max_candidates,
            "stopped": self.stopped,
            "not_tried": list(self.not_tried),
            "differences": dict(self.differences),
            "searched": self.searched,
        }

    def format_text(self) -> str:
        """The search's lines for ``run --gpu-output``: what was tried, each match with the command
        that reproduces the array, else the closest options and the differences' character."""
        why = {
            "match": "stopped at the first stage with a match",
            "budget": f"stopped at the time budget of {self.budget_s:g} s",
            "candidates": f"stopped at {self.max_candidates} options",
            "done": "every option of the search tried",
        }[self.stopped]
        per = ", ".join(f"{n} {k}" for k, n in self.counts().items())
        if not self.searched:
            return "search: none (--search-budget 0)\n  " + difference_text(self.differences)
        found = f"{len(self.matches)} match{'es' if len(self.matches) != 1 else ''}" if self.matches else "no match"
        lines = [f"search: {found}; tried {len(self.tried)} options ({per or 'none'}) in {self.elapsed_s:.1f} s, {why}"]
        listed: dict[str, list[str]] = {}
        for t in self.tried:
            listed.setdefault(_name(t["option"]), []).append(_value(t["option"]))
        for k, values in listed.items():
            lines.append(f"  tried {k}: {', '.join(values)}")
        for n in self.not_tried:
            lines.append(f"  not tried: {n}")
        for m, cmd in itertools.zip_longest(self.matches, self.commands):
            if m.get("array") == "validation":
                lines.append(
                    f"  MATCH: the array is the validation function's output rounded to {self.format} (RNE), not a "
                    "kernel's output"
                )
            else:
                lines.append(f"  MATCH {_text(m)}: the emulation then gives the array bit for bit:")
                lines.append(f"    {cmd}")
        if not self.matches:
            close = "; ".join(f"{_text(t['option'])}: {t['n_differ']} differ" for t in self.closest)
            if close:
                lines.append(f"  closest: {close}")
        d = self.differences
        if d and d.get("n_differ"):
            lines.append("  " + difference_text(d))
        return "\n".join(lines)


def _name(option: dict) -> str:
    keys = [k for k in option if k not in ("rand_min", "rand_max")] or list(option)
    return "+".join(keys)


def _value(option: dict) -> str:
    if "rand_min" in option:
        rt = option.get("rand_type")
        lo, hi = option["rand_min"], option["rand_max"]
        return f"{rt + ' ' if rt else ''}[{lo}, {hi}{')' if rt == 'int' else ']'}"
    return "+".join(str(v) for v in option.values())


def _text(option: dict) -> str:
    parts = []
    for k, v in option.items():
        parts.append(f"{_FLAGS.get(k, k)} {v}")
    return " ".join(parts)


# --- the differences -------------------------------------------------------------------------


def _expected_hits(cells: int, n: int) -> float:
    """Distinct cells of ``cells`` that ``n`` differences placed at random would hit (on average)."""
    if cells <= 0:
        return 0.0
    return cells * (1.0 - (1.0 - 1.0 / cells) ** n)


def _tiles(result) -> np.ndarray | None:
    """Per result element, the kernel's output tile (None for a model without tiles)."""
    plans = result.kernel.tuning_plans(result.problem)
    if not plans:
        return None
    tiles = [None if p is None else (p.tuning.m_per_block, p.tuning.n_per_block) for p in plans]
    if all(t is None for t in tiles):
        return None
    try:
        inputs = result.inputs
        op = ConvGemm(
            result.problem, x=inputs.get("input"), w=inputs.get("filter"), dy=inputs.get("output"), fmt=result.format
        )
        return op.tile_ids(tiles)
    except ValueError:
        return None


def describe_differences(result, gpu) -> dict:
    """How the GPU's array ``gpu`` differs from ``result``'s emulated kernel (module docstring):
    counts, the histogram of ulp distances in the output format (``format``: fp16 or bf16;
    :data:`ULP_BINS`; ``non-finite``: a NaN or an infinity on one side only), where the
    differences sit (output tiles and axes hit against what random placement would hit) and
    ``reading``: "same", "most differ", "scattered small" or "clustered or large"."""
    fmt = result.format
    emulated = np.asarray(result.kernel_output).reshape(-1)
    g16 = gpu_values(gpu, emulated.size, result.shape, fmt)
    e_bits, g_bits = emulated.view(np.uint16), g16.view(np.uint16)
    differ = (e_bits != g_bits) & ~(np.isnan(emulated) & np.isnan(g16))
    where = np.flatnonzero(differ)
    n, nd = int(emulated.size), int(where.size)
    doc: dict = {"n": n, "n_differ": nd, "share": nd / n if n else 0.0, "format": fmt}
    if nd == 0:
        doc["reading"] = "same"
        return doc
    e = emulated[where].astype(np.float64)
    g = g16[where].astype(np.float64)
    finite = np.isfinite(e) & np.isfinite(g)
    # ulps at the larger magnitude, as identify counts them: a sign change is as far as its size
    ulps = np.abs(g[finite] - e[finite]) / ulp(np.maximum(np.abs(e[finite]), np.abs(g[finite])), fmt)
    hist = {label: int(np.count_nonzero((ulps > lo) & (ulps <= hi))) for label, lo, hi in ULP_BINS}
    hist["non-finite"] = int(np.count_nonzero(~finite))
    doc["ulps"] = hist
    doc["max_ulps"] = float(ulps.max()) if ulps.size else None
    doc["median_ulps"] = float(np.median(ulps)) if ulps.size else None
    # where: the kernel's output tiles and each axis, against random placement
    spread: dict = {}
    tiles = _tiles(result)
    if tiles is not None:
        hit = np.unique(tiles[where][tiles[where] >= 0]).size
        cells = int(np.unique(tiles[tiles >= 0]).size)
        spread["tiles"] = {"hit": int(hit), "of": cells, "random": round(_expected_hits(cells, nd), 1)}
    p = result.problem
    axes = tuple(p.layout5(p.result_role))
    sizes = p.letter_sizes(p.result_role)
    dims = tuple(sizes[a] for a in axes)
    for axis, size, values in zip(axes, dims, np.unravel_index(where, dims)):
        if size > 1:
            spread[axis] = {
                "hit": int(np.unique(values).size),
                "of": int(size),
                "random": round(_expected_hits(size, nd), 1),
            }
    doc["spread"] = spread
    clustered = [k for k, s in spread.items() if s["hit"] < CLUSTER_SHARE * s["random"]] if nd >= FEW else []
    doc["clustered_on"] = clustered
    within = int(np.count_nonzero(ulps <= SMALL_ULPS))
    small = hist["non-finite"] == 0 and within >= SMALL_SHARE * nd
    doc["pattern"] = "too few to tell" if nd < FEW else ("clustered" if clustered else "scattered")
    if nd / n >= MOST:
        doc["reading"] = "most differ"
    elif small and not clustered:
        doc["reading"] = "scattered small"
    else:
        doc["reading"] = "clustered or large"
    return doc


def difference_text(d: dict) -> str:
    """One paragraph for :func:`describe_differences`'s dict."""
    if not d.get("n_differ"):
        return "no element differs"
    hist = ", ".join(f"{k}: {v}" for k, v in d["ulps"].items() if v)
    where = []
    for k, s in d.get("spread", {}).items():
        name = "output tiles" if k == "tiles" else f"{k} indices"
        where.append(f"{s['hit']} of {s['of']} {name} (random placement: ~{s['random']:g})")
    pattern = f"clustered on {', '.join(d['clustered_on'])}" if d.get("clustered_on") else d["pattern"]
    reading = {
        "most differ": (
            f"nearly every element differs ({100 * d['share']:.1f} %): this points at the inputs (seed, range), "
            f"the layout or the file's reading, not the kernel"
        ),
        "scattered small": (
            f"{'scattered and ' if d['pattern'] == 'scattered' else ''}small (at least "
            f"{100 * SMALL_SHARE:g} % within {SMALL_ULPS} ulps): different arithmetic (another unit, k order or "
            f"tuning than the emulation's), not a bug"
        ),
        "clustered or large": (
            f"{'clustered' if d['clustered_on'] else 'large'} (more than {100 - 100 * SMALL_SHARE:g} % beyond "
            f"{SMALL_ULPS} ulps, or clustered): a bug suspect (a tile, row or K block computed wrongly), or "
            f"inputs that are not the emulation's"
        ),
    }[d["reading"]]
    return (
        f"differences: {d['n_differ']} of {d['n']} elements ({100 * d['share']:.2f} %); "
        f"{d.get('format', 'fp16')} ulps apart: {hist}; "
        f"{pattern}: in {'; '.join(where)}. Reading: {reading}"
    )


# --- the search -------------------------------------------------------------------------------


def _short_kernel(model) -> str:
    return {v: k for k, v in _KERNELS.items()}.get(model.name, model.name)


_KERNELS = {"xdlops": "rocmlir-2022-xdlops", "nonxdlops": "rocmlir-2022-nonxdlops"}


def _model_candidates(result) -> list[tuple[dict, object]]:
    """(option change, kernel model) for every other GPU, the other kernel and each valid tuning,
    distinct arithmetic only (the first option that gives it)."""
    problem = result.problem
    own = result.kernel
    seen = {repr(own.identity(problem))}
    out = []

    def add(option, name, hw, tuning=None):
        try:
            model = kernel_models.kernel(name, hw=hw, tuning=tuning, input=own.input)
            key = repr(model.identity(problem))
        except ValueError:
            return  # not valid for this problem (a tuning the 2022 rules refuse)
        if key not in seen:
            seen.add(key)
            out.append((option, model))

    hw_own = own.hw or "mi200"
    kind = _short_kernel(own)
    for hw in HW_NAMES:
        if hw != hw_own:
            add({"hw": hw}, own.name, hw, own.tuning)
    other = "nonxdlops" if kind == "xdlops" else "xdlops"
    add({"kernel": other}, _KERNELS[other], hw_own)
    for hw in HW_NAMES:
        if hw != hw_own:
            add({"hw": hw, "kernel": other}, _KERNELS[other], hw)
    tunings = XDLOPS_TUNINGS_2022 if own.xdlops else NONXDLOPS_TUNINGS_2022
    for t in tunings:
        add({"perf_config": t.to_perf_config()}, own.name, hw_own, t)
    return out


def _input_candidates(result) -> list[dict]:
    """Option changes of the inputs: seeds near the run's and common ones, the other
    distribution, the study's ranges."""
    info = result.inputs_info
    if info is None or info.distribution == "user":
        return []
    out: list[dict] = []
    seed = info.seed
    seeds = []
    if seed is not None:
        for d in range(1, SEED_RADIUS + 1):
            seeds += [seed + d, seed - d]
    seeds += list(SEEDS)
    rtype = info.distribution if info.distribution in ("int", "float") else None
    for s in dict.fromkeys(seeds):
        if s is not None and s != seed and s > 0:
            out.append({"seed": s} if rtype else {"seed": s, "rand_type": "float"})
    if rtype is None:
        return out
    other = "int" if rtype == "float" else "float"
    lo, hi = harness.harness_range(other)
    out.append({"rand_type": other, "rand_min": lo, "rand_max": hi})
    for lo, hi in ((*harness.harness_range(rtype),), *STUDY_RANGES):
        if (lo, hi) != (info.rand_min, info.rand_max):
            out.append({"rand_min": lo, "rand_max": hi})
    return [dict(o) for o in {repr(o): o for o in out}.values()]


def _emulate(result, models, inputs) -> list:
    """RunResults of ``models`` (KernelModels) on ``inputs``: one pass over the gathered operands;
    atomic split-K kernels keep their partial sums (the comparison then searches add orders); the
    outputs are rounded to the run's format (fp16 or bf16)."""
    problem = result.problem
    op = ConvGemm(problem, x=inputs.get("input"), w=inputs.get("filter"), dy=inputs.get("output"), fmt=result.format)
    atomic = [m.atomic_split(problem) > 0 for m in models]
    outs = op.compute([m.arithmetic(problem, keep_partials=a, seed=ATOMIC_ORDERS.seed) for m, a in zip(models, atomic)])
    runs = []
    for m, a, out in zip(models, atomic, outs):
        k32 = out.ascending() if a else out
        runs.append(
            dataclasses.replace(
                result,
                kernel=m,
                kernel_fp32=k32,
                kernel_output=round_output(k32, result.format),
                inputs=inputs,
                ensemble=out if a else None,
            )
        )
    return runs


def _differ(run_result, g16) -> int:
    got = compare_gpu_output(run_result, g16)
    return got.n_outside_ensemble if got.ensemble_orders else got.n_differ


def search_matches(
    result,
    gpu,
    *,
    raw=None,
    layout: str | None = None,
    stages=STAGES,
    budget_s: float = 60.0,
    max_candidates: int = 200,
    progress: bool = False,
    command: dict | None = None,
) -> MatchSearch:
    """Search what the GPU's array matches (module docstring).

    ``result``: the :class:`validation.run.RunResult` of the run; ``gpu``: the GPU's array as
    judged (the result tensor's memory order; values of the run's format, fp16 or bf16, their
    uint16 patterns or an exact fp32 copy);
    ``raw``: the array as read from the file, before ``layout`` (the ``--layout`` given, None for
    the config's own) rearranged it: the ``layout`` stage reads it in the other axis orders
    (default: ``gpu``, with the config's layout); ``stages``: a subset of :data:`STAGES`;
    ``budget_s``/``max_candidates``: the bounds; ``progress``: a bar on stderr over the options;
    ``command``: the options of the run as ``fp16emu run`` flags (:func:`reproduce_command`'s
    ``options``), to write each match's command (``MatchSearch.commands``)."""
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        raise ValueError(f"stages: {', '.join(map(repr, unknown))} not among {', '.join(STAGES)}")
    t0 = time.monotonic()
    problem = result.problem
    role = problem.result_role
    g16 = gpu_values(gpu, np.asarray(result.kernel_output).size, result.shape, result.format)
    raw = g16 if raw is None else raw
    search = MatchSearch(
        budget_s=float(budget_s), max_candidates=int(max_candidates), searched=bool(stages), format=result.format
    )
    search.differences = describe_differences(result, g16)

    sizes = problem.letter_sizes(role)
    own_layout = problem.layout(role).lower()
    letters = own_layout.replace("g", "") if problem.groups == 1 else own_layout

    def key(name):  # axis orders that differ only in where a size-1 axis sits are one order
        return tuple(c for c in name if sizes.get(c, 1) > 1)

    current = key((layout or own_layout).lower())
    layouts = list({key(p): "".join(p) for p in itertools.permutations(letters) if key(p) != current}.values())
    models = _model_candidates(result) if "model" in stages else []
    input_options = _input_candidates(result) if "inputs" in stages else []
    if "inputs" in stages and not input_options:
        search.not_tried.append("seeds and input ranges: the inputs are the user's own tensors")
    total = (len(layouts) if "layout" in stages else 0) + ("array" in stages) + len(models) + len(input_options)
    bar = progress_bar(total, progress, "searching what the GPU output matches", unit="options")

    def tried(stage, option, n_differ):
        search.tried.append({"stage": stage, "option": option, "n_differ": int(n_differ)})
        if n_differ == 0:
            search.matches.append(option)
        if bar is not None:
            bar.update(1)

    def out_of_bounds() -> bool:
        if len(search.tried) >= max_candidates:
            search.stopped = "candidates"
            return True
        if time.monotonic() - t0 > budget_s:
            search.stopped = "budget"
            return True
        return False

    try:
        for stage in STAGES:
            if stage not in stages or out_of_bounds():
                continue
            if stage == "layout":
                for name in layouts:
                    if out_of_bounds():
                        break
                    arranged = from_layout(raw, problem, name)
                    tried(stage, {"layout": name}, _differ(result, arranged))
            elif stage == "array":
                rounded = round_output(np.asarray(result.validation_output, np.float32).reshape(-1), result.format)
                tried(
                    stage,
                    {"array": "validation"},
                    int(np.count_nonzero(rounded.view(np.uint16) != g16.view(np.uint16))),
                )
            elif stage == "model" and models:
                room = max(0, max_candidates - len(search.tried))
                chosen = models[:room]
                for (option, _), run_result in zip(chosen, _emulate(result, [m for _, m in chosen], result.inputs)):
                    tried(stage, option, _differ(run_result, g16))
            elif stage == "inputs":
                for option in input_options:
                    if out_of_bounds():
                        break
                    kw, _ = resolve_inputs(
                        result.config,
                        seed=option.get("seed", result.inputs_info.seed),
                        rand_type=option.get("rand_type", result.inputs_info.distribution),
                        rand_min=option.get("rand_min", result.inputs_info.rand_min),
                        rand_max=option.get("rand_max", result.inputs_info.rand_max),
                    )
                    inputs = harness.harness_inputs(problem, **kw)
                    tried(stage, option, _differ(_emulate(result, [result.kernel], inputs)[0], g16))
                    if search.matches:
                        break
            if search.matches:
                search.stopped = "match"
                break
    finally:
        if bar is not None:
            bar.close()
    search.elapsed_s = time.monotonic() - t0
    if command is not None:
        search.commands = [reproduce_command(command, m) for m in search.matches if m.get("array") != "validation"]
    return search


def reproduce_command(options: dict, change: dict) -> str:
    """The ``fp16emu run`` command line of ``options`` (``{"config": …, "hw": …, "kernel": …,
    "perf_config": …, "seed": …, "rand_type": …, "rand_min": …, "rand_max": …, "gpu_output": …,
    "gpu_output_format": …, "layout": …, "validator": …}``, None values left out) with ``change``
    applied; a ``layout`` equal to ``options["own_layout"]`` is left out."""
    opts = {k: v for k, v in options.items()}
    opts.update(change)
    parts = ["fp16emu", "run", shlex.quote(str(opts.get("config")))]
    flags = {
        **_FLAGS,
        "validator": "--validator",
        "gpu_output": "--gpu-output",
        "gpu_output_format": "--gpu-output-format",
    }
    for k in ("hw", "kernel", "perf_config", "validator", "seed", "rand_type", "rand_min", "rand_max"):
        if opts.get(k) is not None:
            parts += [flags[k], shlex.quote(str(opts[k]))]
    for k in ("gpu_output", "gpu_output_format"):
        if opts.get(k) is not None:
            parts += [flags[k], shlex.quote(str(opts[k]))]
    if opts.get("layout") is not None and opts.get("layout") != opts.get("own_layout"):
        parts += ["--layout", shlex.quote(str(opts["layout"]))]
    return " ".join(parts)
