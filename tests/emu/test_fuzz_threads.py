"""Property-based (hypothesis) thread-count invariance (issue 13: "for valid inputs identical bits
whatever the thread or worker count"): kernels are parallel over outputs only, never over a
reduction, so the bits of a GEMM through any unit, in any order (a permuted K, padding, split-K
with either combine order) and of a whole run of a small convolution (any direction, stride,
padding, dilation, kernel, hardware; with its split-K partial sums) must not depend on numba's
thread count, nor on how run() chunks the output columns. Bit patterns are compared, never
values. Worker-count invariance is validation.engine's (Dask) own test.

``make fuzz`` runs ``FP16EMU_FUZZ_SCALE`` times the examples.
"""

import time
import warnings

import numba
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import emu
import models
from tests.adversarial import FAMILIES, generate
from tests.fuzzing import fuzz, tally, write_report

THREADS = min(2, numba.config.NUMBA_NUM_THREADS)
#: seconds one input may take: a cold numba cache compiles a unit family's kernels on first use
#: (up to a minute each on a loaded 2-core machine); warm, an input takes well under a second
COMPILE_S = 300.0
pytestmark = pytest.mark.skipif(THREADS < 2, reason="numba has one thread here: nothing to vary")


@pytest.fixture(scope="module", autouse=True)
def _report_counts():
    yield
    write_report()


def _with_threads(n: int, fn):
    before = numba.get_num_threads()
    numba.set_num_threads(n)
    try:
        return fn()
    finally:
        numba.set_num_threads(before)


def _bits(a) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def _outcome(fn):
    """The bits fn returns, or the refusal it raises (the same for any thread count)."""
    try:
        return "bits", [_bits(x) for x in fn()]
    except (ValueError, TypeError) as err:
        return "refused", f"{type(err).__name__}: {err}"


def _same(one, two) -> None:
    assert one[0] == two[0], (one, two)
    if one[0] == "refused":
        assert one[1] == two[1]
        return
    assert len(one[1]) == len(two[1])
    for a, b in zip(one[1], two[1]):
        np.testing.assert_array_equal(a, b)


@st.composite
def gemm_cases(draw):
    name = draw(st.sampled_from(models.UNIT_NAMES))
    unit = models.unit(name)
    M, N, K = draw(st.integers(1, 6)), draw(st.integers(1, 48)), draw(st.integers(1, 80))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    family = draw(st.sampled_from(FAMILIES))
    a, b, c = generate(family, rng, max(M, N), K)
    A, B = a[:M], b[:N].T.copy()
    fp32_out = unit.output_format == emu.Format.FP32
    C = c[:M].view(np.float32)[:, None] if fp32_out and draw(st.booleans()) else None
    k_order = tuple(int(i) for i in rng.permutation(K)) if draw(st.booleans()) else None
    order = emu.GemmOrder(
        k_order=k_order,
        pad_k=draw(st.integers(1, 5)),
        split_k=draw(st.integers(1, 4)),
        combine=draw(st.sampled_from(["ascending", "random"])),
        combine_seed=draw(st.integers(0, 1000)),
    )
    return f"{name} {family} M{M} N{N} K{K} {order}", unit, A, B, C, order


@fuzz(30)
@given(case=gemm_cases())
def test_gemm_bits_do_not_depend_on_the_thread_count(case):
    label, unit, A, B, C, order = case
    t0 = time.perf_counter()
    one = _with_threads(1, lambda: _outcome(lambda: [emu.gemm(A, B, C, unit, order)]))
    two = _with_threads(THREADS, lambda: _outcome(lambda: [emu.gemm(A, B, C, unit, order)]))
    _same(one, two)
    answer = "identical bits" if one[0] == "bits" else "refused alike"
    tally("emu.gemm, 1 vs 2 threads", answer, time.perf_counter() - t0, bound_s=COMPILE_S)


@st.composite
def conv_configs(draw):
    op = draw(st.sampled_from(["conv2d", "conv2d_bwd_data", "conv2d_bwd_weight"]))
    y, x = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    ph, pw = draw(st.integers(0, 1)), draw(st.integers(0, 1))
    h = draw(st.integers(max(1, dh * (y - 1) + 1 - 2 * ph), 7))
    w = draw(st.integers(max(1, dw * (x - 1) + 1 - 2 * pw), 7))
    sizes = (
        f"-batchsize={draw(st.integers(1, 2))} -in_channels={draw(st.integers(1, 5))} "
        f"-out_channels={draw(st.integers(1, 5))} -in_h={h} -in_w={w} -fil_h={y} -fil_w={x} "
        f"--conv_stride_h={draw(st.integers(1, 2))} --conv_stride_w={draw(st.integers(1, 3))} "
        f"--padding_h={ph} --padding_w={pw} --dilation_h={dh} --dilation_w={dw}"
    )
    layouts = draw(st.sampled_from(["", " -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk"]))
    kernel = draw(st.sampled_from(["%xdlops", ""]))
    return f"{kernel} --operation {op} -t f16 {sizes}{layouts}".strip()


@fuzz(6)
@given(
    config=conv_configs(),
    hw=st.sampled_from(["mi100", "mi200", "mi300"]),
    seed=st.integers(1, 2**31 - 1),
    n_chunk=st.integers(1, 9),
)
def test_run_bits_do_not_depend_on_the_thread_count_or_chunking(config, hw, seed, n_chunk):
    def go(chunk):
        def outputs():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = emu_run(config, hw=hw, seed=seed, rand_type="float", progress=False, n_chunk=chunk)
            parts = [] if r.ensemble is None else [r.ensemble.parts]
            return [r.kernel_output, r.kernel_fp32, r.validation_output, *parts]

        return _outcome(outputs)

    from validation.run import run as emu_run  # the run, as a user calls it (validation sits above emu)

    t0 = time.perf_counter()
    one = _with_threads(1, lambda: go(None))
    _same(one, _with_threads(THREADS, lambda: go(None)))
    _same(one, _with_threads(THREADS, lambda: go(n_chunk)))
    tally(
        "validation.run.run, 1 vs 2 threads and n_chunk",
        "identical bits" if one[0] == "bits" else "refused alike",
        time.perf_counter() - t0,
        bound_s=COMPILE_S,
    )
