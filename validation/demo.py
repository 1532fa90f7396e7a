"""``make demo``: the job fp16emu exists for, on built-in data, in well under two minutes.

1. Reproduce one real MI200 measurement of the 2022 AMD fp16 study exactly: the rocMLIR xdlops
   kernel of test ``conv2d_host_validation_f16_fwd_CHECK_KYXC_NHWC_NHWK5_f16`` against the CPU
   validation (``-pv``), inputs ``-rand 1 -rand_type float`` in [-1, 1), run set ``fair_1``. The
   measured line is a fact shipped with the package (:data:`MEASURED`), copied from the study's
   raw results (github.com/zhanglx13/llvm-project-mlir-dev-utils, ``fp16_experiment/raw_results``
   @3b042e7, ``verify_results_fair_1_MI200/verify_f16_xdlops_pv_rand0.txt``); the emulated line is
   computed here and printed beside it, field by field.
2. Explain where that error comes from (:func:`validation.explain.explain`: Shapley shares of the
   five error sources, the worst elements' causes).
3. Bug or rounding: the emulated kernel's own output fed back as the "GPU output" is identical;
   the same output with one injected fault (one element's low mantissa bit flipped) is answered
   "differs", the suspect located (:meth:`validation.run.RunResult.against`).

The probe-vector table of every unit is ``fp16emu units`` (:mod:`validation.identify.unit_table`).
"""

from __future__ import annotations

import time

import numpy as np

from .explain import explain
from .run import run
from .verify.presets import format_study_line, parse_study_line
from .verify.study2022 import study_line_of

__all__ = ["MEASURED", "FAULT_INDEX", "reproduce", "run_options", "main"]

#: One measured line of the 2022 study, shipped as a fact (see the module docstring for its source).
MEASURED = {
    "source": "github.com/zhanglx13/llvm-project-mlir-dev-utils fp16_experiment/raw_results @3b042e7, "
    "verify_results_fair_1_MI200/verify_f16_xdlops_pv_rand0.txt, line 76",
    "run_set": "fair_1",
    "gpu": "mi200",
    "kernel": "xdlops",
    "validator": "cpu",  # -pv: the CPU validation function of Aug 2022
    "rand_type": "float",
    "rand_min": -1,
    "rand_max": 1,
    "seed": 1,
    "test": "conv2d_host_validation_f16_fwd_CHECK_KYXC_NHWC_NHWK5_f16",
    "line": "102400     (102282 100 18 0) 9.0 (0.0060768127 0.0060424805)  0.003906  0.000000  7.2e-03  "
    "5.6e-03  1.2e-06  2.3e-06 0 1 1 0 1 0 1 fwd conv2d_host_validation_f16_fwd_CHECK_KYXC_NHWC_NHWK5_f16 "
    "(76 of 107)",
}
#: The flat index of the element the demo corrupts (any index would do).
FAULT_INDEX = 4242


def reproduce(measured: dict = MEASURED):
    """(run result, measured StudyLine, emulated StudyLine, emulated line's text) for ``measured``."""
    m = parse_study_line(measured["line"])
    r = run(measured["test"], **run_options(measured), progress=False)
    line = study_line_of(r.validation_output, r.kernel_output, measured["run_set"])
    return r, m, line, format_study_line(line, tail=m.tail)


def run_options(measured: dict) -> dict:
    """The hardware, kernel, validator and inputs of a measured line, as ``run``/``explain`` take them."""
    keys = ("kernel", "validator", "rand_type", "rand_min", "rand_max", "seed")
    return {"hw": measured["gpu"]} | {k: measured[k] for k in keys}


def main() -> int:
    t0 = time.perf_counter()
    M = MEASURED
    print("fp16emu demo: the job it exists for, on one real measurement of the 2022 AMD fp16 study\n")
    print(f"1. Reproduce: {M['test']}")
    print(
        f"   {M['gpu'].upper()}, rocMLIR {M['kernel']} kernel vs the CPU validation (-pv), run set {M['run_set']}, "
        f"inputs seed {M['seed']}, {M['rand_type']} generator in [{M['rand_min']}, {M['rand_max']})"
    )
    r, measured, emulated, text = reproduce(M)
    print(f"   measured ({M['source']}):")
    print(f"     {M['line']}")
    print("   emulated (fp16emu, this machine):")
    print(f"     {text}")
    fm, fe = measured.fields(), emulated.fields()
    differ = [k for k in fm if fm[k] != fe[k]]
    print(
        f"   {len(fm) - len(differ)} of {len(fm)} printed fields equal"
        + (": the measurement reproduced exactly" if not differ else f"; differ: {', '.join(differ)}")
    )

    print("\n2. Explain: where the error comes from (exact fp64 convolution → emulated kernel, Shapley shares)")
    ex = explain(M["test"], **run_options(M), top=5, progress=False)
    print("   " + ex.format_text().replace("\n", "\n   "))

    print("\n3. Bug or rounding: the emulated output fed back as the 'GPU output'")
    gpu = r.kernel_output.copy()
    print("   a) unchanged:")
    print("   " + r.against(gpu).format_text().replace("\n", "\n   "))
    bits = gpu.view(np.uint16)
    bits[FAULT_INDEX] ^= 1  # the last mantissa bit of one element: an injected fault
    print(f"   b) with one injected fault (flat element {FAULT_INDEX}, last mantissa bit flipped):")
    print("   " + r.against(gpu).format_text().replace("\n", "\n   "))
    print(f"\n({time.perf_counter() - t0:.1f} s; the probe-vector table of every unit: fp16emu units)")
    return 0 if not differ else 1


if __name__ == "__main__":
    raise SystemExit(main())
