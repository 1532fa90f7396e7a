"""cuDNN's CUDA-core backward-data kernel ``dgrad2d_alg1_1`` (issue 37), judged by the H200's bits.

The kernel cuts each image's grad_output positions (p·Q + q) into chunks of 2^b (the template's
third number); per chunk, each grad_input element gets the sum of its taps' fp32 k-chains (taps
in (r, s) order, each chain from +0), added to the element as stored so far and rounded to the
output format. The captures are session 16's (tests/data/captures/h200_s16, README there).
"""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from capture_data import differing_bits

from validation.captures.capture import load_capture
from validation.captures.convs import dgrad_alg1_chunk, dgrad_alg1_output, is_dgrad_alg1
from validation.captures.gemms import run_candidate
from validation.captures.search import search

DATA = Path(__file__).resolve().parents[2] / "data" / "captures" / "h200_s16"


def _cap(name):
    path = DATA / f"{name}.npz" if "/" not in name else DATA.parent / f"{name}.npz"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    return load_capture(path)


_differ = differing_bits


def test_chunk_from_the_template():
    half = "void cudnn::detail::dgrad2d_alg1_1<__half, 0, 6, 7, 5, 4, 5, false, true>(int, int)"
    single = "void cudnn::detail::dgrad2d_alg1_1<float, 0, 6, 6, 5, 4, 4, false, true>(int, int)"
    assert dgrad_alg1_chunk([half]) == 128
    assert dgrad_alg1_chunk(["scalePackedTensor_kernel<float, float>(long)", single]) == 64
    assert dgrad_alg1_chunk(["cudnn::detail::dgrad2d_alg1_1"]) == 128  # the name without its template


@pytest.mark.parametrize(
    "name",
    [
        "t_conv2d_bwd_data_n2c16k16h12r5s1p2_conti_f16",  # 144 positions: rows 8-11 cross the bound at 128
        "t_conv2d_bwd_data_n1c3k16h32r7s2p3_conti_f32",  # 256 positions, stride 2
        "t_conv2d_bwd_data_n1c3k16h32r7s2p3_chann_f32",
        "t_conv2d_bwd_data_n2c16k16h12r5s1p2_conti_tf32",  # TF32 allowed, the kernel multiplies fp32 whole
        "h200_dev/c3x3g2_c64_k64_h12_nchw_bwd_data",  # two groups
        "h200_dev/c5x5_c16_k32_h20_nchw_bwd_data",  # at least 16 × 16 positions: several chunks
    ],
)
def test_every_output_bit(name):
    cap = _cap(name)
    assert is_dgrad_alg1(cap)
    assert _differ(dgrad_alg1_output(cap), cap.out) == 0


def test_the_chunk_bound_is_needed():
    """One partial for all positions (no chunks) misses the fp16 outputs that straddle position 128,
    and only those: their grad_input rows (8-11) are the ones whose taps reach grad_output row 10."""
    cap = _cap("t_conv2d_bwd_data_n2c16k16h12r5s1p2_conti_f16")
    whole = dgrad_alg1_output(cap, chunk=1 << 20)
    kind = np.uint16
    rows = np.nonzero((whole.view(kind) != np.asarray(cap.out).view(kind)).any(axis=(0, 1, 3)))[0]
    assert len(rows) and set(rows) <= {0, 1, 8, 9, 10, 11} and {8, 9, 10, 11} <= set(rows)
    assert _differ(dgrad_alg1_output(cap, chunk=64), cap.out) > 0


def test_search_names_the_kernel_and_reruns_it():
    cap = _cap("t_conv2d_bwd_data_n1c3k16h32r7s2p3_conti_f32")
    r = search(cap)
    assert r.answer == "identical" and r.best.variant.position_chunk == 128
    assert r.best.fields()["position_chunk"] == 128 and "dgrad2d_alg1_1" in r.best.describe()
    assert _differ(run_candidate(cap, r.best), cap.out) == 0


def test_an_output_the_kernel_cannot_give_is_not_modelled():
    """One output bit flipped: nothing reproduces it, and the kernel's family is answered as not
    modelled (never a kernel bug)."""
    cap = _cap("t_conv2d_bwd_data_n2c16k16h12r5s1p2_conti_f32")
    out = np.array(cap.out).copy()
    out.view(np.uint32).reshape(-1)[7] ^= 1 << 12
    r = search(replace(cap, out=out))
    assert r.answer == "not-modelled" and r.not_modelled == "dgrad2d_alg1_1"
