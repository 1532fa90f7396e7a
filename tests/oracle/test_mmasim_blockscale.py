"""Block-scaled instructions (issue 39.2 / 39.5) against MMA-Sim 2.1.1, bit for bit.

Every block-scaled instruction MMA-Sim models: ``tcgen05.mma … .block_scale`` on Blackwell
(``mmasim.nv_ptx.TCGen05MMABlockScale``, unit ``b200``) and sm_120 ``mma.sync … .block_scale``
on RTX Blackwell (``mmasim.nv_ptx.MMABlockScale``, unit ``rtx-blackwell``): kind::mxf8f6f4 for
every (A, B) pair of e4m3, e5m2, e3m2, e2m3, e2m1 (UE8M0 per 32; ST-FDPA), kind::mxf4 (UE8M0
per 32) and kind::mxf4nvf4 (UE8M0 per 32 and 16, UE4M3 per 16; GST-FDPA). The oracle's ``dpa``
runs at the instruction's K (32 or 64), chained over K = 128 with c carried; ``emu.dot_add``
takes the whole row. Inputs: the families of tests/scaled_inputs.py (uniform, cancelling pairs,
scales 2^±60, the smallest magnitudes around the zero exponent, NaN and zero scales, special
operands and accumulators). NaNs compare as a class (MMA-Sim writes 0x7FFFFFFF).

MMA-Sim's operand layout: fp8 as torch float8; fp6 / fp4 one per uint8 for kind::mxf8f6f4 (fp6
in bits 5:0, fp4 in bits 5:2: helper.decode_uint8_to_fp6_fp4); fp4 two per uint8 for kind::mxf4
and kind::mxf4nvf4, element 2i in the high nibble (helper.unpack_uint8_to_fp4). Run with
``make test-oracle``; ``FP16EMU_ORACLE_SCALE`` scales the row counts.
"""

from __future__ import annotations

import os
import zlib

import numpy as np
import pytest

import emu
import models
from tests.scaled_inputs import FAMILIES, family_rows

pytestmark = pytest.mark.oracle

SCALE = float(os.environ.get("FP16EMU_ORACLE_SCALE", "1"))
ROWS = max(8, int(400 * SCALE))
K = 128
FP8F6F4 = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")
CONFIGS = [("mxf8f6f4", fa, fb, "ue8m0", 32) for fa in FP8F6F4 for fb in FP8F6F4] + [
    ("mxf4", "e2m1", "e2m1", "ue8m0", 32),
    ("mxf4nvf4", "e2m1", "e2m1", "ue8m0", 32),
    ("mxf4nvf4", "e2m1", "e2m1", "ue8m0", 16),
    ("mxf4nvf4", "e2m1", "e2m1", "ue4m3", 16),
]
UNITS = ("b200", "rtx-blackwell")


def _instruction(mm, name, kind, fa, fb, scale, block):
    sim = mm.nv_ptx.sim
    k = 32 if kind == "mxf8f6f4" else 64
    if name == "b200":
        return sim.TCGen05MMABlockScale("Blackwell", f"m128n8k{k}.kind::{kind}.block{block}.f32.{fa}.{fb}.{scale}"), k
    return sim.MMABlockScale("RTX Blackwell", f"m16n8k{k}.kind::{kind}.block{block}.f32.{fa}.{fb}.f32.{scale}"), k


def _operand(torch, bits: np.ndarray, fmt: str, packed: bool):
    t = torch.from_numpy(np.ascontiguousarray(bits, np.uint8))
    if fmt == "e4m3":
        return t.view(torch.float8_e4m3fn)
    if fmt == "e5m2":
        return t.view(torch.float8_e5m2)
    if packed:
        return (t[..., 0::2] << 4) | t[..., 1::2]
    return t << 2 if fmt == "e2m1" else t


def _oracle(mm, name, kind, fa, fb, scale, block, a, b, sa, sb, c):
    import torch

    op, k = _instruction(mm, name, kind, fa, fb, scale, block)
    sdt = torch.float8_e8m0fnu if scale == "ue8m0" else torch.float8_e4m3fn
    acc = torch.from_numpy(c.copy())
    n = k // block
    for i in range(0, a.shape[-1], k):
        j = i // block
        acc = op.dpa(
            _operand(torch, a[:, i : i + k], fa, kind != "mxf8f6f4"),
            _operand(torch, b[:, i : i + k], fb, kind != "mxf8f6f4"),
            acc,
            torch.from_numpy(np.ascontiguousarray(sa[:, j : j + n])).view(sdt),
            torch.from_numpy(np.ascontiguousarray(sb[:, j : j + n])).view(sdt),
        )
    return acc.numpy()


def _bits(x):
    x = np.asarray(x, np.float32)
    return np.where(np.isnan(x), np.uint32(0x7FC00000), x.view(np.uint32))


@pytest.mark.parametrize("name", UNITS)
@pytest.mark.parametrize("kind, fa, fb, scale, block", CONFIGS, ids=lambda v: str(v))
def test_block_scaled_vs_mmasim(mmasim, name, kind, fa, fb, scale, block):
    u = models.unit(name, input=(fa, fb), scale=scale, block=block, kind=kind)
    failures = []
    for family in FAMILIES:
        seed = zlib.crc32(f"{name}/{kind}/{fa}/{fb}/{scale}/{block}/{family}".encode())
        a, b, sa, sb, c = family_rows(family, fa, fb, scale, block, ROWS, K, seed)
        got = _bits(emu.dot_add(a, b, c, u, scale_a=sa, scale_b=sb))
        want = _bits(_oracle(mmasim, name, kind, fa, fb, scale, block, a, b, sa, sb, c))
        bad = np.flatnonzero(got != want)
        if bad.size:
            failures.append(
                f"{family}: {bad.size}/{ROWS} rows differ, first {bad[0]}: {got[bad[0]]:#x} vs {want[bad[0]]:#x}"
            )
    assert not failures, "; ".join(failures)
