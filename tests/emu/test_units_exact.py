"""``emu.dot_add`` against the exact oracle (tests/exact_reference.py), bit for bit.

Every named unit (and the fp16-output variant of each NVIDIA unit, whose c is fp16) gets
≥ 10,000 cases from every adversarial family (tests/adversarial.py) at three lengths K: the
group size, twice it, and a length that is not a multiple of it. Variants of the units
(``dataclasses.replace``: other group sizes, fraction bits ±1, RNE for NVIDIA, flush flags, directed
output rounding) get a smaller sample. Results compare as bit patterns; any NaN equals any NaN.

The oracle is pure Python and slow; its results are computed in a small process pool when the
machine has at least two CPUs (``FP16EMU_ORACLE_WORKERS`` overrides the worker count; 1 = no pool).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import zlib
from collections import Counter

import numpy as np
import pytest
from adversarial import FAMILIES, all_families, concat  # noqa: E402
from exact_reference import reference_batch  # noqa: E402

import emu  # noqa: E402
import models  # noqa: E402
from emu.units import Family, Rounding  # noqa: E402

CASES_PER_UNIT = 10_000
VARIANT_CASES = 1_000
NVIDIA = tuple(n for n in models.UNIT_NAMES if models.unit(n).family == Family.TRUNCATED_FUSED)
UNITS = [(n, "fp32") for n in models.UNIT_NAMES] + [(n, "fp16") for n in NVIDIA]


# ----------------------------------------------------------------------------- oracle, in a pool


def _workers() -> int:
    env = os.environ.get("FP16EMU_ORACLE_WORKERS")
    if env:
        return max(1, int(env))
    return 2 if (os.cpu_count() or 1) >= 2 else 1


@pytest.fixture(scope="module")
def oracle():
    """oracle(a_bits, b_bits, c_bits, params) → np.uint32 array of the reference result bits."""
    n_workers = _workers()
    pool = None
    if n_workers > 1:
        # forkserver: workers fork from a fresh server process, not from this (possibly
        # numba-threaded) one; the server gets this process's sys.path (tests/ included)
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["exact_reference"])
        pool = ctx.Pool(n_workers)

    def run(a, b, c, params):
        al, bl, cl = a.tolist(), b.tolist(), [int(x) for x in c.tolist()]
        if pool is None or len(cl) < 200:
            res = reference_batch((al, bl, cl, params))
        else:
            step = -(-len(cl) // (4 * n_workers))
            chunks = [(al[i : i + step], bl[i : i + step], cl[i : i + step], params) for i in range(0, len(cl), step)]
            res = [r for part in pool.map(reference_batch, chunks) for r in part]
        return np.array(res, dtype=np.uint32)

    yield run
    if pool is not None:
        pool.close()
        pool.join()


# ----------------------------------------------------------------------------- comparison


def _is_nan(bits: np.ndarray, fp16: bool) -> np.ndarray:
    if fp16:
        return ((bits & 0x7C00) == 0x7C00) & ((bits & 0x3FF) != 0)
    return ((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x7FFFFF) != 0)


def _lengths(group_size: int) -> tuple[int, int, int]:
    """The group size, twice it, and a length that is not a multiple of it."""
    if group_size == 1:
        return (4, 8, 13)
    return (group_size, 2 * group_size, group_size + group_size // 2 + 1)


def _check(unit, label: str, fp16: bool, n_total: int, seed_text: str, oracle):
    params = unit.params if hasattr(unit, "params") else unit
    rng = np.random.default_rng(zlib.crc32(seed_text.encode()))
    Ks = _lengths(params.group_size)
    n_per = -(-n_total // (len(Ks) * len(FAMILIES)))
    c_format = "fp16" if fp16 else "fp32"
    ubits, fdtype = (np.uint16, np.float16) if fp16 else (np.uint32, np.float32)
    failures, total, per_family = [], 0, Counter()
    for K in Ks:
        a, b, c, fam = concat(all_families(rng, n_per, K, c_format))
        got = np.asarray(emu.dot_add(a, b, c.view(fdtype), unit))
        assert got.dtype == fdtype and got.shape == c.shape, f"{label}: dot_add returned {got.dtype} {got.shape}"
        got_bits = got.view(ubits).astype(np.uint32)
        want = oracle(a, b, c, params)
        ok = (got_bits == want) | (_is_nan(got_bits, fp16) & _is_nan(want, fp16))
        total += len(c)
        for i in np.flatnonzero(~ok):
            per_family[fam[i]] += 1
            if len(failures) < 8:
                w = 4 if fp16 else 8
                failures.append(
                    f"  [{fam[i]}, K={K}] a={[f'{x:04x}' for x in a[i]]} b={[f'{x:04x}' for x in b[i]]} "
                    f"c=0x{int(c[i]):0{w}x} → dot_add 0x{int(got_bits[i]):0{w}x}, oracle 0x{int(want[i]):0{w}x}"
                )
    assert total >= n_total
    if per_family:
        n_bad = sum(per_family.values())
        pytest.fail(
            f"{label}: {n_bad}/{total} results differ from the exact oracle "
            f"(per family: {dict(per_family)}); params={params}\n" + "\n".join(failures),
            pytrace=False,
        )


@pytest.mark.parametrize("name,output", UNITS, ids=[f"{n}-{o}" for n, o in UNITS])
def test_named_unit_matches_oracle(name, output, oracle):
    unit = models.unit(name, output=output)
    _check(unit, f"{name} ({output} out)", output == "fp16", CASES_PER_UNIT, f"{name}/{output}", oracle)


def _variants():
    r = dataclasses.replace
    u = models.unit
    v = {
        "mi100 group 2": r(u("mi100"), group_size=2),
        "mi100 group 8": r(u("mi100"), group_size=8),
        "mi100 all flushes": r(
            u("mi100"), flush_inputs=True, flush_c=True, flush_products=True, flush_partials=True, flush_output=True
        ),
        "mi100 flush inputs": r(u("mi100"), flush_inputs=True),
        "mi100 RZ": r(u("mi100"), output_rounding=Rounding.RZ),
        "mi100 RD": r(u("mi100"), output_rounding=Rounding.RD),
        "mi200 group 2": r(u("mi200"), group_size=2),
        "mi200 group 8": r(u("mi200"), group_size=8),
        "mi200 no flush": r(
            u("mi200"),
            flush_inputs=False,
            flush_c=False,
            flush_products=False,
            flush_partials=False,
            flush_output=False,
        ),
        "mi300 group 4": r(u("mi300"), group_size=4),
        "mi300 F 23": r(u("mi300"), fraction_bits=23),
        "mi300 F 25, F2 30": r(u("mi300"), fraction_bits=25, sum_fraction_bits=30),
        "mi300 RD alignment": r(u("mi300"), alignment_rounding=Rounding.RD),
        "mi300 RZ c alignment": r(u("mi300"), c_alignment_rounding=Rounding.RZ),
        "fp64 round each group of 4": r(u("fp64"), group_size=4, round_each_group=True),
        "fp64 group 2, once": r(u("fp64"), group_size=2),
        # group 1 in RNE takes the kernel's fp32 path (double rounding innocuous); RZ and a group
        # that does not divide the kernel's K block take the fp64 path
        "fp64 round each step": r(u("fp64"), round_each_group=True),
        "fp64 round each step RZ": r(u("fp64"), round_each_group=True, output_rounding=Rounding.RZ),
        "fp64 group 3 each, RD": r(u("fp64"), group_size=3, round_each_group=True, output_rounding=Rounding.RD),
    }
    for n in ("v100", "a100", "h100"):
        base = u(n)
        v[f"{n} group 2"] = r(base, group_size=2)
        v[f"{n} group 8"] = r(base, group_size=8 if base.group_size != 8 else 4)
        v[f"{n} F+1"] = r(base, fraction_bits=base.fraction_bits + 1)
        v[f"{n} F-1"] = r(base, fraction_bits=base.fraction_bits - 1)
        v[f"{n} RNE"] = r(base, output_rounding=Rounding.RNE)
        v[f"{n} RD alignment"] = r(base, alignment_rounding=Rounding.RD)
        h = u(n, output="fp16")
        v[f"{n} fp16 out F-1"] = r(h, fraction_bits=h.fraction_bits - 1)
        v[f"{n} fp16 out group 2"] = r(h, group_size=2)
    return v


VARIANTS = _variants()


@pytest.mark.parametrize("label", list(VARIANTS))
def test_unit_variant_matches_oracle(label, oracle):
    unit = VARIANTS[label]
    fp16 = unit.params.output_format == 1
    _check(unit, label, fp16, VARIANT_CASES, label, oracle)
