"""Issue 37.5: the GEMMs transformer layers call, identified from the output alone.

H200 captures (session 16, ``tests/data/captures/h200_s16``; operands drawn again from their seed
and checked against the GPU machine's sha256): ``addmm`` with alpha 0.5 and beta 2, ``bmm`` and a
3-D ``F.linear`` (batch 2, sequence 50, hidden 768: one GEMM of M = 100), in fp16, bf16, fp32 and
TF32. Each must be reproduced bit for bit, and the schedule found is run again on every output
through ``run_candidate`` (``emu.gemm``, ``emu.simt``), not the search's sampled path.

Synthetic captures for ``baddbmm`` and ``torch.matmul`` with broadcast batches: the output is
``emu.gemm`` of a schedule planted here, batch by batch with the broadcast done by hand
(torch's rule: batch dims broadcast, A (…, M, K) @ B (K, N) folded into one GEMM), and the
search must find a schedule that reproduces every output bit, with the file's alpha and beta in
its epilogue (fp16 outputs may not tell the planted split bounds from others that round alike).
"""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import emu
import models
from validation.captures import load_capture
from validation.captures.gemms import Variant, gemm_dims, n_jobs, run_candidate
from validation.captures.search import search

H200 = Path(__file__).resolve().parents[2] / "data" / "captures" / "h200_s16"


def _u(x):
    return np.ascontiguousarray(x).view(np.dtype(f"u{x.dtype.itemsize}"))


@pytest.mark.parametrize("fmt", ["f16", "bf16", "f32", "tf32"])
@pytest.mark.parametrize("name", ["t_addmm_128x1024x96_ab", "t_bmm_3x64x2048x48", "t_linear_2x50x768x64"])
def test_h200_transformer_gemms_identify(name, fmt):
    path = H200 / f"{name}_{fmt}.npz"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    cap = load_capture(path)
    r = search(cap)
    assert r.answer == "identical", (r.n_identical, r.n, r.best.describe() if r.best else None)
    assert (_u(run_candidate(cap, r.best)) == _u(cap.out)).all()
    if cap.op == "addmm":  # out = RN(alpha·acc + beta·C) in the epilogue
        s = r.best.schedule
        assert (s.c_entry, s.alpha, s.beta) == ("epilogue", 0.5, 2.0)
    if cap.op == "linear":  # (2, 50, 768) @ (768, 64)ᵀ: one GEMM of M = 2·50
        assert cap.operands["input"].shape == (2, 50, 768) and gemm_dims(cap, Variant()) == (100, 64, 768)


def _fp16(rng, *shape):
    return rng.uniform(-1, 1, shape).astype(np.float16)


def _write(tmp_path, name, **fields):
    path = tmp_path / f"{name}.npz"
    np.savez(path, gpu="NVIDIA H200", dtype="float16", **fields)
    return load_capture(path)


def test_a_baddbmm_with_alpha_and_beta_identifies(tmp_path):
    """baddbmm(C, A, B, alpha=0.75, beta=-1.25), C (1, M, N) broadcast over the batch: 3 splits of
    64-wide k tiles added in split order, then RN(alpha·acc + RN(beta·C)) (CUTLASS's
    LinearCombination: beta·C first, then one FMA) and one rounding to fp16."""
    rng = np.random.default_rng(11)
    A, B, C = _fp16(rng, 3, 32, 512), _fp16(rng, 3, 512, 24), _fp16(rng, 1, 32, 24)
    planted = emu.Schedule(
        k_tile=64, splits=3, split_rule="ceil", c_entry="epilogue", alpha=0.75, beta=-1.25, output="fp16"
    )
    unit = models.unit("h100")
    out = np.stack([emu.gemm(A[i], B[i], C[0].astype(np.float32), unit, planted) for i in range(3)])
    cap = _write(tmp_path, "baddbmm", op="baddbmm", A=A, B=B, C=C, out=out.astype(np.float16), alpha=0.75, beta=-1.25)
    assert n_jobs(cap) == 3 and gemm_dims(cap, Variant()) == (32, 24, 512)
    r = search(cap)
    assert r.answer == "identical", r.stages
    s = r.best.schedule
    assert (s.c_entry, s.alpha, s.beta) == ("epilogue", 0.75, -1.25)
    assert (_u(run_candidate(cap, r.best)) == _u(cap.out)).all()  # fp16 outputs: other orders may round alike
    wrong = _write(tmp_path, "wrong", op="baddbmm", A=A, B=B, C=C, out=out.astype(np.float16), alpha=0.75, beta=1.25)
    assert wrong.beta == 1.25  # beta is read from the file, and the found schedule with it is another output
    assert (_u(run_candidate(wrong, replace(r.best, schedule=replace(s, beta=1.25)))) != _u(cap.out)).any()


def test_a_broadcast_matmul_identifies(tmp_path):
    """torch.matmul of A (1, M, K) and B (4, K, N): four GEMMs sharing A (torch expands the batch
    dims and calls bmm), each 2 splits of 128-wide k tiles."""
    rng = np.random.default_rng(12)
    A, B = _fp16(rng, 1, 32, 256), _fp16(rng, 4, 256, 24)
    planted = emu.Schedule(k_tile=128, splits=2, split_rule="ceil", output="fp16")
    unit = models.unit("h100")
    out = np.stack([emu.gemm(A[0], B[i], None, unit, planted) for i in range(4)]).astype(np.float16)
    cap = _write(tmp_path, "matmul", op="matmul", A=A, B=B, out=out)
    assert n_jobs(cap) == 4 and cap.out.shape == (4, 32, 24)
    r = search(cap)
    assert r.answer == "identical", r.stages
    assert (_u(run_candidate(cap, r.best)) == _u(cap.out)).all()


def test_a_folded_matmul_is_one_gemm(tmp_path):
    """torch.matmul of A (2, 3, 16, K) and B (K, N): torch folds it into one mm of M = 2·3·16;
    one k-ascending chain here (no split)."""
    rng = np.random.default_rng(13)
    A, B = _fp16(rng, 2, 3, 16, 200), _fp16(rng, 200, 8)
    planted = emu.Schedule(output="fp16")
    out = emu.gemm(A.reshape(-1, 200), B, None, models.unit("h100"), planted).astype(np.float16).reshape(2, 3, 16, 8)
    cap = _write(tmp_path, "folded", op="matmul", A=A, B=B, out=out)
    assert n_jobs(cap) == 1 and gemm_dims(cap, Variant()) == (96, 8, 200)
    r = search(cap)
    assert r.answer == "identical" and r.best.schedule.splits == 1
    assert (_u(run_candidate(cap, r.best)) == _u(cap.out)).all()


@pytest.mark.parametrize("fused", [True, False])
def test_the_search_tells_the_epilogue_orders_apart(tmp_path, fused):
    """addmm with alpha = RN32(0.3), beta = RN32(0.7) on float32 operands (TF32 off): the planted
    epilogue, one FMA (CUTLASS's LinearCombination) or alpha·acc rounded first, is the one found,
    and the other does not reproduce the output (session 16's alpha 0.5 and beta 2 cannot tell)."""
    from emu.simt import fma_gemm

    rng = np.random.default_rng(14)
    A, B, C = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((24, 96), (96, 16), (24, 16)))
    alpha, beta = float(np.float32(0.3)), float(np.float32(0.7))
    planted = emu.Schedule(c_entry="epilogue", alpha=alpha, beta=beta, epilogue_fma=fused, output="fp32")
    out = fma_gemm(A, B, C, planted)
    path = tmp_path / "addmm.npz"
    np.savez(path, op="addmm", A=A, B=B, C=C, out=out, alpha=alpha, beta=beta, allow_tf32=False, gpu="NVIDIA H200")
    cap = load_capture(path)
    r = search(cap)
    assert r.answer == "identical" and r.best.schedule.epilogue_fma is fused, r.best.describe()
    assert all(c.schedule.epilogue_fma is fused for c in r.reproducing)
    other = replace(r.best, schedule=replace(r.best.schedule, epilogue_fma=not fused))
    assert (_u(run_candidate(cap, other)) != _u(out)).any()
