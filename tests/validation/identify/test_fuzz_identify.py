"""Property-based fuzz of identify's inputs and of the capture format (issue 31).

identify's rows: hypothesis-made probe-result ``.npz`` files (members a, b, c, d of random dtypes
and shapes, extra or missing members, stored or deflated, possibly cut short or with a byte
changed) and CSV files (hex, binary, negative, over-wide and junk words, ragged rows, random
bytes). Library captures: ``.npz`` captures with every field of the format drawn (op, operands,
out, stride/padding/dilation/groups, the text and JSON-like metadata members gpu, torch, kernels,
memory_format, alpha, beta, ``*_sha256``/seed of an omitted-operand capture), the same damage.

Each input is read by the library's loader (load_rows / load_capture): it is a valid object or a
one-line ValueError/TypeError; when refused, ``fp16emu identify FILE`` must answer exit 2 with one
line on stderr and no traceback. No input may take ``BOUND_S`` or more (a hang fails). The valid
ones are not searched (that is the search's own tests' work: this target is about the reading).
"""

import contextlib
import io
import time
import zipfile

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzzing import fuzz, tally, write_report
from validation.captures import load_capture
from validation.cli import main
from validation.identify.rows import load_rows


@pytest.fixture(scope="module", autouse=True)
def _report_counts():
    yield
    write_report()


def _cli_refuses(path):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["identify", str(path)])
    err = err.getvalue()
    assert code == 2, (code, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err


DTYPES = ["<u2", "<u4", "<f2", "<f4", "<i8", "|b1", "<u8", ">u2", "<c8"]


@st.composite
def arrays(draw, shape_of=None):
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = shape_of or tuple(draw(st.lists(st.integers(0, 5), max_size=3)))
    n = int(np.prod(shape))
    raw = draw(st.binary(min_size=n * dtype.itemsize, max_size=n * dtype.itemsize))
    return np.frombuffer(raw, dtype).reshape(shape)


def _npz(members: dict, compress: bool) -> bytes:
    bio = io.BytesIO()
    with zipfile.ZipFile(bio, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as z:
        for name, a in members.items():
            m = io.BytesIO()
            np.save(m, a, allow_pickle=False)
            z.writestr(f"{name}.npy", m.getvalue())
    return bio.getvalue()


@st.composite
def damage(draw, data: bytes) -> bytes:
    how = draw(st.sampled_from(["none", "none", "cut", "byte", "append"]))
    if how == "cut" and data:
        return data[: draw(st.integers(0, len(data) - 1))]
    if how == "byte" and data:
        i = draw(st.integers(0, len(data) - 1))
        return data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1 :]
    if how == "append":
        return data + draw(st.binary(max_size=16))
    return data


@st.composite
def rows_npz(draw):
    R, K = draw(st.integers(0, 4)), draw(st.integers(0, 20))
    good = {
        "a": np.full((R, K), 0x3C00, np.uint16),
        "b": np.full((R, K), 0x3C00, np.uint16),
        "c": np.zeros(R, np.uint32),
        "d": np.full(R, np.float32(K).view(np.uint32), np.uint32),
    }
    members = {}
    for name in draw(st.lists(st.sampled_from(["a", "b", "c", "d", "category", "x"]), unique=True, max_size=6)):
        members[name] = good.get(name, np.zeros(R, np.uint16)) if draw(st.booleans()) else draw(arrays())
    return draw(damage(_npz(members, draw(st.booleans()))))


WORDS = st.one_of(
    st.integers(0, 0xFFFF).map(lambda w: f"{w:04x}"),
    st.integers(0, 2**32 - 1).map(lambda w: f"{w:08x}"),
    st.integers(0, 2**32 - 1).map(lambda w: f"{w:032b}"),
    st.integers(-(2**80), 2**80).map(lambda w: f"{w:x}"),
    st.sampled_from(["0x3c00", "-1", "zz", "", "1_0", "+3c00", "3c00\x00", "ffffffffffffffffffff", "３"]),
)


@st.composite
def rows_csv(draw):
    header = draw(st.sampled_from(["a,b,c,d", "a,b,c", "d,c,b,a", "a,b,c,d,e", ""]))
    lines = [header]
    for _ in range(draw(st.integers(0, 3))):
        k = draw(st.integers(0, 3))
        cols = [" ".join(draw(st.lists(WORDS, min_size=k, max_size=k))) for _ in range(2)]
        cols += [draw(WORDS), draw(WORDS)]
        lines.append(",".join(cols[: draw(st.integers(3, 5))]))
    text = "\n".join(lines).encode("utf-8", "surrogatepass")
    return draw(st.one_of(st.just(text), st.binary(max_size=64), damage(text)))


@fuzz(20)
@given(content=st.one_of(rows_npz(), rows_csv()), suffix=st.sampled_from([".npz", ".csv", ".txt"]))
def test_identify_reads_any_rows_file_or_refuses_it_in_one_line(tmp_path_factory, content, suffix):
    path = tmp_path_factory.mktemp("rows") / f"rows{suffix}"
    path.write_bytes(content)
    t0 = time.perf_counter()
    try:
        rows = load_rows(path)
    except (ValueError, TypeError) as err:
        msg = str(err)
        assert msg and "\n" not in msg, msg
        answer = "refused (one line)"
        _cli_refuses(path)
    else:
        assert rows.a.dtype == np.uint16 and rows.a.shape == rows.b.shape and len(rows) >= 1
        answer = "read"
    tally(f"identify rows ({'npz' if content[:2] == b'PK' else 'other'})", answer, time.perf_counter() - t0)


OPS = [
    "mm",
    "addmm",
    "bmm",
    "baddbmm",
    "matmul",
    "linear",
    "conv2d",
    "conv2d_bwd_data",
    "conv2d_bwd_weight",
    "gemm",
    "",
]
TEXT = st.one_of(st.text(max_size=12), st.sampled_from(["NVIDIA H200", "AMD Instinct MI300X", "contiguous"]))


def _meta(draw):
    """The capture's text and JSON-like metadata members, each drawn as a string, a number, a list
    or an array of another kind."""
    value = st.one_of(
        TEXT.map(np.asarray),
        st.lists(TEXT, max_size=3).map(lambda x: np.asarray(x, dtype=str)),
        st.floats(allow_nan=True, allow_infinity=True).map(np.float64),
        st.lists(st.integers(-3, 3), max_size=4).map(lambda x: np.asarray(x, np.int64)),
    )
    names = ["gpu", "torch", "kernels", "memory_format", "alpha", "beta", "groups", "stride", "padding", "dilation"]
    names += ["input_shape", "weight_shape", "seed", "A_sha256", "spec", "batch"]
    return {n: draw(value) for n in draw(st.lists(st.sampled_from(names), unique=True, max_size=6))}


@st.composite
def captures(draw):
    M, K, N = draw(st.integers(0, 3)), draw(st.integers(0, 4)), draw(st.integers(0, 3))
    members = {"op": np.asarray(draw(st.sampled_from(OPS)))}
    good = {
        "A": np.ones((M, K), np.float16),
        "B": np.ones((K, N), np.float16),
        "C": np.zeros((M, N), np.float32),
        "out": np.full((M, N), K, np.float32),
        "input": np.ones((1, 2, 3, 3), np.float16),
        "weight": np.ones((2, 2, 1, 1), np.float16),
        "grad_output": np.ones((1, 2, 3, 3), np.float16),
    }
    for name in draw(st.lists(st.sampled_from(sorted(good)), unique=True, max_size=7)):
        members[name] = good[name] if draw(st.booleans()) else draw(arrays())
    members.update(_meta(draw))
    return draw(damage(_npz(members, draw(st.booleans()))))


@fuzz(20)
@given(content=captures())
def test_a_capture_is_read_or_refused_in_one_line(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("cap") / "cap.npz"
    path.write_bytes(content)
    t0 = time.perf_counter()
    try:
        cap = load_capture(path)
    except (ValueError, TypeError) as err:
        msg = str(err)
        assert msg and "\n" not in msg, msg
        answer = "refused (one line)"
        if content[:4] == b"PK\x03\x04" and b"op.npy" in content:
            _cli_refuses(path)
    else:
        assert cap.out.size > 0
        answer = "read"
    tally("capture (npz and metadata)", answer, time.perf_counter() - t0)
