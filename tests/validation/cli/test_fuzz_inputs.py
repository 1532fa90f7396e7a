"""Property-based fuzz of the inputs issue 41 hardened (items 5-10, 12): the fields that describe
a capture's omitted operands, run's counts and judging options (``--check`` and the run's own
checks agree), ``design --validators`` files, the checked JSON reader, identify's CSV rows, and
what a server that is not a Dask scheduler answers. Every input ends in a clear answer (a value,
or one line naming the field; exit 0 or 2 for the CLI) within ``BOUND_S`` seconds.

Sized to run in well under a minute inside ``make test``; ``make fuzz`` runs it with
``FP16EMU_FUZZ_SCALE`` times more examples and writes the counts RELIABILITY.md quotes."""

import contextlib
import json
import os
import socket
import threading
import time
from unittest import mock

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.fuzzing import fuzz, tally, write_report
from validation.captures import load_capture
from validation.captures.format import generate_operands, operand_digest
from validation.cli import main
from validation.configs import ConfigError
from validation.design.functions import load_functions
from validation.engine import check_scheduler
from validation.files import UserFileError, parse_json
from validation.identify.rows import load_rows


@pytest.fixture(scope="module", autouse=True)
def _report_counts():
    yield
    write_report()


JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
)
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=12,
)
SHAPE = st.lists(st.integers(-2, 6), min_size=0, max_size=5)
SHAPES_TEXT = st.one_of(
    st.dictionaries(st.sampled_from(["A", "B", "C", "bias", "x"]), st.one_of(SHAPE, JSON_VALUE), max_size=3).map(
        json.dumps
    ),
    JSON_VALUE.map(json.dumps),
    st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),
    st.text(max_size=20),
    st.just('{"A": [4096, 4096], "B": [4096, 4096]}'),
)


def _field_array(value):
    return st.one_of(
        st.just(np.asarray(value)),
        st.lists(st.integers(-3, 3), max_size=3).map(lambda x: np.asarray(x, np.int64)),
        st.floats(allow_nan=True).map(np.float64),
        st.text(max_size=5).map(np.asarray),
    )


@st.composite
def omitted_captures(draw):
    spec = {"op": "mm", "dtype": "float16", "seed": 1, "range": [-1.0, 1.0], "shapes": {"A": [2, 3], "B": [3, 2]}}
    ops = generate_operands(spec)
    fields = {
        "op": "mm",
        "dtype": "float16",
        "seed": np.int64(1),
        "range": np.asarray([-1.0, 1.0]),
        "shapes": np.asarray(json.dumps(spec["shapes"])),
        "A_sha256": np.asarray(operand_digest(ops["A"])),
        "B_sha256": np.asarray(operand_digest(ops["B"])),
        "out": np.zeros((2, 2), np.float16),
    }
    for name in draw(st.lists(st.sampled_from(["shapes", "spec", "range", "dtype", "seed", "op"]), max_size=3)):
        if name in ("shapes", "spec"):
            fields[name] = np.asarray(draw(SHAPES_TEXT))
        else:
            fields[name] = draw(_field_array(fields.get(name, 0)))
    if draw(st.booleans()):
        fields["groups"] = draw(_field_array(1))
    return fields


@fuzz(25)
@given(fields=omitted_captures())
def test_omitted_operand_fields_are_read_or_named(tmp_path_factory, fields):
    path = tmp_path_factory.mktemp("om") / "cap.npz"
    with open(path, "wb") as fh:
        np.savez(fh, **fields)
    t0 = time.perf_counter()
    try:
        with mock.patch.dict(os.environ, {"FP16EMU_MAX_MEMORY_GIB": "0.05"}):  # 4096² draws: refused, not drawn
            load_capture(path)
        answer = "read"
    except (ValueError, TypeError) as err:
        msg = str(err)
        assert msg and "\n" not in msg and len(msg) < 600, msg
        answer = "refused (one line)"
    tally("capture omitted-operand fields", answer, time.perf_counter() - t0)


COUNT = st.one_of(st.integers(-3, 10_000).map(str), st.sampled_from(["1e9", "nan", "-0", "4097", "2.5", ""]))
RUN_OPTIONS = st.lists(
    st.one_of(
        st.tuples(st.just("--members"), COUNT),
        st.tuples(st.just("--search-budget"), st.sampled_from(["-1", "nan", "inf", "0", "60", "3600", "3601", "1e9"])),
        st.tuples(
            st.just("--threshold"),
            st.sampled_from(["rms=-1", "rms=nan", "nope=1", "RMS=1", "absDiff=0", "rms", "=1", "max_abs_diff=inf"]),
        ),
        st.tuples(st.just("--verifier"), st.sampled_from(["nope", "rocmlir", "study-2022", "torch", ""])),
        st.tuples(st.just("--layout"), st.sampled_from(["zzzz", "gkcyx", "kcyx", "kyxc", "", "nchw"])),
        st.tuples(st.just("--validator"), st.sampled_from(["cpu+flush+flush", "cpu+flush", "gpu+inbounds", "cpu+x"])),
        st.tuples(st.just("--rand-min"), st.integers(-40000, 40000).map(str)),
        st.tuples(st.just("--rand-max"), st.integers(-40000, 40000).map(str)),
    ),
    max_size=4,
)
SPLIT = "conv2d_host_validation_f16_bwd_CHECK_ISSUE_71_2"


@fuzz(40)
@given(options=RUN_OPTIONS)
def test_run_check_answers_counts_and_judging_options_in_one_line(capsys, options):
    argv = ["run", SPLIT, "--check", *[w for pair in options for w in pair]]
    t0 = time.perf_counter()
    code = main(argv)
    seconds = time.perf_counter() - t0
    out, err = capsys.readouterr()
    assert code in (0, 2), (code, err)
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("fp16emu run: error: ") and "Traceback" not in err, err
    tally("run --check counts and judging options", f"exit {code}", seconds)


VALIDATOR_TEXT = st.one_of(
    st.builds(
        lambda metrics, extra: json.dumps({"name": "x", "metrics": metrics, **extra}),
        st.dictionaries(st.sampled_from(["rms", "max_abs_diff", "nope", "max_rel_diff"]), JSON_VALUE, max_size=3),
        st.dictionaries(st.sampled_from(["generator", "range", "round_validation", "other"]), JSON_VALUE, max_size=2),
    ),
    JSON_VALUE.map(json.dumps),
    st.sampled_from(['{"name": "x", "metrics": {"rms": NaN}}', '{"metrics": {"rms": Infinity}}', "[" * 5000]),
    st.text(max_size=40),
)


@fuzz(30)
@given(text=VALIDATOR_TEXT, suffix=st.sampled_from([".json", ".toml"]))
def test_a_validators_file_is_read_or_refused_in_one_line(tmp_path_factory, text, suffix):
    path = tmp_path_factory.mktemp("val") / f"v{suffix}"
    path.write_text(text)
    t0 = time.perf_counter()
    try:
        load_functions(path)
        answer = "read"
    except ValueError as err:
        assert str(err) and "\n" not in str(err), str(err)
        answer = "refused (one line)"
    tally("design --validators file", answer, time.perf_counter() - t0)


@fuzz(40)
@given(
    text=st.one_of(
        JSON_VALUE.map(json.dumps),
        st.integers(1, 200_000).map(lambda n: "[" * n),
        st.integers(1, 5000).map(lambda n: '{"a":' * n + "1" + "}" * n),
        st.text(alphabet='[]{}"\\,:1a ', max_size=200),
    )
)
def test_the_checked_json_reader_answers_in_bounded_time(text):
    t0 = time.perf_counter()
    try:
        parse_json(text, "doc")
        answer = "parsed"
    except UserFileError as err:
        assert "\n" not in str(err)
        answer = "refused (one line)"
    tally("files.parse_json", answer, time.perf_counter() - t0)


WORD = st.sampled_from(["3c00", "3c00", "0000", "zz", "", "3f800000", "x" * 200])


@fuzz(25)
@given(
    header=st.sampled_from(["a,b,c,d", "a,b,c,d", "a,b,c", "d,c,b,a", ""]),
    rows=st.lists(
        st.tuples(st.integers(1, 6), st.one_of(st.just(0), st.integers(0, 3000)), st.integers(0, 3)),
        max_size=3,
    ),
    word=WORD,
)
@example(header="a,b,c,d", rows=[(2, 0, 0), (2, 0, 0)], word="3c00")
@example(header="a,b,c,d", rows=[(1, 0, 3)], word="3c00")  # a field of 100,000 characters
def test_identify_csv_rows_of_any_width_are_read_or_refused(tmp_path_factory, header, rows, word):
    lines = [header]
    for k, extra_fields, big in rows:
        words = " ".join([word] * k * (1 + 20_000 * (big == 3)))
        lines.append(",".join([words, words, "00000000", "3f800000"] + ["x"] * extra_fields))
    path = tmp_path_factory.mktemp("csv") / "rows.csv"
    path.write_text("\n".join(lines))
    t0 = time.perf_counter()
    try:
        load_rows(path)
        answer = "read"
    except ValueError as err:
        assert "\n" not in str(err)
        answer = "refused (one line)"
    tally("identify CSV rows", answer, time.perf_counter() - t0)


@contextlib.contextmanager
def _server(reply: bytes):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with contextlib.suppress(OSError):
                conn.sendall(reply)
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        t.join(2)
        listener.close()


@fuzz(15)
@given(
    reply=st.one_of(
        st.binary(max_size=64),
        st.integers(0, 2**64 - 1).map(lambda n: n.to_bytes(8, "little") + b"pickle-protocol"),
        st.just(b"HTTP/1.1 200 OK\r\n\r\n"),
    )
)
# found by this test (session 22): a well-framed body that names pickle-protocol alone was taken for
# a Dask handshake; one names compression, python and pickle-protocol
@example(reply=(15).to_bytes(8, "little") + b"pickle-protocol")
def test_a_server_that_is_not_a_scheduler_is_named(reply):
    with _server(reply) as address:
        t0 = time.perf_counter()
        with pytest.raises(ValueError, match=r"^--scheduler tcp://127\.0\.0\.1:\d+: ") as info:
            check_scheduler(address, reach=True)
        assert "\n" not in str(info.value)
        tally("--scheduler handshake", "refused (one line)", time.perf_counter() - t0, bound_s=10.0)


def test_configerror_is_a_valueerror():  # the fuzz targets above count on it
    assert issubclass(ConfigError, ValueError)


def test_a_dask_scheduler_passes_the_handshake_check():
    """The check above refuses servers that are not Dask schedulers; a real one (a LocalCluster's
    scheduler on TCP, no workers) must pass it."""
    import logging

    pytest.importorskip("dask.distributed")
    from dask.distributed import LocalCluster

    from validation.engine import reach_scheduler

    with LocalCluster(n_workers=0, processes=True, dashboard_address=":0", silence_logs=logging.ERROR) as cluster:
        assert cluster.scheduler_address.startswith("tcp://")
        reach_scheduler(cluster.scheduler_address)  # raises ValueError if it were refused
