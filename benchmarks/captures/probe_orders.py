"""Order probes (issue 37): captures whose operands are built to expose a kernel's summation
order, for the kernels that random operands leave undecided (cuDNN's ``wgrad2d_shmem_tiling``,
cuBLAS's sm80 TF32 split-K ``linear`` of sweep case s0348, the ``gemvNSP`` mm of s1149), and more
random draws of the Winograd forward convolutions.

A probe is one output's reduction with every product ``small`` except two, ``+big`` at position i
and ``-big`` at position j (|big/small| ≥ 2^29, so a small added to a lone big is lost). The
output then counts the smalls added after i's and j's partial sums met: it reads the size of the
smallest subtree of the summation tree holding both. Every output of a capture is one probe
(one column of B for ``mm``, one row of the input for ``linear``, one output channel's
grad_output for the weight gradient, whose input is all ones), so one capture holds as many
probes as the op has outputs in that dimension. The pairs: (0, j) for every j, (j, j+1) for
every j, and random pairs from a fixed seed.

    python3 benchmarks/captures/probe_orders.py device --out DIR [--set 1 … 6] [--deadline 240]
    python benchmarks/captures/probe_orders.py complete DIR/*.tar.gz DEST

``device`` needs numpy and PyTorch only (the capture kit is loaded as a plain file); every
capture is written without its operands, which ``complete`` builds again from this file's recipe
and checks against the sha256 the GPU recorded. Random draws go through the kit's seeds."""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import sys
import tarfile
import time
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
KIT = HERE.parents[1] / "validation" / "capture_torch.py"

# (big, small) per operand dtype: powers of two, exact in the operand format and in fp32.
VALUES = {"float16": (2.0**15, 2.0**-14), "bfloat16": (2.0**40, 1.0), "float32": (2.0**40, 1.0)}

WGRAD_SHAPES = [  # (N, C, K, H, R, stride, pad): the shapes cuDNN answered with wgrad2d_shmem_tiling
    (2, 48, 20, 15, 3, 1, 1),
    (2, 16, 16, 12, 5, 1, 2),
    (2, 24, 40, 10, 3, 1, 0),
    (1, 96, 8, 16, 5, 2, 2),
    (4, 4, 41, 11, 7, 1, 1),
    (2, 64, 64, 16, 3, 2, 1),
    (2, 40, 24, 17, 3, 1, 1),
    (2, 32, 32, 16, 5, 1, 2),
    (2, 128, 128, 16, 3, 2, 1),
]


def _conv_out(h: int, r: int, stride: int, pad: int) -> int:
    return (h + 2 * pad - r) // stride + 1


def _fprop_entry(name: str, seed: int, dtype: str, tf32: bool, x, w, pad: int) -> dict:
    """A forward convolution's plan entry (stride 1, NCHW) drawn from ``seed``."""
    return {
        "name": name,
        "op": "conv2d",
        "seed": seed,
        "dtype": dtype,
        "allow_tf32": tf32,
        "memory_format": "contiguous",
        "stride": [1, 1],
        "padding": [pad, pad],
        "dilation": [1, 1],
        "groups": 1,
        "shapes": {"input": x, "weight": w},
    }


def _wgrad_entry(name: str, shape, fmt: str, dtype: str, **extra) -> dict:
    """A weight-gradient plan entry for (N, C, K, H, R, stride, pad), square images and filters."""
    n, c, k, h, r, stride, pad = shape
    p = _conv_out(h, r, stride, pad)
    return {
        "name": name,
        "op": "conv2d_bwd_weight",
        "dtype": dtype,
        "allow_tf32": False,
        "memory_format": fmt,
        "stride": [stride, stride],
        "padding": [pad, pad],
        "dilation": [1, 1],
        "groups": 1,
        "shapes": {"grad_output": [n, k, p, p], "input": [n, c, h, h]},
        "weight_shape": [k, c, r, r],
        **extra,
    }


def probe_cases(probe_set: int = 1) -> list[dict]:
    """Every probed case of ``probe_set``: a plan entry without operands plus how its probes are
    laid out. Set 1: the first session; set 2: every pair of the small weight gradients, the
    gemvNSP lane count over K, the TF32 split-K tree over K and M; set 3: that tree's every
    pair of k tiles over K."""
    if probe_set == 2:
        return _second_set()
    if probe_set == 3:
        return _third_set()
    if probe_set in (4, 6):
        return []
    if probe_set == 5:
        return _fifth_set()
    cases = []
    for shape in WGRAD_SHAPES:
        n, c, k, h, r, stride, pad = shape
        p = _conv_out(h, r, stride, pad)
        for fmt in ("contiguous", "channels_last"):
            for dtype in ("float16", "bfloat16"):
                tag = {"float16": "f16", "bfloat16": "bf16"}[dtype]
                name = f"p_wgrad_n{n}c{c}k{k}h{h}r{r}s{stride}p{pad}_{fmt[:5]}_{tag}"
                cases.append(_wgrad_entry(name, shape, fmt, dtype, probe_length=n * p * p, probes_per_capture=k))
    cases.append(
        {
            "name": "p_linear_262x4931x10_tf32",
            "op": "linear",
            "dtype": "float32",
            "allow_tf32": True,
            "shapes": {"input": [262, 4931], "weight": [10, 4931], "bias": [10]},
            "probe_length": 4931,
            "probes_per_capture": 262,
        }
    )
    cases.append(  # the sm80 TF32 wgrad cuDNN timed fastest (indexed_wo_smem): pairs (0, j) only
        {
            "name": "p_wgrad_bench_n8c128h28_tf32",
            "op": "conv2d_bwd_weight",
            "dtype": "float32",
            "allow_tf32": True,
            "memory_format": "contiguous",
            "stride": [1, 1],
            "padding": [1, 1],
            "dilation": [1, 1],
            "groups": 1,
            "shapes": {"grad_output": [8, 128, 28, 28], "input": [8, 128, 28, 28]},
            "weight_shape": [128, 128, 3, 3],
            "cudnn_benchmark": True,
            "probe_length": 8 * 28 * 28,
            "probes_per_capture": 128,
            "pairs": "first",
        }
    )
    cases.append(
        {
            "name": "p_mm_1x163x1148_f32",
            "op": "mm",
            "dtype": "float32",
            "allow_tf32": False,
            "shapes": {"A": [1, 163], "B": [163, 1148]},
            "probe_length": 163,
            "probes_per_capture": 1148,
        }
    )
    return cases


def _second_set() -> list[dict]:
    cases = []
    for shape in [WGRAD_SHAPES[i] for i in (3, 2, 5, 4)]:
        n, c, k, h, r, stride, pad = shape
        p = _conv_out(h, r, stride, pad)
        name = f"q_wgrad_n{n}c{c}k{k}h{h}r{r}s{stride}p{pad}_conti_f16"
        extra = dict(probe_length=n * p * p, probes_per_capture=k, pairs="every")
        cases.append(_wgrad_entry(name, shape, "contiguous", "float16", **extra))
    for k in (129, 160, 161, 192, 193, 224, 256, 257, 320, 384, 500, 640, 1000, 2000):
        cases.append(
            {
                "name": f"q_mm_1x{k}x1148_f32",
                "op": "mm",
                "dtype": "float32",
                "allow_tf32": False,
                "shapes": {"A": [1, k], "B": [k, 1148]},
                "probe_length": k,
                "probes_per_capture": 1148,
            }
        )
    for m, k, n in [
        (262, 4931, 10),
        (262, 3000, 10),
        (262, 2000, 10),
        (262, 6000, 10),
        (262, 8000, 10),
        (128, 4931, 10),
        (262, 4931, 40),
        (500, 4000, 16),
        (100, 7000, 8),
    ]:
        cases.append(
            {
                "name": f"q_linear_{m}x{k}x{n}_tf32",
                "op": "linear",
                "dtype": "float32",
                "allow_tf32": True,
                "shapes": {"input": [m, k], "weight": [n, k], "bias": [n]},
                "probe_length": k,
                "probes_per_capture": m,
                "pairs": "grid",
            }
        )
    return cases


def _fifth_set() -> list[dict]:
    """Set 5: every pair of k-tile starts (64 wide) of the two xmma weight gradients after a
    ``Memset`` that set 4 left differing, fp16 with subnormal smalls (2^-24 against 2^15: a
    subtree of up to 2^14 smalls is still lost to a big)."""
    out = []
    for shape, fmt in (((2, 40, 24, 17, 3, 1, 1), "channels_last"), ((4, 16, 8, 28, 3, 1, 1), "contiguous")):
        n, c, k, h, r, stride, pad = shape
        p = _conv_out(h, r, stride, pad)
        name = f"t_wgrad_n{n}c{c}k{k}h{h}r{r}s{stride}p{pad}_{fmt[:5]}_f16"
        extra = dict(probe_length=n * p * p, probes_per_capture=k, pairs="tiles", values=(2.0**15, 2.0**-24))
        out.append(_wgrad_entry(name, shape, fmt, "float16", **extra))
    return out


def _third_set() -> list[dict]:
    """The TF32 ``linear`` 262×K×10 over K (cuBLAS's sm80 xmma split-K): every pair of the first
    32 k tiles of 64, which tells the split count and the whole tree of the splits' partials."""
    return [
        {
            "name": f"s_linear_262x{k}x10_tf32",
            "op": "linear",
            "dtype": "float32",
            "allow_tf32": True,
            "shapes": {"input": [262, k], "weight": [10, k], "bias": [10]},
            "probe_length": k,
            "probes_per_capture": 262,
            "pairs": "tiles",
        }
        for k in (
            1000,
            1500,
            2000,
            2500,
            3000,
            3500,
            4000,
            4500,
            4931,
            5500,
            6000,
            6500,
            7000,
            7500,
            8000,
            9000,
            10000,
            11000,
            12000,
            14000,
            16000,
        )
    ]


def probe_pairs(length: int, seed: int = 37, kinds: str = "all") -> list[tuple[int, int]]:
    """The (i, j) pairs probed over a reduction of ``length`` products, i < j: (0, j) for every j,
    then (unless ``kinds`` is "first") (j, j + 1) for every j and ``length`` random pairs.
    ``kinds`` "every": every pair i < j; "grid": (0, j) for j < 8 and every j a multiple of 8."""
    if kinds == "every":
        return [(i, j) for i in range(length) for j in range(i + 1, length)]
    if kinds == "tiles":
        starts = [64 * t for t in range(min(32, -(-length // 64)))]
        return [(a, b) for i, a in enumerate(starts) for b in starts[i + 1 :]]
    if kinds == "grid":
        return [(0, j) for j in range(1, length) if j < 8 or j % 8 == 0]
    pairs = [(0, j) for j in range(1, length)]
    if kinds == "first":
        return pairs
    pairs += [(j, j + 1) for j in range(1, length - 1)]
    rng = np.random.default_rng(seed)
    extra = rng.integers(0, length, size=(length, 2))
    pairs += [(int(min(a, b)), int(max(a, b))) for a, b in extra if a != b]
    return pairs


def batches(case: dict) -> list[list[tuple[int, int]]]:
    """The probe pairs cut into captures of ``probes_per_capture`` (the last one padded with (0, 1))."""
    pairs = probe_pairs(case["probe_length"], kinds=case.get("pairs", "all"))
    size = case["probes_per_capture"]
    out = []
    for start in range(0, len(pairs), size):
        chunk = pairs[start : start + size]
        out.append(chunk + [(0, 1)] * (size - len(chunk)))
    return out


def _probe_rows(pairs, length: int, dtype: str, values=None) -> np.ndarray:
    big, small = values or VALUES[dtype]
    rows = np.full((len(pairs), length), small, np.float64)
    for row, (i, j) in enumerate(pairs):
        rows[row, i] = big
        rows[row, j] = -big
    return rows


def _as_dtype(values: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        import ml_dtypes

        return values.astype(ml_dtypes.bfloat16)
    return values.astype(np.float16 if dtype == "float16" else np.float32)


def probe_operands(case: dict, pairs) -> dict[str, np.ndarray]:
    """One capture's operands (numpy, in the operand dtype) for ``pairs``, one pair per probe."""
    dtype, shapes = case["dtype"], case["shapes"]
    rows = _probe_rows(pairs, case["probe_length"], dtype, case.get("values"))
    if case["op"] == "conv2d_bwd_weight":
        n, k, p, q = shapes["grad_output"]
        grad = rows.reshape(k, n, p, q).transpose(1, 0, 2, 3)  # probe position = (n, p, q) flattened
        return {"grad_output": _as_dtype(grad, dtype), "input": _as_dtype(np.ones(shapes["input"]), dtype)}
    if case["op"] == "linear":
        return {
            "input": _as_dtype(rows, dtype),
            "weight": _as_dtype(np.ones(shapes["weight"]), dtype),
            "bias": _as_dtype(np.zeros(shapes["bias"]), dtype),
        }
    if case["op"] == "mm":
        return {"A": _as_dtype(np.ones(shapes["A"]), dtype), "B": _as_dtype(rows.T, dtype)}
    raise ValueError(f"op: {case['op']!r} has no probe layout")


def random_specs() -> list[dict]:
    """Plan entries (kit seeds) drawn at random: more draws of the cases the probes target and of
    the Winograd forward convolutions cuDNN took on the H200."""
    specs = []
    wino = [
        ("s0525", [1, 52, 26, 26], [26, 52, 3, 3], "bfloat16", False, 0),
        ("bench64", [4, 64, 16, 16], [64, 64, 3, 3], "float16", True, 1),
        ("bench64", [4, 64, 16, 16], [64, 64, 3, 3], "bfloat16", True, 1),
        ("wide", [2, 64, 30, 30], [32, 64, 3, 3], "bfloat16", False, 0),
        ("wide", [2, 64, 30, 30], [32, 64, 3, 3], "float16", False, 0),
        ("s0525", [1, 52, 26, 26], [26, 52, 3, 3], "float16", False, 0),
    ]
    for idx, (tag, x, w, dtype, bench, pad) in enumerate(wino):
        for seed in range(3):
            specs.append(
                _fprop_entry(f"r_wino_{tag}_{dtype}_{seed}", 370000 + 100 * idx + seed, dtype, False, x, w, pad)
                | {"cudnn_benchmark": bench}
            )
    for seed in range(3):
        specs.append(
            {
                "name": f"r_linear_262x4931x10_tf32_{seed}",
                "op": "linear",
                "seed": 371000 + seed,
                "dtype": "float32",
                "allow_tf32": True,
                "shapes": {"input": [262, 4931], "weight": [10, 4931], "bias": [10]},
            }
        )
        specs.append(
            {
                "name": f"r_mm_1x163x1148_f32_{seed}",
                "op": "mm",
                "seed": 372000 + seed,
                "dtype": "float32",
                "allow_tf32": False,
                "shapes": {"A": [1, 163], "B": [163, 1148]},
            }
        )
    return specs


def random_specs_fp32() -> list[dict]:
    """Set 2's random draws: the Winograd forward shape of sweep case s0525 in fp32 (with and
    without TF32), whose fp32 outputs show every rounding the transforms make."""
    specs = []
    for idx, (x, w, pad) in enumerate([([1, 52, 26, 26], [26, 52, 3, 3], 0), ([2, 64, 30, 30], [32, 64, 3, 3], 0)]):
        for tf32 in (False, True):
            for seed in range(2):
                specs.append(
                    _fprop_entry(
                        f"r_wino{idx}_{'tf32' if tf32 else 'f32'}_{seed}",
                        373000 + 100 * idx + 10 * tf32 + seed,
                        "float32",
                        tf32,
                        x,
                        w,
                        pad,
                    )
                )
    return specs


def random_specs_check() -> list[dict]:
    """Set 4: random draws (kit seeds) of shapes no probe saw, to check the orders the probes
    gave: weight gradients of other sizes, batches and channels (fp16 and bf16, NCHW and
    channels_last), ``mm`` 1×K×1148 and ``bmm`` M = 1 for other K, and TF32 ``linear`` with a
    bias for 4, 6 and 8 splits."""
    specs, seed = [], 374000
    shapes = [(1, 32, 16, 20, 3, 1, 1), (4, 16, 8, 28, 3, 1, 1), (2, 8, 8, 23, 3, 1, 1), (3, 12, 20, 9, 5, 1, 2),
              (1, 64, 32, 32, 3, 2, 1), (8, 4, 4, 12, 3, 1, 1), (2, 40, 24, 17, 3, 1, 1), (2, 32, 32, 16, 5, 1, 2),
              (1, 24, 48, 40, 3, 1, 1), (5, 6, 10, 13, 3, 2, 0)]  # fmt: skip
    for shape in shapes:
        n, c, k, h, r, stride, pad = shape
        for fmt in ("contiguous", "channels_last"):
            for dtype in ("float16", "bfloat16"):
                seed += 1
                name = f"c_wgrad_n{n}c{c}k{k}h{h}r{r}s{stride}p{pad}_{fmt[:5]}_{dtype}"
                specs.append(_wgrad_entry(name, shape, fmt, dtype, seed=seed))
    for k in (97, 100, 113, 128, 140, 150, 157):
        seed += 1
        specs.append({"name": f"c_mm_1x{k}x1148_f32", "op": "mm", "seed": seed, "dtype": "float32",
                      "allow_tf32": False, "shapes": {"A": [1, k], "B": [k, 1148]}})  # fmt: skip
    for b, k, n in ((4, 120, 100), (3, 150, 300), (2, 140, 60), (5, 101, 115)):
        seed += 1
        specs.append({"name": f"c_bmm_{b}x1x{k}x{n}_f32", "op": "bmm", "seed": seed, "dtype": "float32",
                      "allow_tf32": False, "shapes": {"A": [b, 1, k], "B": [b, k, n]}})  # fmt: skip
    for m, k, n in ((262, 3000, 10), (262, 8000, 10), (262, 4931, 10), (200, 5000, 12), (300, 3500, 10)):
        seed += 1
        specs.append({"name": f"c_linear_{m}x{k}x{n}_tf32", "op": "linear", "seed": seed, "dtype": "float32",
                      "allow_tf32": True, "shapes": {"input": [m, k], "weight": [n, k], "bias": [n]}})  # fmt: skip
    return specs


def random_specs_winograd() -> list[dict]:
    """Set 6 (prepared in session 24, run in session 25): random draws (kit seeds) that looked for
    cuDNN's Winograd kernels where their outputs carry every bit. The 5×5 weight gradient that ran
    ``winogradForwardData9x9_5x5`` + ``winogradWgradDelta9x9_5x5`` in fp16 and bf16 (set 4), and 5×5
    and 3×3 forward passes, in fp32 with and without TF32 and with ``cudnn.benchmark`` off and
    on, NCHW; the same shapes in fp16 and bf16 with ``cudnn.benchmark`` on. PyTorch got no Winograd
    kernel for fp32 (FFT, implicit GEMMs) and one for fp16 (tests/data/captures/README.md)."""
    specs, seed = [], 376000
    wgrads = [(2, 32, 32, 16, 5, 1, 2), (2, 32, 32, 20, 5, 1, 2), (3, 12, 20, 9, 5, 1, 2), (1, 64, 64, 24, 5, 1, 2)]
    fprops = [([2, 32, 20, 20], [32, 32, 5, 5], 2), ([1, 64, 24, 24], [64, 64, 5, 5], 2),
              ([1, 52, 26, 26], [26, 52, 3, 3], 0), ([4, 64, 16, 16], [64, 64, 3, 3], 1)]  # fmt: skip
    kinds = [("float32", False, False), ("float32", False, True), ("float32", True, False), ("float32", True, True),
             ("float16", False, True), ("bfloat16", False, True)]  # fmt: skip
    for dtype, tf32, bench in kinds:
        tag = f"{'tf32' if tf32 else dtype}{'_bench' if bench else ''}"
        for shape in wgrads:
            seed += 1
            n, c, k, h, r, stride, pad = shape
            name = f"w_wgrad_n{n}c{c}k{k}h{h}r{r}s{stride}p{pad}_{tag}"
            entry = _wgrad_entry(name, shape, "contiguous", dtype, seed=seed) | {"allow_tf32": tf32}
            specs.append(entry | {"cudnn_benchmark": bench})
        for x, w, pad in fprops:
            seed += 1
            name = f"w_fprop_n{x[0]}c{x[1]}k{w[0]}h{x[2]}r{w[2]}p{pad}_{tag}"
            specs.append(_fprop_entry(name, seed, dtype, tf32, x, w, pad) | {"cudnn_benchmark": bench})
    return specs


def load_kit():
    spec = importlib.util.spec_from_file_location("capture_kit", KIT)
    kit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kit)
    return kit


def _plan_entry(case: dict, name: str) -> dict:
    entry = {k: v for k, v in case.items() if k not in ("probe_length", "probes_per_capture", "pairs", "values")}
    entry.update(name=name, seed=0, range=[-1.0, 1.0])  # seed/range: the kit's contract; dropped below
    return entry


def session_summary(torch, lines: list[str], start: float) -> dict:
    """What a device run records beside its captures: the GPU, the library versions, the seconds
    since ``start``, the cases taken and failed (``lines`` starting "OK " and "FAIL "), the date."""
    return {
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "cudnn": torch.backends.cudnn.version(),
        "seconds": round(time.time() - start, 1),
        "ok": sum(line.startswith("OK ") for line in lines),
        "failed": sum(line.startswith("FAIL ") for line in lines),
        "date": time.strftime("%Y-%m-%d"),
    }


def device_main(out: Path, deadline_s: float, device: str = "cuda", probe_set: int = 1) -> int:
    import torch

    kit = load_kit()
    work = Path(f"/tmp/fp16emu_probes/set{probe_set}")
    work.mkdir(parents=True, exist_ok=True)
    start = time.time()
    lines = []
    # GEMM probes and fp16 weight gradients first: the deadline drops what comes last
    cases = sorted(probe_cases(probe_set), key=lambda c: (c["op"] == "conv2d_bwd_weight", c["dtype"] != "float16"))
    randoms = {1: random_specs, 2: random_specs_fp32, 4: random_specs_check, 6: random_specs_winograd}
    randoms = randoms.get(probe_set, lambda: [])()
    jobs = [(None, 0, spec) for spec in randoms]
    jobs += [(case, b, pairs) for case in cases for b, pairs in enumerate(batches(case))]
    for case, b, payload in jobs:
        if time.time() - start > deadline_s:
            lines.append(f"DEADLINE {case['name'] if case else payload['name']} {b}")
            continue
        try:
            if case is None:
                fields = kit.capture_case(torch, payload, device=device, omit_operands=True)
                name = payload["name"]
            else:
                name = f"{case['name']}_b{b:03d}"
                operands = probe_operands(case, payload)
                fields = kit.capture_case(torch, _plan_entry(case, name), operands, device=device)
                for key in list(operands):
                    fields.pop(key)
                    fields[f"{key}_sha256"] = hashlib.sha256(np.ascontiguousarray(operands[key]).tobytes()).hexdigest()
                for key in ("seed", "range"):
                    fields.pop(key, None)
                fields["probe"] = json.dumps({"case": case["name"], "batch": b})
            kit.save(work / f"{name}.npz", fields)
            lines.append(f"OK {name} differs={fields['repeat_differs']} {'; '.join(map(str, fields['kernels']))}")
        except Exception as exc:  # noqa: BLE001 - one failed case must not stop the session
            lines.append(f"FAIL {b} {type(exc).__name__}: {str(exc)[:300]}")
            lines.append(traceback.format_exc()[-600:])
    out.mkdir(parents=True, exist_ok=True)
    (work / "log.txt").write_text("\n".join(lines) + "\n")
    session = session_summary(torch, lines, start)
    (work / "session.json").write_text(json.dumps(session, indent=1) + "\n")
    with tarfile.open(out / f"probes_set{probe_set}.tar.gz", "w:gz") as tar:  # one file: few come back
        tar.add(work, arcname="probes")
    print(json.dumps(session, indent=1))
    print("\n".join(lines[:40]))
    return 0


def restore_operands(fields: dict) -> dict:
    """A probe capture's fields (``probe`` naming its case and batch, each operand's
    ``…_sha256``) with its operands built again by this file's recipe in place of the digests;
    ValueError where one is not the operand the GPU ran (its sha256 differs)."""
    fields = dict(fields)
    where = json.loads(str(fields["probe"]))
    case = {c["name"]: c for s in (1, 2, 3, 5) for c in probe_cases(s)}[where["case"]]
    for key, array in probe_operands(case, batches(case)[where["batch"]]).items():
        if hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest() != str(fields.pop(f"{key}_sha256")):
            raise ValueError(f"{key} is not the one the GPU ran (sha256 differs)")
        fields[key] = array
    return fields


def complete_main(archives: list[Path], dest: Path) -> int:
    """Unpack ``archives`` into ``dest`` with every capture's operands put back (checked by sha256)."""
    kit = load_kit()
    dest.mkdir(parents=True, exist_ok=True)
    for archive in archives:
        with tarfile.open(archive) as tar:
            tar.extractall(dest / "_raw", filter="data")
    for path in sorted((dest / "_raw" / "probes").glob("*.npz")):
        with np.load(path, allow_pickle=False) as z:
            fields = {k: z[k] for k in z.files}
        if "probe" in fields:
            try:
                fields = restore_operands(fields)
            except ValueError as exc:
                raise SystemExit(f"{path.name}: {exc}") from None
        else:
            fields = kit.complete(fields)
        kit.save(dest / path.name, fields)
    for extra in ("log.txt", "session.json"):
        (dest / extra).write_text((dest / "_raw" / "probes" / extra).read_text())
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("device")
    d.add_argument("--out", required=True)
    d.add_argument("--deadline", type=float, default=240.0)
    d.add_argument("--device", default="cuda")
    d.add_argument(
        "--set", type=int, default=1, choices=(1, 2, 3, 4, 5, 6), help="which probe set (4, 6: random draws only)"
    )
    c = sub.add_parser("complete")
    c.add_argument("archives", nargs="+")
    c.add_argument("dest")
    args = p.parse_args(argv)
    if args.command == "device":
        return device_main(Path(args.out), args.deadline, args.device, args.set)
    return complete_main([Path(a) for a in args.archives], Path(args.dest))


if __name__ == "__main__":
    sys.exit(main())
