"""A server that accepts TCP but is not a Dask scheduler (issue 41.8): one that never answers, one
that speaks HTTP, one that sends a huge frame length or garbage, one that closes at once. ``study``
and ``design --scheduler ADDR`` answer exit 2 with one line naming the address within 10 s
(connect 3 s + handshake 5 s), never "out of memory" and never a hang."""

import contextlib
import io
import re
import socket
import threading
import time

import pytest

from validation.cli import main
from validation.engine import check_scheduler


@contextlib.contextmanager
def _server(reply):
    """A listening socket on 127.0.0.1 whose every accepted connection gets ``reply`` (bytes, or
    None: say nothing and keep the connection open; b"": close at once)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held = []
    stop = threading.Event()

    def serve():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            if reply is None:
                held.append(conn)
            else:
                with contextlib.suppress(OSError):
                    conn.sendall(reply)
                    time.sleep(0.1)
                conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        t.join(2)
        for c in held:
            c.close()
        listener.close()


REPLIES = {
    "silent": (None, "sent no Dask handshake in 5 s"),
    "http": (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", "is not a Dask scheduler"),
    "huge length": ((1 << 62).to_bytes(8, "little") + b"x" * 64, "is not a Dask scheduler"),
    "garbage": (bytes(range(256)) * 4, "is not a Dask scheduler"),
    "closes": (b"", "closed the connection without a Dask handshake"),
}


@pytest.mark.parametrize("kind", sorted(REPLIES))
def test_a_server_that_is_not_a_dask_scheduler_is_refused_promptly(kind):
    reply, needle = REPLIES[kind]
    with _server(reply) as address:
        t0 = time.monotonic()
        with pytest.raises(ValueError, match=f"^--scheduler {re.escape(address)}: ") as info:
            check_scheduler(address, reach=True)
        assert time.monotonic() - t0 < 10
    assert needle in str(info.value), str(info.value)


def _cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("kind", ["silent", "http"])
def test_study_and_design_name_the_address_within_ten_seconds(kind, tmp_path):
    reply, needle = REPLIES[kind]
    with _server(reply) as address:
        for argv in (
            ["design", "k-sweep:1", "--seeds", "1", "--scheduler", address, "--no-progress"],
            ["study", "reproduce", "--scheduler", address, "--measured", str(tmp_path), "--out", str(tmp_path / "o")],
        ):
            t0 = time.monotonic()
            code, out, err = _cli(argv)
            assert time.monotonic() - t0 < 12, argv
            assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
            assert err.startswith(f"fp16emu {argv[0]}: error: ") and address in err, err
            assert "out of memory" not in err


def test_a_local_cluster_under_a_low_open_files_limit_is_one_line_before_any_worker(tmp_path):
    """``ulimit -n 16`` with --scheduler local printed a Nanny's traceback, then hung: now refused
    naming the limit before a worker starts."""
    import resource
    import subprocess
    import sys

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (16, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    import reference_data as ref  # registered by conftest.py

    measured = ref.require_study_raw_results()
    argv = [
        sys.executable,
        "-m",
        "validation.cli",
        "study",
        "reproduce",
        "--measured",
        str(measured),
        "--smallest",
        "1",
    ]
    argv += ["--scheduler", "local", "--jobs", "1", "--no-cache", "--out", str(tmp_path / "o"), "--no-progress"]
    t0 = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, preexec_fn=low_limit)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "ulimit -n" in done.stderr and "--scheduler local" in done.stderr
    assert time.monotonic() - t0 < 60
