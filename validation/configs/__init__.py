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
    rocmlir-gen's ``--operation gemm`` (``-g -m -k -n -transA -transB -transC``) reads as the 1×1
    forward convolution that computes the GEMM, with :attr:`Config.gemm` set (:mod:`.gemm`);
(c) an MIOpenDriver command: ``MIOpenDriver conv|convfp16|convbfp16|convint8 -n 128 -c 64 ...``;
(d) the name of a test of a shipped suite (:mod:`validation.suites`).

The generator options follow LLVM's ``cl`` rules as miopen-gen used them (mid/late 2022; rocMLIR
@3df931f1, github.com/ROCm/rocMLIR, ``mlir/tools/rock-gen/rock-gen.cpp``): ``-name=value``,
``--name=value``, ``-name value`` and ``--name value`` are all accepted; boolean options take
``=true|false|1|0`` or nothing; each option may occur once; 4-letter layouts get a ``g`` (``kcyx``
→ ``gkcyx``, ``nhwc`` → ``nhwgc``, others ``g`` + layout); ``-padding_h`` sets both sides unless
``-padding_h_l``/``_r`` are given; too-short padded inputs get extra right padding as miopen-gen
adds it; ``-p`` overwrites every size with the defaults (without ``-x2``: N 128, C 8, K 128, 32×32
input, 3×3 filter; with ``-x2``: N 128, C 1024, K 1024, 14×14, 1×1), padding 0, stride and
dilation 1.

Every problem raises :class:`ConfigError` (a ``ValueError``) with a one-line message naming the
field and what is allowed.

The stages, one module each: :mod:`.records` (:class:`Config`, :class:`RandomSpec`, the errors),
:mod:`.tokens` (words, C-style numbers, suggestions), :mod:`.problem` (sizes and layouts → a checked
problem), :mod:`.generator` (generator arguments), :mod:`.driver` (MIOpenDriver commands) and
:mod:`.lit` (RUN lines, substitutions), :mod:`.suites` (the shipped suites' tables, a test's config) and
:mod:`.parse` (:func:`parse_config`'s choice of reader); :mod:`.limits`
checks what a run may ask for before it starts (fp16 or bf16 data, the work estimated from the shapes).
"""

from __future__ import annotations

from .driver import DRIVER_COMMANDS
from .gemm import GemmShape
from .generator import GENERATOR_TOOLS
from .limits import (
    MODELLED_DTYPES,
    Work,
    check_dtype,
    check_rand_bound,
    check_seed,
    check_work,
    data_format,
    estimate_work,
)
from .lit import DEFAULT_SUBSTITUTIONS, parse_lit_file
from .parse import parse_config
from .records import (
    Config,
    ConfigError,
    ConfigWarning,
    RandomSpec,
    n_out_elements,
    with_name,
)

__all__ = [
    "DEFAULT_SUBSTITUTIONS",
    "DRIVER_COMMANDS",
    "GemmShape",
    "MODELLED_DTYPES",
    "GENERATOR_TOOLS",
    "Config",
    "ConfigError",
    "ConfigWarning",
    "RandomSpec",
    "Work",
    "check_dtype",
    "check_rand_bound",
    "check_seed",
    "check_work",
    "data_format",
    "estimate_work",
    "n_out_elements",
    "parse_config",
    "parse_lit_file",
    "with_name",
]
