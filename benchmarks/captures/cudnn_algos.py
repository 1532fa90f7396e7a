"""cuDNN's Winograd kernels called by algorithm number (issue 37), through cuDNN's legacy C API
(``cudnnConvolutionForward`` / ``BackwardData`` / ``BackwardFilter``) from ctypes, so that the
9×9 Winograd ``winograd*9x9_5x5`` kernels, which PyTorch's heuristics take only for fp16 and bf16
operands (whose 16-bit outputs hide most of the order), also run on fp32 operands in fp32, and so
that the workspace, which holds the transformed data, filter and products between the kernels,
comes back too.

    python3 benchmarks/captures/cudnn_algos.py device --out DIR [--plan 1 … 4] [--deadline 240]

Each case: one convolution (NCHW, cross-correlation, stride 1) with operands drawn uniform in
[-1, 1) from a fixed numpy seed and rounded to the operand type, run twice (the second run under
the profiler for the kernel names); the npz holds the operands, the output's bits of both runs,
the workspace's bytes after the first run (filled with 0xFF before, so unwritten bytes read as
NaN), the algorithm, the data and compute types and cuDNN's status. Needs numpy and PyTorch
(for the GPU memory, the stream and the profiler) and cuDNN 8 or 9's legacy convolution API.

The algorithm numbers are cuDNN's enums (cudnn_cnn.h): forward 6 WINOGRAD, 7 WINOGRAD_NONFUSED;
backward data 4 WINOGRAD, 5 WINOGRAD_NONFUSED; backward filter 5 WINOGRAD_NONFUSED. Data types:
0 FLOAT, 2 HALF, 9 BFLOAT16. A compute type of FLOAT with HALF data is cuDNN's PSEUDO_HALF_CONFIG,
HALF with HALF its TRUE_HALF_CONFIG."""

from __future__ import annotations

import argparse
import ctypes
import glob
import io
import json
import os
import sys
import tarfile
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a plain file on the GPU machine
from probe_orders import session_summary  # noqa: E402

FLOAT, HALF, BFLOAT16 = 0, 2, 9
NCHW, CROSS_CORRELATION = 0, 1
ALGOS = {  # (pass, algorithm number): cuDNN's name
    ("fprop", 6): "WINOGRAD",
    ("fprop", 7): "WINOGRAD_NONFUSED",
    ("dgrad", 4): "WINOGRAD",
    ("dgrad", 5): "WINOGRAD_NONFUSED",
    ("wgrad", 5): "WINOGRAD_NONFUSED",
}
CONFIGS = {  # name: (data type, compute type)
    "float32": (FLOAT, FLOAT),
    "float16": (HALF, FLOAT),
    "truehalf": (HALF, HALF),
    "bfloat16": (BFLOAT16, FLOAT),
}
WORKSPACE_KEEP = 4 << 20  # bytes of workspace kept per case
WORKSPACE_BUDGET = 11 << 20  # compressed bytes per archive after which workspaces are dropped


def cases(plan_number: int = 1) -> list[dict]:
    """Plan 1: 5×5 filters (pad 2) and 3×3 (pad 1) through every Winograd algorithm, in each
    configuration, from seeds 377001 on. Plan 2 (:func:`random_cases`): random shapes."""
    if plan_number == 2:
        return random_cases()
    if plan_number == 3:
        return fft_cases()
    if plan_number == 4:
        return fft_cases(impulse=True)
    plan, seed = [], 377000
    shapes5 = [(2, 32, 32, 16), (1, 16, 8, 9), (3, 12, 20, 11)]  # (N, C, K, H)
    shapes3 = [(2, 32, 32, 16), (1, 8, 16, 10)]
    for config in ("float32", "float16", "truehalf", "bfloat16"):
        for r, pad, shapes in ((5, 2, shapes5), (3, 1, shapes3)):
            for n, c, k, h in shapes:
                for (pass_, algo), algo_name in ALGOS.items():
                    seed += 1
                    name = f"a_{pass_}_{algo_name.lower()}_n{n}c{c}k{k}h{h}r{r}p{pad}_{config}"
                    plan.append(
                        dict(
                            name=name,
                            pass_=pass_,
                            algo=algo,
                            config=config,
                            n=n,
                            c=c,
                            k=k,
                            h=h,
                            r=r,
                            pad=pad,
                            seed=seed,
                        )
                    )
    return plan


def random_cases(count: int = 72) -> list[dict]:
    """Plan 2, to check the Winograd orders on shapes their fit never saw: ``count`` draws from
    ``numpy.random.default_rng(3772)`` of a pass, a 3×3 or 5×5 filter, padding 0 … r // 2, N 1 … 3,
    C and K 1 … 48, H and W 5 … 40 (rectangular), and a configuration (fp32, fp16 or bf16 tensors
    computed in fp32), all through WINOGRAD_NONFUSED; seeds 378001 on; no workspace kept."""
    rng = np.random.default_rng(3772)
    algo = {"fprop": 7, "dgrad": 5, "wgrad": 5}
    plan = []
    for i in range(count):
        pass_ = ("fprop", "dgrad", "wgrad")[i % 3]
        r = int(rng.choice([3, 5]))
        pad = int(rng.integers(0, r // 2 + 1))
        n, c, k = int(rng.integers(1, 4)), int(rng.integers(1, 49)), int(rng.integers(1, 49))
        h, width = int(rng.integers(5, 41)), int(rng.integers(5, 41))
        config = ("float32", "float16", "bfloat16")[int(rng.integers(0, 3))]
        name = f"b_{pass_}_n{n}c{c}k{k}h{h}w{width}r{r}p{pad}_{config}"
        plan.append(dict(name=name, pass_=pass_, algo=algo[pass_], config=config, n=n, c=c, k=k, h=h,
                         width=width, r=r, pad=pad, seed=378001 + i, keep_workspace=False))  # fmt: skip
    return plan


def fft_cases(impulse: bool = False) -> list[dict]:
    """Plan 3, for a later look at cuDNN's FFT convolutions (PyTorch takes them for fp32 5×5 weight
    gradients, ``flip_filter`` + ``fft2d_r2c_32x32`` + a complex GEMM + ``fft2d_c2r_32x32``): the
    FFT and FFT_TILING algorithms of every pass on small shapes, fp32 and fp16 tensors, the
    workspace kept (it holds the transformed tiles); seeds 379001 on."""
    shapes = [(1, 4, 8, 16, 5, 2), (2, 3, 5, 12, 3, 1), (1, 8, 4, 24, 5, 0)]  # (N, C, K, H, r, pad)
    if impulse:  # plan 4: every position of a 16×16 and a 12×12 image once, and of a 5×5 and 3×3 filter
        shapes = [(1, 256, 4, 16, 5, 2), (1, 144, 4, 12, 3, 1)]
    algos = [("fprop", 4, "fft"), ("fprop", 5, "fft_tiling"), ("dgrad", 2, "fft"), ("dgrad", 3, "fft_tiling"),
             ("wgrad", 2, "fft"), ("wgrad", 6, "fft_tiling")]  # fmt: skip
    plan, seed = [], 379000 + 100 * impulse
    for config in ("float32",) if impulse else ("float32", "float16"):
        for n, c, k, h, r, pad in shapes:
            for pass_, algo, algo_name in algos:
                seed += 1
                name = f"{'g' if impulse else 'f'}_{pass_}_{algo_name}_n{n}c{c}k{k}h{h}r{r}p{pad}_{config}"
                plan.append(dict(name=name, pass_=pass_, algo=algo, config=config, n=n, c=c, k=k, h=h, r=r,
                                 pad=pad, seed=seed, **({"operands": "impulses"} if impulse else {})))  # fmt: skip
    return plan


def _load_cudnn(torch):
    """The library that exports the legacy convolution API, loaded after PyTorch's own cuDNN."""
    torch.backends.cudnn.version()  # makes PyTorch load its cuDNN first
    names = ["libcudnn.so.9", "libcudnn_cnn.so.9", "libcudnn.so.8", "libcudnn_cnn_infer.so.8"]
    roots = [
        os.path.dirname(p)
        for p in glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "cudnn", "lib", "*"))
    ]
    errors = []
    for name in names:
        for candidate in [name] + [os.path.join(root, name) for root in sorted(set(roots))]:
            try:
                lib = ctypes.CDLL(candidate, mode=ctypes.RTLD_GLOBAL)
                lib.cudnnConvolutionBackwardFilter  # noqa: B018 - the symbol must exist
                return lib, candidate
            except (OSError, AttributeError) as exc:
                errors.append(f"{candidate}: {exc}")
    raise OSError("no cuDNN with the legacy convolution API: " + "; ".join(errors[-4:]))


class Cudnn:
    """The few legacy cuDNN calls a convolution by algorithm needs."""

    def __init__(self, torch):
        self.lib, self.path = _load_cudnn(torch)
        self.lib.cudnnGetErrorString.restype = ctypes.c_char_p
        self.handle = ctypes.c_void_p()
        self.check(self.lib.cudnnCreate(ctypes.byref(self.handle)), "cudnnCreate")
        stream = torch.cuda.current_stream().cuda_stream
        self.check(self.lib.cudnnSetStream(self.handle, ctypes.c_void_p(stream)), "cudnnSetStream")

    def check(self, status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"{what}: status {status} {self.lib.cudnnGetErrorString(status).decode()}")

    def tensor(self, dtype: int, shape) -> ctypes.c_void_p:
        desc = ctypes.c_void_p()
        self.check(self.lib.cudnnCreateTensorDescriptor(ctypes.byref(desc)), "cudnnCreateTensorDescriptor")
        self.check(
            self.lib.cudnnSetTensor4dDescriptor(desc, NCHW, dtype, *map(int, shape)), "cudnnSetTensor4dDescriptor"
        )
        return desc

    def filter(self, dtype: int, shape) -> ctypes.c_void_p:
        desc = ctypes.c_void_p()
        self.check(self.lib.cudnnCreateFilterDescriptor(ctypes.byref(desc)), "cudnnCreateFilterDescriptor")
        self.check(
            self.lib.cudnnSetFilter4dDescriptor(desc, dtype, NCHW, *map(int, shape)), "cudnnSetFilter4dDescriptor"
        )
        return desc

    def convolution(self, pad: int, compute: int) -> ctypes.c_void_p:
        desc = ctypes.c_void_p()
        self.check(self.lib.cudnnCreateConvolutionDescriptor(ctypes.byref(desc)), "cudnnCreateConvolutionDescriptor")
        self.check(
            self.lib.cudnnSetConvolution2dDescriptor(desc, pad, pad, 1, 1, 1, 1, CROSS_CORRELATION, compute),
            "cudnnSetConvolution2dDescriptor",
        )
        return desc


def impulses(shape) -> np.ndarray:
    """Plan 4's operands: +1 at one position per (image, channel) pair t = n·C + c, position
    t mod (H·W) in row-major order, +0 elsewhere, so that a transform of the data reads out the
    transform's own constants (the twiddles and their products) bit for bit."""
    n, c, h, w = shape
    out = np.zeros(shape, np.float32)
    for t in range(n * c):
        out[t // c, t % c, (t % (h * w)) // w, t % w] = 1.0
    return out


def _draw(rng, shape, case: dict) -> np.ndarray:
    if case.get("operands") == "impulses":
        return impulses(shape)
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def _operand(torch, rng, shape, config: str, case: dict | None = None):
    values = _draw(rng, shape, case or {})
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}.get(config, torch.float16)
    return torch.from_numpy(values).to(dtype).cuda()


def _bits(tensor) -> np.ndarray:
    import torch

    width = {2: torch.int16, 4: torch.int32}[tensor.element_size()]
    return tensor.detach().contiguous().view(width).cpu().numpy()


def run_case(torch, cudnn: Cudnn, case: dict) -> dict:
    """One convolution by algorithm number; the npz fields (operands as bits)."""
    data_type, compute = CONFIGS[case["config"]]
    n, c, k, h, r, pad = (case[key] for key in ("n", "c", "k", "h", "r", "pad"))
    width = case.get("width", h)
    p, q = h + 2 * pad - r + 1, width + 2 * pad - r + 1
    rng = np.random.default_rng(case["seed"])
    x = _operand(torch, rng, (n, c, h, width), case["config"], case)
    w = _operand(torch, rng, (k, c, r, r), case["config"], case)
    dy = _operand(torch, rng, (n, k, p, q), case["config"], case)
    x_desc, y_desc = cudnn.tensor(data_type, x.shape), cudnn.tensor(data_type, dy.shape)
    w_desc, conv = cudnn.filter(data_type, w.shape), cudnn.convolution(pad, compute)
    lib, algo, size = cudnn.lib, case["algo"], ctypes.c_size_t(0)
    pass_ = case["pass_"]
    if pass_ == "fprop":
        status = lib.cudnnGetConvolutionForwardWorkspaceSize(
            cudnn.handle, x_desc, w_desc, conv, y_desc, algo, ctypes.byref(size)
        )
        out = torch.empty_like(dy)
    elif pass_ == "dgrad":
        status = lib.cudnnGetConvolutionBackwardDataWorkspaceSize(
            cudnn.handle, w_desc, y_desc, conv, x_desc, algo, ctypes.byref(size)
        )
        out = torch.empty_like(x)
    else:
        status = lib.cudnnGetConvolutionBackwardFilterWorkspaceSize(
            cudnn.handle, x_desc, y_desc, conv, w_desc, algo, ctypes.byref(size)
        )
        out = torch.empty_like(w)
    cudnn.check(status, f"workspace size of {pass_} algorithm {algo}")
    alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
    fields = {"case": json.dumps(case), "workspace_size": size.value}
    outputs = []
    for attempt in range(2):
        workspace = torch.full((max(size.value, 1),), 255, dtype=torch.uint8, device="cuda")
        out.fill_(float("nan"))
        ws = ctypes.c_void_p(workspace.data_ptr())

        def call(ws=ws):
            if pass_ == "fprop":
                args = (cudnn.handle, ctypes.byref(alpha), x_desc, ptr(x), w_desc, ptr(w), conv, algo, ws, size,
                        ctypes.byref(beta), y_desc, ptr(out))  # fmt: skip
                return lib.cudnnConvolutionForward(*args)
            if pass_ == "dgrad":
                args = (cudnn.handle, ctypes.byref(alpha), w_desc, ptr(w), y_desc, ptr(dy), conv, algo, ws, size,
                        ctypes.byref(beta), x_desc, ptr(out))  # fmt: skip
                return lib.cudnnConvolutionBackwardData(*args)
            args = (cudnn.handle, ctypes.byref(alpha), x_desc, ptr(x), y_desc, ptr(dy), conv, algo, ws, size,
                    ctypes.byref(beta), w_desc, ptr(out))  # fmt: skip
            return lib.cudnnConvolutionBackwardFilter(*args)

        torch.cuda.synchronize()
        if attempt == 0:
            cudnn.check(call(), f"{pass_} algorithm {algo}")
            torch.cuda.synchronize()
            keep = WORKSPACE_KEEP if case.get("keep_workspace", True) else 0
            fields["workspace"] = workspace[:keep].cpu().numpy()
        else:
            activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
            with torch.profiler.profile(activities=activities) as prof:
                cudnn.check(call(), f"{pass_} algorithm {algo}")
                torch.cuda.synchronize()
            fields["kernels"] = np.array(_kernel_names(prof))
        outputs.append(_bits(out))
    fields.update(x=_bits(x), w=_bits(w), dy=_bits(dy), out=outputs[0])
    fields["repeat_differs"] = int(np.count_nonzero(outputs[0] != outputs[1]))
    reference = {"fprop": lambda: torch.nn.functional.conv2d(x.double(), w.double(), padding=pad),
                 "dgrad": lambda: torch.nn.grad.conv2d_input(x.shape, w.double(), dy.double(), padding=pad),
                 "wgrad": lambda: torch.nn.grad.conv2d_weight(x.double(), w.shape, dy.double(), padding=pad)}[pass_]()  # fmt: skip
    fields["max_abs_error"] = float((out.double() - reference).abs().max())
    return fields


def ptr(tensor) -> ctypes.c_void_p:
    return ctypes.c_void_p(tensor.data_ptr())


def _kernel_names(prof) -> list[str]:
    names = []
    for event in prof.events():
        if str(getattr(event, "device_type", "")).endswith("CUDA") and event.name not in names:
            names.append(event.name)
    return names


def _add(tar, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(f"cudnn_algos/{name}")
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def device_main(out: Path, deadline_s: float, plan_number: int = 1) -> int:
    import torch

    start = time.time()
    cudnn = Cudnn(torch)
    lines = [f"cuDNN {torch.backends.cudnn.version()} from {cudnn.path}"]
    out.mkdir(parents=True, exist_ok=True)
    for config in CONFIGS:  # one archive per configuration: each file that comes back is 16 MB at most
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w:gz") as tar:
            for case in (case for case in cases(plan_number) if case["config"] == config):
                if time.time() - start > deadline_s:
                    lines.append(f"DEADLINE {case['name']}")
                    continue
                try:
                    fields = run_case(torch, cudnn, case)
                except Exception as exc:  # noqa: BLE001 - one refused algorithm must not stop the rest
                    lines.append(f"FAIL {case['name']} {type(exc).__name__}: {str(exc)[:200]}")
                    if "status" not in str(exc):
                        lines.append(traceback.format_exc()[-800:])
                    continue
                if archive.tell() > WORKSPACE_BUDGET:
                    fields["workspace"] = fields["workspace"][:0]  # the archive is full: outputs only
                buffer = io.BytesIO()
                np.savez_compressed(buffer, **fields)
                _add(tar, f"{case['name']}.npz", buffer.getvalue())
                kernels = "; ".join(name[:90] for name in fields["kernels"])
                lines.append(
                    f"OK {case['name']} ws={fields['workspace_size']} kept={fields['workspace'].size} "
                    f"err={fields['max_abs_error']:.3g} differs={fields['repeat_differs']} {kernels}"
                )
        (out / f"cudnn_algos{'' if plan_number == 1 else plan_number}_{config}.tar.gz").write_bytes(archive.getvalue())
    session = session_summary(torch, lines, start)
    (out / "log.txt").write_text("\n".join(lines) + "\n")
    (out / "session.json").write_text(json.dumps(session, indent=1) + "\n")
    print(json.dumps(session, indent=1))
    print("\n".join(lines))
    return 0


def operand_bits(case: dict) -> dict[str, np.ndarray]:
    """A case's operands x, w, dy as the bits the GPU was given (int32 for fp32, int16 for fp16
    and bf16), drawn again from its seed as :func:`run_case` draws them (uniform in [-1, 1) in
    float32, then rounded to nearest-even to the operand type with ml_dtypes)."""
    import ml_dtypes

    n, c, k, h, r, pad = (case[key] for key in ("n", "c", "k", "h", "r", "pad"))
    width = case.get("width", h)
    p, q = h + 2 * pad - r + 1, width + 2 * pad - r + 1
    rng = np.random.default_rng(case["seed"])
    dtype = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}.get(case["config"], np.float16)
    out = {}
    for key, shape in (("x", (n, c, h, width)), ("w", (k, c, r, r)), ("dy", (n, k, p, q))):
        values = _draw(rng, shape, case).astype(dtype)
        out[key] = values.view(np.int32 if dtype is np.float32 else np.int16)
    return out


def trim_main(source: Path, dest: Path, keep_workspace: list[str]) -> int:
    """The archive that goes into the project's test data: every npz of ``source`` (a folder of
    this script's captures) with its operands replaced by their sha256 (``operand_bits`` draws
    them again) and its workspace dropped unless its case is named in ``keep_workspace``."""
    import hashlib

    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz") as tar:
        for path in sorted(source.glob("*.npz")):
            with np.load(path) as z:
                fields = {key: z[key] for key in z.files}
            case = json.loads(str(fields["case"]))
            for key, bits in operand_bits(case).items():
                if not np.array_equal(bits, fields.pop(key)):
                    raise SystemExit(f"{path.name}: operand {key} does not match its seed's draw")
                fields[f"{key}_sha256"] = np.array(hashlib.sha256(bits.tobytes()).hexdigest())
            if path.stem not in keep_workspace:
                fields["workspace"] = fields["workspace"][:0]
            buffer = io.BytesIO()
            np.savez_compressed(buffer, **fields)
            _add(tar, path.name, buffer.getvalue())
        for name in ("log.txt", "session.json"):
            if (source / name).exists():
                _add(tar, name, (source / name).read_bytes())
    dest.write_bytes(archive.getvalue())
    print(f"{dest}: {dest.stat().st_size} bytes")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    device = sub.add_parser("device", help="run the plan on the GPU (numpy, PyTorch, cuDNN)")
    device.add_argument("--out", type=Path, required=True)
    device.add_argument("--deadline", type=float, default=240.0, help="seconds after which cases are skipped")
    device.add_argument(
        "--plan", type=int, default=1, choices=(1, 2, 3), help="1: the fixed shapes; 2: random shapes; 3: FFT"
    )
    trim = sub.add_parser("trim", help="the test-data archive: operands as sha256, few workspaces")
    trim.add_argument("source", type=Path, help="a folder of this script's npz files")
    trim.add_argument("dest", type=Path)
    trim.add_argument("--keep-workspace", nargs="*", default=[], help="case names whose workspace is kept")
    args = parser.parse_args(argv)
    if args.command == "trim":
        return trim_main(args.source, args.dest, args.keep_workspace)
    return device_main(args.out, args.deadline, args.plan)


if __name__ == "__main__":
    raise SystemExit(main())
