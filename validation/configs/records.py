"""The records a config text is read into: :class:`Config` (an ``emu.conv.ConvProblem`` plus the
kernel, validation and random-data flags) and :class:`RandomSpec`, and :class:`ConfigError` /
:class:`ConfigWarning`, which every reader raises or warns with."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from emu.conv import ConvProblem, sub_gemms
from models.harness import harness_range

from .gemm import GemmShape


class ConfigError(ValueError):
    """A config that cannot be read: the message is one line naming the field and what is allowed."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


class ConfigWarning(UserWarning):
    """A config that reads but would not behave as intended on the real tool (e.g. ``-t f1``)."""


DIRECTIONS = ("fwd", "bwd_data", "bwd_weight")


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
            raise ConfigError(
                "random data: MIOpenDriver's own generator is not reproduced; only rocMLIR harness data is"
            )
        seed: int | str | None = {"fixed": None, "none": "none"}.get(self.mode, self.seed)
        return {
            "seed": seed,
            "rand_min": self.rand_min,
            "rand_max": self.rand_max,
            "rand_type": self.rand_type,
            "rand_side": self.rand_side,
        }


@dataclass(frozen=True)
class Config:
    """One convolution test (or rocmlir-gen GEMM, :attr:`gemm`) as a config text describes it."""

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
    #: for rocmlir-gen ``-operation gemm``: the GEMM, which :attr:`problem` (a 1×1 forward
    #: convolution, :mod:`.gemm`) computes; None for a convolution
    gemm: GemmShape | None = None

    @property
    def direction(self) -> str:
        return self.problem.direction

    @property
    def label(self) -> str:
        """How outputs name the config: its suite test name, else its text on one line, whole."""
        return self.name or " ".join(self.source.split())

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


def with_name(config: Config, name: str, tool: str) -> Config:
    """``config`` relabelled (used by the suites)."""
    return replace(config, name=name, tool=tool)
