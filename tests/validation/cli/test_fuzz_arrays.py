"""Property-based fuzzing (hypothesis) of the arrays users hand fp16emu (issue 13): .npy files
(numpy's own, of any dtype and order, and hand-made headers with odd versions, lengths, dtypes,
shapes), .npz archives with random keys, and raw dumps of random sizes, each possibly truncated,
extended or with bytes changed, fed to ``fp16emu compare`` (with random ``--dtype``,
``--validation-dtype``, ``--shape`` and ``--verifier``) and to ``fp16emu run --gpu-output`` on a
tiny config (with random ``--gpu-output-format`` and ``--layout``).

Every input ends in exit 0, 1 or 2 (2: one line on stderr, ``fp16emu COMMAND: error: …``), never a
traceback or an escaped exception, in bounded time (``tests.fuzzing.BOUND_S``) and bounded
memory (the Python and numpy allocations traced while it runs stay under ``BOUND_MIB``: the
files are at most a few kB, so a header that makes the loader allocate what it claims would
break it). ``make fuzz`` runs ``FP16EMU_FUZZ_SCALE`` times the examples.
"""

import functools
import io
import time
import tracemalloc
import warnings
import zipfile

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzzing import fuzz, tally, write_report
from validation.cli import main

BOUND_MIB = 64
TINY = "--operation conv2d -t f16 -batchsize=1 -in_channels=4 -out_channels=4 -in_h=4 -in_w=4 -fil_h=3 -fil_w=3"
TINY_N = 16  # its output: 1x1x4x2x2 (ngkhw)


@pytest.fixture(scope="module", autouse=True)
def _report_counts():
    # the tiny run's kernels compiled before any input is measured: on an empty numba cache the
    # first example paid the compile (122 s, 632 MiB traced) whatever its file held
    good()
    yield
    write_report()


# --- files ---------------------------------------------------------------------------------------

DTYPES = ["<f2", "<f4", "<f8", "<u2", ">f2", ">f4", "<i4", "|u1", "|b1", "<c8", "<i8", np.dtype(np.longdouble).str]
DESCRS = DTYPES + ["|O", "<V4", "[('a', '<f2')]", "('<f2', (2,))", "<f2 ", "", "bfloat16", "<M8[s]", "<U3", "?"]
SHAPE_TEXTS = st.one_of(
    st.lists(st.integers(0, 6), max_size=4).map(lambda s: repr(tuple(s))),
    st.lists(st.integers(-(2**70), 2**70), min_size=1, max_size=3).map(lambda s: repr(tuple(s))),
    st.sampled_from(["()", "(16,)", "(2, 2, 2, 2)", "[16]", "(-1,)", "(1.5,)", "None", "(True,)", "('a',)", "(16"]),
)


def _npy_header(descr: str, fortran: str, shape: str, version: tuple, extra: str, length_delta: int) -> bytes:
    d = f"{{'descr': {descr!r}, 'fortran_order': {fortran}, 'shape': {shape}, {extra}}}".encode()
    if descr.startswith(("[", "(")):  # a structured or subarray descr is a Python literal, not a string
        d = d.replace(repr(descr).encode(), descr.encode())
    pad = 64 - (len(d) + 13) % 64
    d = d + b" " * pad + b"\n"
    width = 2 if version == (1, 0) else 4
    return b"\x93NUMPY" + bytes(version) + (len(d) + length_delta).to_bytes(width, "little", signed=True) + d


@st.composite
def saved_npy(draw):
    """numpy's own .npy of a random little array (any dtype, C or Fortran order)."""
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = tuple(draw(st.lists(st.integers(0, 5), max_size=4)))
    n = int(np.prod(shape))
    raw = draw(st.binary(min_size=n * dtype.itemsize, max_size=n * dtype.itemsize))
    a = np.frombuffer(raw, dtype).reshape(shape)
    if draw(st.booleans()):
        a = np.asfortranarray(a)
    bio = io.BytesIO()
    np.save(bio, a, allow_pickle=False)
    return bio.getvalue()


@st.composite
def handmade_npy(draw):
    header = _npy_header(
        draw(st.sampled_from(DESCRS)),
        draw(st.sampled_from(["False", "True", "1", "None", "'no'"])),
        draw(SHAPE_TEXTS),
        draw(st.sampled_from([(1, 0), (2, 0), (3, 0), (0, 0), (9, 9)])),
        draw(st.sampled_from(["", "'extra': 1, ", "'descr': '<f4', "])),
        draw(st.sampled_from([0, 0, 0, -1, 1, -30, 10**4])),
    )
    return header + draw(st.binary(max_size=80))


@st.composite
def npz_files(draw):
    """An .npz (stored or deflated) with 1-3 arrays under random keys, and the ``:KEY`` asked."""
    keys = draw(st.lists(st.text(alphabet="abcxyz_019.:/ \u00e9", min_size=1, max_size=6), min_size=1, max_size=3))
    arrays = {k: np.frombuffer(draw(st.binary(min_size=32, max_size=32)), np.float16) for k in keys}
    bio = io.BytesIO()
    (np.savez_compressed if draw(st.booleans()) else np.savez)(bio, **arrays)
    ask = draw(st.one_of(st.none(), st.sampled_from(keys), st.text(max_size=4)))
    return bio.getvalue(), ask


@functools.cache
def good() -> np.ndarray:
    """The values a valid input holds: the tiny config's emulated kernel output (16 fp16 values),
    so that a valid --gpu-output is "identical" and a valid compare passes."""
    from validation.run import run

    return np.asarray(run(TINY, progress=False).kernel_output, np.float16).reshape(-1)


@st.composite
def good_files(draw):
    """GOOD as numpy's .npy (fp16, fp32, fp64, uint16 bits; any of its shapes), an .npz member, or
    a raw fp16 dump, and the ``:KEY`` to ask."""
    shape = draw(st.sampled_from([(16,), (2, 2, 2, 2), (4, 4), (1, 1, 4, 2, 2)]))
    a = good().reshape(shape)
    container = draw(st.sampled_from(["<f2", "<f4", "<f8", "<u2", "npz", "raw"]))
    if container == "raw":
        return a.tobytes(), None
    bio = io.BytesIO()
    if container == "npz":
        np.savez(bio, out=a)
        return bio.getvalue(), draw(st.sampled_from([None, "out"]))
    np.save(bio, a.view(np.uint16) if container == "<u2" else a.astype(container))
    return bio.getvalue(), None


def _mutate(draw, data: bytes) -> bytes:
    data = bytearray(data)
    for _ in range(draw(st.integers(0, 3))):
        action = draw(st.sampled_from(["flip", "truncate", "insert", "none"]))
        pos = draw(st.integers(0, len(data)))
        if action == "flip" and pos < len(data):
            data[pos] = draw(st.integers(0, 255))
        elif action == "truncate":
            data = data[:pos]
        elif action == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
    return bytes(data)


@st.composite
def array_files(draw):
    """(bytes of a file, ``:KEY`` to ask or None, what kind it was made as)."""
    kind = draw(st.sampled_from(["npy", "npy", "handmade npy", "npz", "raw", "raw fp16 x16", "good"]))
    key = None
    if kind == "good":  # the other side's values, in any container: a valid input, mostly exit 0
        data, key = draw(good_files())
    elif kind == "npy":
        data = draw(saved_npy())
    elif kind == "handmade npy":
        data = draw(handmade_npy())
    elif kind == "npz":
        data, key = draw(npz_files())
    elif kind == "raw":
        data = draw(st.binary(max_size=200))
    else:
        data = draw(st.binary(min_size=2 * TINY_N, max_size=2 * TINY_N))
    if draw(st.integers(0, 2)) == 0:
        data = _mutate(draw, data)
    return data, key, kind


def _write(tmp, data: bytes, key, suffix: str) -> str:
    path = tmp / f"fuzzed{suffix}"
    path.write_bytes(data)
    return str(path) + ("" if key is None else f":{key}")


# --- the answers -------------------------------------------------------------------------------------


def _cli(capsys, argv, target, bound_s=5.0):
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            code = main(argv)
    finally:
        seconds = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    out, err = capsys.readouterr()
    assert code in (0, 1, 2), (argv, code, err)
    assert "Traceback" not in err and "Traceback" not in out, (argv, err)
    if code == 2:
        assert err.startswith(f"fp16emu {argv[0]}: error:") and err.count("\n") == 1, (argv, err)
    else:
        assert out, argv
    assert peak < BOUND_MIB << 20, f"{argv}: {peak / 2**20:.0f} MiB traced"
    tally(target, f"exit {code}", seconds, bound_s)
    return code, err


FORMATS = st.sampled_from([None, "fp16", "bf16", "fp32", "fp64", ""])
SHAPES = st.one_of(
    st.none(),
    st.sampled_from(["16", "2,2,2,2", "4x4", "1,1,4,2,2", "0", "-1", "", "a", ",", "2,,8", f"{2**40},{2**40}"]),
    st.lists(st.integers(-2, 40), min_size=1, max_size=4).map(lambda s: ",".join(map(str, s))),
)


@fuzz(150)
@given(
    file=array_files(),
    suffix=st.sampled_from([".npy", ".npz", ".bin", ""]),
    fuzzed_is_kernel=st.booleans(),
    other=st.sampled_from(["float32 2x2x2x2", "float16 flat 16", "raw fp16 16", "raw fp32 16"]),
    dtype=FORMATS,
    validation_dtype=FORMATS,
    shape=SHAPES,
    verifier=st.sampled_from([None, "rocmlir", "rocmlir-2022", "study-2022", "torch", "nope"]),
)
def test_compare_on_any_array_file_exits_0_1_or_2_with_one_line(
    capsys, tmp_path_factory, file, suffix, fuzzed_is_kernel, other, dtype, validation_dtype, shape, verifier
):
    tmp = tmp_path_factory.mktemp("cmp")
    data, key, _ = file
    fuzzed = _write(tmp, data, key, suffix)
    good_values = good()
    if other.startswith("raw"):
        good_values.astype(np.float16 if "fp16" in other else np.float32).tofile(tmp / "good.bin")
        good_path = str(tmp / "good.bin")
    else:
        np.save(
            tmp / "good.npy",
            good_values.astype(np.float32).reshape(2, 2, 2, 2) if "2x2" in other else good_values,
        )
        good_path = str(tmp / "good.npy")
    pair = [good_path, fuzzed] if fuzzed_is_kernel else [fuzzed, good_path]
    argv = ["compare", *pair]
    for option, value in (("--dtype", dtype), ("--validation-dtype", validation_dtype), ("--shape", shape)):
        if value is not None:
            argv += [option, value]
    if verifier is not None:
        argv += ["--verifier", verifier]
    _cli(capsys, argv, "fp16emu compare (array files)")


@fuzz(60)
@given(
    file=array_files(),
    suffix=st.sampled_from([".npy", ".npz", ".bin"]),
    fmt=st.sampled_from([None, None, "fp16", "fp32", "bf16"]),
    layout=st.sampled_from([None, None, "ngkhw", "nchw", "nhwk", "nkhw", "nhwc", "xyz", "nnnn", ""]),
)
def test_run_gpu_output_on_any_array_file_exits_0_1_or_2_with_one_line(
    capsys, tmp_path_factory, file, suffix, fmt, layout
):
    tmp = tmp_path_factory.mktemp("gpu")
    data, key, _ = file
    argv = ["run", TINY, "--no-progress", "--search-budget", "0", "--gpu-output", _write(tmp, data, key, suffix)]
    if fmt is not None:
        argv += ["--gpu-output-format", fmt]
    if layout is not None:
        argv += ["--layout", layout]
    # the run computes the tiny problem each time: 0.1 s alone, seconds on a loaded 2-core machine
    _cli(capsys, argv, "fp16emu run --gpu-output (array files)", bound_s=30.0)


def test_the_file_strategies_make_what_they_say():
    """The strategies' good cases are read as arrays (the fuzz is not all refusals): numpy's own
    .npy of an allowed dtype and an .npz member load; so does a raw fp16 dump of the tiny output."""
    from validation.run.arrays import load_array

    buf = io.BytesIO()
    np.save(buf, np.arange(4, dtype="<f4"))
    assert load_array(_write_tmp(buf.getvalue(), ".npy"), "X").array.tolist() == [0, 1, 2, 3]
    buf = io.BytesIO()
    np.savez_compressed(buf, **{"a.b": np.ones(2, np.float16)})
    assert load_array(_write_tmp(buf.getvalue(), ".npz") + ":a.b", "X").array.tolist() == [1, 1]
    raw = np.arange(TINY_N, dtype=np.float16).astype(ml_dtypes.bfloat16).tobytes()
    got = load_array(_write_tmp(raw, ".bin"), "X", raw_format="bf16", count=TINY_N).array
    assert got.astype(np.float32).tolist() == list(range(TINY_N))
    assert zipfile.is_zipfile(io.BytesIO(buf.getvalue()))


def _write_tmp(data: bytes, suffix: str) -> str:
    import tempfile

    fd, path = tempfile.mkstemp(suffix=suffix)
    with open(fd, "wb") as fh:
        fh.write(data)
    return path
