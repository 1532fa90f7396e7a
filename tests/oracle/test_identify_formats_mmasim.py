"""Identification of MMA-Sim in the operand formats: MMA-Sim (PyPI ``mmasim`` 2.1.1, an
independent bit-accurate model checked against an H200 for bf16, tf32 and fp8) computes the
outputs of a probe set of the format at the instruction's K; fp16emu searches that format's
space with the name hidden, and the answer must hold the unit MMA-Sim's instruction models.

Run with ``make test-oracle`` (needs torch and mmasim).
"""

from __future__ import annotations

import numpy as np
import pytest

import models
from models import space
from validation.identify import probes as probe
from validation.identify import search as ident

pytestmark = pytest.mark.oracle

ROWS = 2048
# unit, format, ISA, arch, instruction, K
TARGETS = [
    ("h100", "e4m3", "WGMMA", "Hopper", "m64n64k32.f32.e4m3.e4m3", 32),
    ("a100", "tf32", "MMA", "Ampere", "m16n8k8.f32.tf32.tf32.f32", 8),
    ("mi300", "bf16", "MFMA", "CDNA3", "f32_32x32x8_bf16", 8),
    ("mi300", "e4m3fnuz", "MFMA", "CDNA3", "f32_32x32x16_fp8_fp8", 16),
]
IDS = [f"{t[0]}-{t[1]}" for t in TARGETS]


def _device(mm, fmt, isa, arch, instruction):
    import torch

    op = {"WGMMA": mm.nv_ptx.WGMMA, "MMA": mm.nv_ptx.MMA, "MFMA": mm.amd.MFMA}[isa](arch, instruction)
    tt = {"bf16": torch.bfloat16, "tf32": torch.float32, "e4m3": torch.float8_e4m3fn}
    tt["e4m3fnuz"] = torch.float8_e4m3fnuz

    def operand(x):
        x = np.ascontiguousarray(x)
        if fmt == "bf16":
            return torch.from_numpy(x.view(np.int16)).view(tt[fmt])
        if fmt == "tf32":
            return torch.from_numpy(x.view(np.float32))
        return torch.from_numpy(x).view(tt[fmt])

    def device(a, b, c):
        d = op.dpa(operand(a), operand(b), torch.from_numpy(np.ascontiguousarray(c).view(np.float32))).numpy()
        return d.astype(np.float32).view(np.uint32)

    return device


@pytest.mark.parametrize("unit,fmt,isa,arch,instruction,k", TARGETS, ids=IDS)
def test_mmasim_device_is_identified_in_its_format(mmasim, unit, fmt, isa, arch, instruction, k):
    p = probe.probe_set(ROWS, k, seed=13, input=fmt)
    if models.unit(unit, input=fmt).interleaved_sums == 2:
        # MMA-Sim's gtr_fdpa drops a non-finite accumulator beside products past 2^26 (a NaN or
        # inf input becomes one for the next group); fp16emu propagates it (docs/formats.md)
        keep = np.flatnonzero(p.category != "special")
        p = p.take(keep)
    device = _device(mmasim, fmt, isa, arch, instruction)
    d = np.concatenate([device(p.a[s : s + 512], p.b[s : s + 512], p.c[s : s + 512]) for s in range(0, len(p), 512)])
    result = ident.identify(ident.Rows(p.a, p.b, p.c, d, input_format=fmt), next_count=0)
    named = space.Point(space.canonical(models.unit(unit, input=fmt).params))
    assert named in result.consistent, [space.describe(q) for q in result.consistent] or result.format_text()
    assert len(result.consistent) <= 4, [space.describe(q) for q in result.consistent]
