"""The rows layout's decoding (``emu.decode``, ``emu.rows``) against the table decode, bit for bit.

``fp16_value`` must give the bits of ``emu.formats.FP16_TO_FP32`` (``FP16_TO_FP32_FTZ`` with
flush) for all 65,536 patterns, signalling NaN payloads included. ``dot_add`` on rows (P, K),
through the four-at-a-time transpose (K a multiple of 4, 8-byte aligned rows) or the one-by-one
one (other K, misaligned rows), the fused path of the FMA family (with and without every
flush) and of MI200's pairwise groups of 4 (``emu.rows.rows_fused``), and with a broadcast a, b or c, must give exactly the bits (any NaN
result equal to any NaN) of the family kernel run on operands decoded by the tables in the batched layout
(``emu.dot.run_kernel``) — a path that shares no decoding or chunking code with ``emu.rows``.
"""

import numba
import numpy as np
import pytest

import emu
import emu.dot
import models
from emu.decode import decode_rows_t, quads
from emu.formats import FP16_TO_FP32, FP16_TO_FP32_FTZ
from tests.adversarial import all_families, concat

#: fp16 patterns a decoder can get wrong: signalling and quiet NaNs with payloads, ±inf, ±0,
#: the extreme subnormals and normals
SPECIAL = np.array(
    [0x7C01, 0x7D55, 0xFC01, 0x7DFF, 0x7E00, 0x7E01, 0xFFFF, 0x7C00, 0xFC00, 0x0000, 0x8000]
    + [0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x8400, 0x7BFF, 0xFBFF, 0x3C00, 0xBC00],
    np.uint16,
)


@pytest.mark.parametrize("flush", [False, True])
def test_every_fp16_pattern_decodes_to_the_table_bits(flush):
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).reshape(-1, 4)
    out = np.empty((4, bits.shape[0]), np.float32)
    decode_rows_t(bits, flush, out)
    table = FP16_TO_FP32_FTZ if flush else FP16_TO_FP32
    assert np.array_equal(out.T.reshape(-1).view(np.uint32), table.view(np.uint32))


def _unit(name):
    """A named unit, or "fma32_ftz": fma32 with every flush of the FMA family set (inputs, c on
    entry, the sum after the first product), which the fused rows path implements itself
    (mi200 has them all set)."""
    if name == "fma32_ftz":
        fma = models.unit("fma32").params
        return fma._replace(flush_inputs=True, flush_c=True, flush_output=True)
    return models.unit(name)


def _reference(unit, a, b, c):
    """The kernel on table-decoded operands in the batched layout: A (1, K, P), B (K, P)."""
    params = emu.dot.unit_params(unit)
    table = FP16_TO_FP32_FTZ if params.flush_inputs else FP16_TO_FP32
    A = table[np.ascontiguousarray(a.T)][None]
    B = table[np.ascontiguousarray(b.T)]
    return emu.dot.run_kernel(params, A, B, c[None]).reshape(-1)


def _operands(unit, K, P, seed):
    rng = np.random.default_rng(seed)
    a, b, c, _ = concat(all_families(rng, -(-P // 9), K))
    a, b, c = a[:P].copy(), b[:P].copy(), c[:P].view(np.float32).copy()
    # special patterns sprinkled over both operands, and a row of nothing else
    for x in (a, b):
        pos = rng.integers(0, x.size, x.size // 8)
        x.reshape(-1)[pos] = SPECIAL[rng.integers(0, len(SPECIAL), len(pos))]
        x[P // 2] = SPECIAL[np.arange(K) % len(SPECIAL)]
    return a, b, c


def _bits32(x):
    return np.asarray(x, np.float32).view(np.uint32)


def _same(got, want):
    """Equal bit patterns, any NaN result equal to any NaN (the project's rule for results: which
    payload wins when two NaNs meet in one float32 operation is the compiler's operand order)."""
    g, w = np.asarray(got, np.float32), np.asarray(want, np.float32)
    return np.all((_bits32(g) == _bits32(w)) | (np.isnan(g) & np.isnan(w)))


def _misaligned(x):
    """A C-contiguous copy of x whose data is not 8-byte aligned."""
    buf = np.empty(x.size + 1, x.dtype)
    y = buf[1:].reshape(x.shape)
    y[...] = x
    assert y.flags.c_contiguous and y.ctypes.data % 8
    return y


@pytest.mark.parametrize("name", ["fma32", "fma32_ftz", "mi200", "mi100", "h100"])
@pytest.mark.parametrize("K", [1, 3, 4, 12, 64])
@pytest.mark.parametrize("tasks", [1, 4])
def test_rows_and_broadcasts_give_the_table_decoded_bits(name, K, tasks, monkeypatch):
    fused = tasks == 1 or name not in ("fma32", "fma32_ftz", "mi200")
    unit = _unit(name)
    monkeypatch.setattr(emu.dot, "CHUNK_VALUES", 256)  # chunks of 128 outputs, a short last one
    monkeypatch.setattr(emu.dot, "DIRECT_ROWS", 0)  # the rows driver even for a small batch
    monkeypatch.setattr(emu.dot, "CHUNK_TASKS", tasks)  # one or several chunks per buffer set
    monkeypatch.setattr(emu.dot, "FUSED", fused)  # FMA/pairwise rows decoded inside the k loop, or not
    P = 5 * 128 + 37
    a, b, c = _operands(unit, K, P, seed=K)
    assert (quads(a) is not None) == (K % 4 == 0)
    want = _reference(unit, a, b, c)
    assert _same(emu.dot_add(a, b, c, unit), want)
    assert _same(emu.dot_add(_misaligned(a), _misaligned(b), c, unit), want)
    full = lambda x: np.broadcast_to(x, (P,) + x.shape).copy()  # noqa: E731
    cases = ((a[P // 2], b, c), (a, b[P // 2], c), (a, b, c[7]), (a[3], b, c[7]), (a[3], b[5], c[7]))
    for a_given, b_given, c_given in cases:
        a_full = a_given if a_given.ndim == 2 else full(a_given)
        b_full = b_given if b_given.ndim == 2 else full(b_given)
        c_full = c_given if c_given.ndim == 1 else full(c_given)
        want = _reference(unit, a_full, b_full, c_full)
        got = emu.dot_add(a_given, b_given, c_given, unit)
        assert _same(np.broadcast_to(got, (P,)), want)


@pytest.mark.parametrize("name", ["fma32", "fma32_ftz", "mi200"])
def test_rows_same_bits_for_one_and_two_threads(name, monkeypatch):
    unit = _unit(name)
    monkeypatch.setattr(emu.dot, "CHUNK_VALUES", 256)
    monkeypatch.setattr(emu.dot, "DIRECT_ROWS", 0)  # the rows driver even for a small batch
    a, b, c = _operands(unit, 8, 9 * 128 + 5, seed=1)
    before = numba.get_num_threads()
    got = []
    try:
        for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
            numba.set_num_threads(threads)
            got.append(_bits32(emu.dot_add(a, b, c, unit)))
            got.append(_bits32(emu.dot_add(a[0], b, c, unit)))
    finally:
        numba.set_num_threads(before)
    assert np.array_equal(got[0], got[2]) and np.array_equal(got[1], got[3])
    assert _same(got[0].view(np.float32), _reference(unit, a, b, c))
