"""Identification with MMA-Sim as the device, for every architecture it models.

MMA-Sim (Xie et al., arXiv 2511.10909; PyPI ``mmasim`` 2.1.1) is an independent bit-accurate
model of the matrix units. Here it plays the unknown GPU: its instruction classes compute the
outputs of a probe set (K = the instruction's K), fp16emu identifies the arithmetic from them
with the name hidden, and the answer must be the named unit MMA-Sim's instruction is modelled
on. Also adaptively: fp16emu asks MMA-Sim one probe at a time.

Run with ``make test-oracle`` (needs torch and mmasim).
"""

from __future__ import annotations

import numpy as np
import pytest

import models
from emu.units import Format
from models import space
from validation.identify import probes as probe
from validation.identify import search as ident

pytestmark = pytest.mark.oracle

# unit, output, ISA, arch, instruction, K (as tests/oracle/test_mmasim.py)
TARGETS = [
    ("mi100", "fp32", "MFMA", "CDNA1", "f32_32x32x8f16", 8),
    ("mi200", "fp32", "MFMA", "CDNA2", "f32_32x32x8f16", 8),
    ("mi300", "fp32", "MFMA", "CDNA3", "f32_32x32x8_f16", 8),
    ("v100", "fp32", "MMA", "Volta", "m8n8k4.f32.f16.f16.f32", 4),
    ("v100", "fp16", "MMA", "Volta", "m8n8k4.f16.f16.f16.f16", 4),
    ("t4", "fp32", "MMA", "Turing", "m16n8k8.f32.f16.f16.f32", 8),
    ("t4", "fp16", "MMA", "Turing", "m16n8k8.f16.f16.f16.f16", 8),
    ("a100", "fp32", "MMA", "Ampere", "m16n8k16.f32.f16.f16.f32", 16),
    ("a100", "fp16", "MMA", "Ampere", "m16n8k16.f16.f16.f16.f16", 16),
    ("ada", "fp32", "MMA", "Ada Lovelace", "m16n8k16.f32.f16.f16.f32", 16),
    ("ada", "fp16", "MMA", "Ada Lovelace", "m16n8k16.f16.f16.f16.f16", 16),
    ("h100", "fp32", "MMA", "Hopper", "m16n8k16.f32.f16.f16.f32", 16),
    ("h100", "fp16", "MMA", "Hopper", "m16n8k16.f16.f16.f16.f16", 16),
    ("b200", "fp32", "MMA", "Blackwell", "m16n8k16.f32.f16.f16.f32", 16),
    ("b200", "fp16", "MMA", "Blackwell", "m16n8k16.f16.f16.f16.f16", 16),
    ("fma32", "fp32", "FMA", "", "", 8),
]
IDS = [f"{t[0]}-{t[1]}" for t in TARGETS]
ROWS = 4096


def _device(mm, isa, arch, instruction, output):
    """``device(a, b, c) -> d bits`` through the MMA-Sim instruction."""
    import torch

    if isa == "MFMA":
        op = mm.amd.MFMA(arch, instruction)
    elif isa == "MMA":
        op = mm.nv_ptx.MMA(arch, instruction)
    else:
        op = mm.arithmetic.fma.MMA_FMA()
    fp16 = output == "fp16"

    def device(a, b, c):
        ta = torch.from_numpy(np.ascontiguousarray(a).view(np.float16))
        tb = torch.from_numpy(np.ascontiguousarray(b).view(np.float16))
        tc = torch.from_numpy(np.ascontiguousarray(c).view(np.float16 if fp16 else np.float32))
        if isa == "FMA":
            ta, tb = ta.float(), tb.float()  # fp16·fp16 is exact in fp32: one rounding per FMA
        d = op.dpa(ta, tb, tc).numpy()
        return d.astype(np.float16 if fp16 else np.float32).view(np.uint16 if fp16 else np.uint32)

    return device


def _named(unit, output):
    return space.Point(space.canonical(models.unit(unit, output=output).params))


@pytest.mark.parametrize("unit,output,isa,arch,instruction,k", TARGETS, ids=IDS)
def test_mmasim_device_is_identified(mmasim, unit, output, isa, arch, instruction, k):
    p = probe.probe_set(ROWS, k, seed=11, accumulator=output)
    device = _device(mmasim, isa, arch, instruction, output)
    d = np.concatenate([device(p.a[s : s + 1024], p.b[s : s + 1024], p.c[s : s + 1024]) for s in range(0, ROWS, 1024)])
    result = ident.identify(ident.Rows(p.a, p.b, p.c, d), next_count=0)
    assert result.consistent == [_named(unit, output)], [space.describe(q) for q in result.consistent]


@pytest.mark.parametrize("unit,output,isa,arch,instruction,k", TARGETS, ids=IDS)
def test_mmasim_device_adaptively(mmasim, unit, output, isa, arch, instruction, k):
    fmt = Format.FP16 if output == "fp16" else Format.FP32
    pts = space.points(fmt, k)
    live, asked, _ = ident.adaptive_identify(
        _device(mmasim, isa, arch, instruction, output), pts, k=k, output_format=fmt, pool_rows=2048
    )
    assert live == [_named(unit, output)], [space.describe(q) for q in live]
    print(f"\n{unit}/{output} (K = {k}, {len(pts)} points): {len(asked)} probes")
