"""What a run's inputs are, said out loud: the harness's generator and its options, or the user's
own tensors; the options that have no effect are warnings, never silence.

:func:`resolve_inputs` turns a config's random-data options (``-rand``, ``-rand_type``,
``-rand_min``/``-rand_max``, ``-rand_side``) and the overrides of ``run``/``explain``
(``--seed``, ``--rand-type``, ``--rand-min``/``--rand-max``) into the keyword arguments of
:func:`models.harness.harness_inputs` and an :class:`InputsInfo`: the distribution, its range as
an interval (the int generator draws ``rand() % (max − min) + min``, the integers of
[min, max); the float generator reals in [min, max]), the seed, and where each came from
(``config``, ``option`` or ``default``). A suite test's own generator (``%random_data`` =
``-rand 1``) is the default and is named as such.

:func:`user_tensors` reads the user's own tensors (``--inputs DIR`` or ``x.npy,w.npy[,dy.npy]``):
the emulation then runs on the values the user's harness fed the kernel, which makes any harness
runnable, MIOpenDriver's included. :func:`save_run` writes a run's inputs and outputs back as
``.npy`` with a ``run.json`` saying what produced them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import ml_dtypes
import numpy as np

from models.harness import harness_range

from ..configs import ConfigError
from ..files import check_output_file, write_files_atomically
from .arrays import as_typed, convert_exactly, load_array

__all__ = ["InputsInfo", "resolve_inputs", "user_tensors", "save_run", "ROLE_NAMES", "MIOPEN_DRIVER_HINT"]

#: The file name of each tensor (``--inputs``, ``--save``): x the input, w the filter, dy the
#: output (the gradient a backward pass reads).
ROLE_NAMES = {"input": "x", "filter": "w", "output": "dy"}
_NEEDS = {"fwd": ("input", "filter"), "bwd_data": ("filter", "output"), "bwd_weight": ("input", "output")}
FIXED_TEXT = "the fixed pattern 0.5, -1, 0.75 repeating over memory order"
MIOPEN_DRIVER_HINT = (
    "MIOpenDriver fills its tensors with MIOpen's own generator, which is not reproduced: give the tensors "
    "your run used with --inputs DIR or --inputs x.npy,w.npy[,dy.npy] (Python: run(..., inputs={'x': x, "
    "'w': w})); DIR holds x.npy, w.npy, dy.npy as the direction needs"
)


@dataclass(frozen=True)
class InputsInfo:
    """The inputs of one run (module docstring). ``distribution``: "int", "float", "fixed" (the
    0.5, −1, 0.75 pattern), "ones" (``-rand none``: min = max = 1) or "user" (``files``)."""

    distribution: str
    rand_min: int | None = None
    rand_max: int | None = None
    seed: int | None = None
    rand_side: str = "both"
    source: dict = field(default_factory=dict)
    files: dict = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def interval(self) -> str | None:
        if self.distribution == "int":
            return f"[{self.rand_min}, {self.rand_max})"
        if self.distribution == "float":
            return f"[{self.rand_min}, {self.rand_max}]"
        return None

    def values_text(self) -> str:
        """``integers in [-1, 1) (-1, 0)``, ``reals in [-1, 1]``, the fixed pattern, …"""
        d = self.distribution
        if d == "int":
            lo, hi = self.rand_min, self.rand_max
            if lo == hi:
                return f"all {lo} (min = max)"
            few = f" ({', '.join(map(str, range(lo, hi)))})" if 0 < hi - lo <= 6 else ""
            return f"random integers in {self.interval}{few}"
        if d == "float":
            if self.rand_min == self.rand_max:
                return f"all {self.rand_min} × 0.1 (min = max)"
            return f"random reals in {self.interval}"
        if d == "fixed":
            return FIXED_TEXT
        if d == "ones":
            return "min = max = 1 (-rand none): all 1 (int) or 0.1 (float)"
        return "the user's tensors: " + ", ".join(f"{k} {v}" for k, v in self.files.items())

    def text(self) -> str:
        """One line: the values, the generator, seed and each one's source."""
        if self.distribution == "user":
            return self.values_text()
        if self.distribution in ("fixed", "ones"):
            return f"{self.values_text()} ({self.source.get('seed', 'config')})"
        src = self.source
        side = "" if self.rand_side == "both" else f", random side {self.rand_side} (other tensors min = max = 1)"
        return (
            f"{self.values_text()}: {self.distribution} generator ({src.get('distribution')}), range "
            f"{self.interval} ({src.get('range')}), seed {self.seed} ({src.get('seed')}), glibc srand(seed) "
            f"per tensor{side}"
        )

    def to_dict(self) -> dict:
        return {
            "distribution": self.distribution,
            "range": None if self.rand_min is None else [self.rand_min, self.rand_max],
            "interval": self.interval,
            "seed": self.seed,
            "rand_side": self.rand_side,
            "source": dict(self.source),
            "files": dict(self.files),
            "text": self.text(),
            "warnings": list(self.warnings),
        }


def _given(config, name: str) -> str | None:
    for key, value in config.options:
        if key == name:
            return value
    return None


def _suite(config) -> bool:
    return str(getattr(config, "tool", "")).startswith("suite:")


def resolve_inputs(
    config,
    *,
    rand_min: int | None = None,
    rand_max: int | None = None,
    seed: int | None = None,
    rand_type: str | None = None,
    files: dict | None = None,
    range_name: str = "--rand-min/--rand-max",
) -> tuple[dict | None, InputsInfo]:
    """(``harness_inputs`` keyword arguments or None for user files, :class:`InputsInfo`);
    ``range_name`` names the range bounds in errors (the CLI's options, or ``rand_min/rand_max``
    for :func:`validation.run`)."""
    spec = config.random
    overrides = [n for n, v in (("--seed", seed), ("--rand-type", rand_type), ("--rand-min", rand_min),
                                ("--rand-max", rand_max)) if v is not None]  # fmt: skip
    if files:
        warns = ()
        if overrides:
            warns = (
                f"{'/'.join(overrides)} ha{'s' if len(overrides) == 1 else 've'} no effect: the inputs are your files",
            )
        return None, InputsInfo("user", files=dict(files), source={"files": "option --inputs"}, warnings=warns)
    if spec.mode == "miopen_driver":
        raise ConfigError(MIOPEN_DRIVER_HINT)
    kw = config.harness_kwargs()
    warns: list[str] = []
    cfg_seeded = spec.mode == "seed"
    suite = _suite(config)

    # the distribution
    if rand_type is not None:
        rtype, rtype_src = rand_type, "option --rand-type"
    elif _given(config, "rand_type") is not None:
        rtype, rtype_src = spec.rand_type, f"config -rand_type {spec.rand_type}"
    else:
        rtype, rtype_src = spec.rand_type, "default: the config has no -rand_type"
    # the seed
    if seed is not None:
        seed_v, seed_src = int(seed), "option --seed"
    elif cfg_seeded:
        seed_v = spec.seed
        seed_src = f"config -rand {spec.raw}" + (" (the suite test's %random_data)" if suite else "")
    else:
        seed_v, seed_src = None, None
    # the range
    lo_d, hi_d = harness_range(rtype)
    lo = rand_min if rand_min is not None else spec.rand_min
    hi = rand_max if rand_max is not None else spec.rand_max
    opt_range = rand_min is not None or rand_max is not None
    cfg_range = spec.rand_min is not None or spec.rand_max is not None
    range_src = (
        "option --rand-min/--rand-max"
        if opt_range
        else ("config -rand_min/-rand_max" if cfg_range else f"default of the {rtype} generator")
    )
    lo, hi = harness_range(rtype, lo, hi)
    if lo is not None and hi is not None and lo > hi:
        raise ConfigError(f"{range_name}: the range [{lo}, {hi}] is inverted; give the lower bound first")
    if (rand_min is None) != (rand_max is None) and opt_range:
        range_src += f" (the other bound the {rtype} default)"

    if seed_v is None:
        what = "ones" if spec.mode == "none" else "fixed"
        pattern = FIXED_TEXT if what == "fixed" else "min = max = 1 (-rand none)"
        for opt in ("--rand-type",) if rand_type is not None else ():
            warns.append(
                f"{opt} {rand_type} has no effect: the inputs are {pattern} (the config has no -rand seed); add --seed N for random inputs"
            )
        if opt_range:
            warns.append(
                f"--rand-min/--rand-max have no effect: the inputs are {pattern} (the config has no -rand seed); "
                f"add --seed N for random inputs"
            )
        src = "config: no -rand" if spec.mode == "fixed" else "config -rand none"
        return kw, InputsInfo(what, source={"seed": src}, rand_side=spec.rand_side, warnings=tuple(warns))

    if seed is not None and not cfg_seeded:
        before = FIXED_TEXT if spec.mode == "fixed" else "min = max = 1 (-rand none)"
        warns.append(
            f"--seed {seed}: the config has no -rand seed (its inputs are {before}); --seed switches them to the "
            f"harness's random {rtype} generator in [{lo}, {hi}{')' if rtype == 'int' else ']'}"
        )
    if opt_range and rtype == "int" and rand_type is None:
        values = f" ({', '.join(map(str, range(lo, hi)))})" if 0 < hi - lo <= 6 else ""
        warns.append(
            f"--rand-min/--rand-max set the int generator's range ({rtype_src}): the inputs are the integers in "
            f"[{lo}, {hi}){values}; add --rand-type float for reals in [{lo}, {hi}]"
        )
    kw.update(seed=seed_v, rand_min=lo, rand_max=hi, rand_type=rtype)
    info = InputsInfo(
        rtype,
        rand_min=lo,
        rand_max=hi,
        seed=seed_v,
        rand_side=spec.rand_side,
        source={"distribution": rtype_src, "range": range_src, "seed": seed_src},
        warnings=tuple(warns),
    )
    return kw, info


def _fp16(name: str, source: str, a: np.ndarray, fmt: str = "fp16") -> np.ndarray:
    """A user's tensor as values of the config's format ``fmt`` (fp16 or bf16): those values,
    their uint16 patterns, or a wider float array that the format holds exactly."""
    target = np.dtype(ml_dtypes.bfloat16) if fmt == "bf16" else np.dtype(np.float16)
    a = as_typed(a)
    if a.dtype == target:
        return a
    if a.dtype == np.uint16:
        return a.view(target)
    h, i = convert_exactly(a, target)
    if i is not None:
        raise ValueError(
            f"--inputs {name}: {source} element {i} = {a.reshape(-1)[i]!r} is not an {fmt} value; the kernel reads "
            f"{fmt} (save the {fmt} tensor your harness gave the kernel, or its exact fp32 copy)"
        )
    return h


def _check_shape(problem, role: str, name: str, source: str, a: np.ndarray) -> np.ndarray:
    size = problem.tensor_size(role)
    shapes = {(size,), tuple(problem.tensor_shape(role))}
    shapes.add(tuple(problem.letter_sizes(role)[d] for d in problem.layout5(role)))
    if a.shape not in shapes:
        raise ValueError(
            f"--inputs {name}: {source} has shape {a.shape}; the {role} tensor ({problem.layout(role)}) is "
            f"{tuple(problem.tensor_shape(role))} in memory order, or flat ({size},)"
        )
    return a.reshape(problem.tensor_shape(role))


def user_tensors(spec, problem, fmt: str = "fp16") -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The user's tensors for ``problem``: ({role: array of the format ``fmt``, fp16 or bf16, in the
    tensor's shape}, {name: file}).

    ``spec``: a folder holding ``x.npy``, ``w.npy``, ``dy.npy`` (or ``input.npy``, ``filter.npy``,
    ``output.npy``) as the direction needs; a comma-separated list of files, either ``NAME=FILE``
    (NAME x, w, dy) or in the order x, w, dy (just the two the direction reads, or all three);
    or a dict ``{name or role: array or file}`` (Python)."""
    needs = _NEEDS[problem.direction]
    by_name = {v: k for k, v in ROLE_NAMES.items()}
    given: dict[str, object] = {}
    if isinstance(spec, dict):
        for k, v in spec.items():
            role = by_name.get(k, k)
            if role not in ROLE_NAMES:
                raise ValueError(f"inputs: {k!r} is not one of x, w, dy (input, filter, output)")
            given[role] = v
    elif os.path.isdir(str(spec)):
        for role in needs:
            for stem in (ROLE_NAMES[role], role):
                for ext in (".npy", ".npz"):
                    p = os.path.join(str(spec), stem + ext)
                    if os.path.exists(p) and role not in given:
                        given[role] = p
        missing = [ROLE_NAMES[r] for r in needs if r not in given]
        if missing:
            raise ValueError(
                f"--inputs {spec}: no {', '.join(m + '.npy' for m in missing)} in the folder; a {problem.direction} "
                f"run reads {', '.join(ROLE_NAMES[r] + '.npy' for r in needs)}"
            )
    else:
        items = [s.strip() for s in str(spec).split(",") if s.strip()]
        named = [s for s in items if "=" in s.split(":")[0] and s.split("=", 1)[0] in by_name]
        if named and len(named) != len(items):
            raise ValueError("--inputs: give every file as NAME=FILE (x, w, dy) or none")
        if named:
            for s in items:
                k, _, v = s.partition("=")
                given[by_name[k]] = v
        elif len(items) == 3:
            given = dict(zip(("input", "filter", "output"), items))
        elif len(items) == len(needs):
            given = dict(zip(needs, items))
        else:
            raise ValueError(
                f"--inputs: {len(items)} files; a {problem.direction} run reads "
                f"{' and '.join(ROLE_NAMES[r] for r in needs)} (give them in the order x, w, dy, or as NAME=FILE)"
            )
    missing = [ROLE_NAMES[r] for r in needs if given.get(r) is None]
    if missing:
        raise ValueError(
            f"--inputs: missing {', '.join(missing)}; a {problem.direction} run reads "
            f"{', '.join(ROLE_NAMES[r] for r in needs)}"
        )
    out: dict[str, np.ndarray] = {}
    files: dict[str, str] = {}
    for role in needs:
        value = given[role]
        name = ROLE_NAMES[role]
        if isinstance(value, (str, os.PathLike)):
            loaded = load_array(str(value), f"--inputs {name}", bf16_void=fmt == "bf16")
            arr, source = loaded.array, loaded.source
        else:
            arr, source = np.asarray(value), "array"
        files[name] = source
        out[role] = _check_shape(problem, role, name, source, _fp16(name, source, arr, fmt))
    return out, files


def save_names(problem) -> list[str]:
    """The files :func:`save_run` writes for ``problem``: the two outputs, its input tensors and
    ``run.json``."""
    return ["kernel.npy", "validation.npy", *(f"{ROLE_NAMES[r]}.npy" for r in _NEEDS[problem.direction]), "run.json"]


def check_save_dir(directory, option: str = "--save", names=()) -> Path:
    """The folder ``save_run`` will write, checked before any work: a non-empty path that is a
    folder (or can be made one) this process can write, and where it exists, each of ``names``
    a name :func:`validation.files.check_output_file` accepts (no folder or FIFO there);
    ValueError naming ``option`` otherwise."""
    if directory is None or not str(directory).strip():
        raise ValueError(f"{option}: give a folder to write into (got an empty path)")
    d = Path(directory)
    for parent in [d, *d.parents]:
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                where = "is" if parent == d else f"lies under {str(parent)!r}, which is"
                raise ValueError(f"{option}: {str(d)!r} {where} not a folder")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise ValueError(f"{option}: {str(parent)!r} is not writable")
            break
    if d.is_dir():
        for name in names:
            check_output_file(d / name, option)
    return d


def save_run(result, directory, *, command: str | None = None) -> dict[str, str]:
    """Write ``result``'s outputs and inputs under ``directory`` (created): ``kernel.npy`` (the
    kernel's output in the result tensor's shape and the kernel's format, fp16), ``validation.npy``
    (the validation function's fp32 output, same shape), one ``.npy`` per input tensor (``x``,
    ``w``, ``dy``, in their tensors' shapes) and ``run.json`` (what produced them). Every file is
    written (:func:`validation.files.write_files_atomically`) before any is renamed into place: a
    refusal or a failed write leaves the folder as it was, never half of one run and half of
    another. Returns ``{file: what}``."""
    p = result.problem
    d = check_save_dir(directory, names=save_names(p))
    d.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
    writers: dict = {}

    def save(name, array):
        writers[d / name] = lambda fh: np.save(fh, array)

    save("kernel.npy", np.asarray(result.kernel_output).reshape(result.shape))
    written["kernel.npy"] = f"{result.kernel.key} output, fp16, {p.result_role} tensor {p.layout(p.result_role)}"
    save("validation.npy", np.asarray(result.validation_output).reshape(result.shape))
    written["validation.npy"] = f"{result.validator.key} output, fp32, {p.result_role} tensor {p.layout(p.result_role)}"
    for role, arr in result.inputs.items():
        name = ROLE_NAMES[role]
        save(f"{name}.npy", np.asarray(arr).reshape(p.tensor_shape(role)))
        written[f"{name}.npy"] = f"{role} tensor {p.layout(role)}, {np.asarray(arr).dtype}"
    doc = {
        "config": result.config.label,
        "config_source": result.config.source,
        "direction": p.direction,
        "kernel": result.kernel.key,
        "validator": result.validator.key,
        "hw": result.kernel.hw,
        "shapes": {
            ("y" if r == "output" and p.direction == "fwd" else ROLE_NAMES[r]): {
                "layout": p.layout(r),
                "shape": list(p.tensor_shape(r)),
            }
            for r in ("input", "filter", "output")
        },
        "result": p.result_role,
        "inputs": result.inputs_info.to_dict() if result.inputs_info is not None else None,
        "files": written,
        "command": command,
        "produced_by": "fp16emu run",
    }
    text = json.dumps(doc, indent=1).encode()  # its "files": the data files, as before
    writers[d / "run.json"] = lambda fh: fh.write(text)
    written["run.json"] = "what produced these files"
    write_files_atomically(writers, "--save")
    return written
