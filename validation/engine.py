"""One execution engine for independent jobs: this process, a local process pool, or Dask.

``--scheduler`` values (:data:`SCHEDULERS`):

* ``auto`` (default): this process for one worker; more workers run on ``local`` when
  ``dask.distributed`` is importable, else on ``processes`` (the output says so).
* ``local``: a ``dask.distributed.LocalCluster`` of ``--jobs`` single-threaded worker processes
  (default: one per core), its dashboard link printed when bokeh is installed.
* ``tcp://HOST:PORT``: an existing Dask scheduler; its workers need fp16emu installed and, for the
  results cache, the same cache directory (a shared filesystem: entries are written atomically,
  a temporary file renamed into place, so no worker ever reads half an entry).
* ``processes``: a ``multiprocessing`` pool (spawn) of ``--jobs`` workers, no Dask needed.

Every worker runs numba single-threaded (the workers are the parallelism; results never depend
on it). A Dask job whose worker is lost, or that raises, is retried (:data:`RETRIES` times) on
another worker. Local worker counts are capped at the number of jobs and of cores, with a note.

Signals: while an engine runs, SIGTERM raises :class:`Terminated` (a ``KeyboardInterrupt``) in
the main thread, so the pool or cluster is shut down in order (no orphaned worker goes on
writing to the cache, no leaked semaphores) and the command line answers with one message
(exit 143; 130 for Ctrl-C). Pool workers ignore SIGINT (the parent stops them) and die with their
parent even when it is killed outright (Linux ``PR_SET_PDEATHSIG``, and a watchdog elsewhere).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import logging
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator

import numba

__all__ = [
    "SCHEDULERS",
    "RETRIES",
    "CONNECT_TIMEOUT_S",
    "Engine",
    "Terminated",
    "dask_available",
    "check_scheduler",
    "reach_scheduler",
    "ending_on_signals",
]

SCHEDULERS = ("auto", "local", "processes", "tcp://HOST:PORT")
#: times a Dask job is re-run after its worker was lost or it raised
RETRIES = 2


class Terminated(KeyboardInterrupt):
    """SIGTERM received while jobs ran (exit code 143)."""

    exit_code = 143


def dask_available() -> bool:
    try:
        import dask.distributed  # noqa: F401
    except Exception:
        return False
    return True


#: seconds to wait for a remote scheduler to accept a connection (the check and the client)
CONNECT_TIMEOUT_S = 3.0
#: seconds to wait, once connected, for the scheduler's handshake, and its largest size in bytes
#: (a few hundred bytes: the peer's compression and pickle protocol)
HANDSHAKE_TIMEOUT_S = 5.0
MAX_HANDSHAKE_BYTES = 1 << 16


def _address(scheduler: str) -> tuple[str, int]:
    """(host, port) of a ``tcp://HOST:PORT`` scheduler (``[v6]`` hosts included), else ValueError
    naming ``--scheduler``."""
    rest = scheduler.split("://", 1)[1]
    host, sep, port = rest.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or "/" in host or "/" in port:
        raise ValueError(f"--scheduler: {scheduler!r} is not one of {', '.join(SCHEDULERS)} (no host)")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"--scheduler: {scheduler!r}: the port {port!r} is not a number in 1..65535 (tcp://HOST:PORT)")
    return host, int(port)


def check_scheduler(scheduler: str, *, reach: bool = False) -> str:
    """``scheduler`` if it is one of :data:`SCHEDULERS` (a ``tcp://HOST:PORT`` address with a host
    and a port), else ValueError naming ``--scheduler``. ``reach``: also connect to a remote
    scheduler (at most :data:`CONNECT_TIMEOUT_S` seconds), ValueError when nothing answers there,
    so a command refuses an unreachable cluster before any work."""
    if not isinstance(scheduler, str):
        raise TypeError(f"scheduler: expected a string, got {type(scheduler).__name__}")
    if scheduler in ("auto", "local", "processes"):
        return scheduler
    if scheduler.startswith("tls://"):
        raise ValueError(
            f"--scheduler: {scheduler!r}: tls:// needs certificates, which fp16emu has no option for; use tcp://HOST:PORT "
            "(over an SSH tunnel or a trusted network)"
        )
    if not scheduler.startswith("tcp://") or ":" not in scheduler.split("://", 1)[1]:
        raise ValueError(f"--scheduler: {scheduler!r} is not one of {', '.join(SCHEDULERS)}")
    _address(scheduler)
    if reach:
        reach_scheduler(scheduler)
    return scheduler


def reach_scheduler(scheduler: str, timeout: float | None = None) -> None:
    """Connect to the remote scheduler ``scheduler``, read its Dask handshake and close again;
    ValueError naming ``--scheduler`` and why when its host does not resolve, nothing accepts in
    ``timeout`` s, or what accepts sends no Dask handshake in :data:`HANDSHAKE_TIMEOUT_S` s."""
    import socket

    host, port = _address(scheduler)
    timeout = CONNECT_TIMEOUT_S if timeout is None else timeout
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as err:
        raise ValueError(f"--scheduler {scheduler}: the host {host!r} does not resolve ({err})") from None
    last = None
    deadline = time.monotonic() + timeout
    for family, kind, proto, _, addr in infos:
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.settimeout(max(0.1, deadline - time.monotonic()))
                sock.connect(addr)
                _handshake(sock, scheduler)
                return
        except OSError as err:
            last = err
        if time.monotonic() >= deadline:
            break
    why = f"no answer in {timeout:g} s" if isinstance(last, TimeoutError) else getattr(last, "strerror", last)
    raise ValueError(
        f"--scheduler {scheduler}: no Dask scheduler answers there ({why}); start one (dask scheduler) "
        "or use --scheduler local"
    )


def _handshake(sock, scheduler: str) -> None:
    """Read the handshake a Dask scheduler sends first on every connection (``distributed``'s
    ``Listener.on_connection`` writes it before reading: one message, an 8-byte little-endian
    length, then msgpack frames naming ``compression``, ``python`` and ``pickle-protocol``), at most
    :data:`HANDSHAKE_TIMEOUT_S` seconds; ValueError naming ``--scheduler`` when the peer says
    nothing (a server that accepts and never answers), closes, or says something else (an HTTP or
    any other server, whose bytes Dask's client would take for a frame length to allocate)."""
    deadline = time.monotonic() + HANDSHAKE_TIMEOUT_S

    def read(n: int) -> bytes:
        data = b""
        while len(data) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            sock.settimeout(left)
            chunk = sock.recv(min(n - len(data), 1 << 16))
            if not chunk:
                break
            data += chunk
        return data

    try:
        head = read(8)
        size = int.from_bytes(head, "little") if len(head) == 8 else 0
        body = read(size) if 0 < size <= MAX_HANDSHAKE_BYTES else b""
    except TimeoutError:
        raise ValueError(
            f"--scheduler {scheduler}: something accepts connections there but sent no Dask handshake in "
            f"{HANDSHAKE_TIMEOUT_S:g} s (not a Dask scheduler, or a hung one); check the address, or use "
            "--scheduler local"
        ) from None
    except OSError as err:
        raise ValueError(
            f"--scheduler {scheduler}: the connection failed during the Dask handshake ({err.strerror or err})"
        ) from None
    if not head:
        raise ValueError(f"--scheduler {scheduler}: the server there closed the connection without a Dask handshake")
    # a Dask handshake names all three keys (distributed.comm.core.Comm.handshake_info)
    if len(body) != size or not all(key in body for key in (b"compression", b"python", b"pickle-protocol")):
        raise ValueError(
            f"--scheduler {scheduler}: the server there is not a Dask scheduler (it answered {head[:8]!r}…, not a "
            "Dask handshake); check the address and port (the scheduler's, not its dashboard's)"
        )


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _workers(n: int) -> str:
    return f"{n} worker" if n == 1 else f"{n} workers"


def _single_thread_numba() -> None:
    numba.set_num_threads(1)


def _die_with_parent(parent: int) -> None:
    """In a pool worker: exit when the parent process dies, even by SIGKILL."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except Exception:  # pragma: no cover
            pass
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)

    def watch():  # portable fallback
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _pool_init(parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which stops the pool
    _die_with_parent(parent)
    _single_thread_numba()


def _quiet_dask() -> None:
    """Silence the logs of Dask, Tornado and asyncio in this process (they would print the
    tracebacks of workers stopped while starting, after the command's one line)."""
    names = [n for n in logging.root.manager.loggerDict if n.split(".")[0] in ("distributed", "tornado", "asyncio")]
    for name in {"distributed", "tornado", "asyncio", *names}:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def _end_children() -> None:
    """After a signal: kill the child processes still alive (a Dask worker stopped while it
    started survives its cluster's close), and drop Dask's exit-time close of its clusters (it
    would print that worker's traceback after the command's one line)."""
    for child in mp.active_children():
        with contextlib.suppress(Exception):
            child.kill()
    spec = sys.modules.get("distributed.deploy.spec")
    if spec is not None and hasattr(spec, "close_clusters"):
        import atexit

        atexit.unregister(spec.close_clusters)


def _dask_call(fn, item):
    _single_thread_numba()
    return fn(item)


#: open files a Dask LocalCluster's parent needs (scheduler, client, the interpreter's own), and
#: per worker (its nanny's and worker's connections and pipes)
LOCAL_CLUSTER_FILES = 128
FILES_PER_WORKER = 8


def _open_files_limit() -> int | None:
    """The soft open-files limit (``ulimit -n``), or None where unlimited or unknown."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):  # pragma: no cover - not POSIX
        return None
    return None if soft == resource.RLIM_INFINITY or soft < 0 else soft


def _why_not(err: BaseException) -> str:
    """Why a LocalCluster did not start, naming the open-files limit when that is the cause."""
    text = " ".join(str(err).split())[:120] or type(err).__name__
    cause = err
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno == 24:
            break
        cause = cause.__cause__ or cause.__context__
    try:
        import resource

        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):  # pragma: no cover - not POSIX
        nofile = None
    if cause is not None or (nofile is not None and 0 < nofile < 256):
        return f"{text}; the open-files limit is {nofile} (ulimit -n): raise it, or use --scheduler processes"
    return text


class Engine:
    """Runs ``fn(item)`` for many items, results as they finish (:meth:`map_unordered`).

    ``scheduler``: one of :data:`SCHEDULERS`; ``jobs``: workers (None: 1, or the machine's cores
    for ``local``); ``n_tasks``: the number of jobs, to cap local workers. Use as a context
    manager (starts nothing until :meth:`map_unordered`)."""

    def __init__(self, scheduler: str = "auto", jobs: int | None = None, n_tasks: int | None = None):
        check_scheduler(scheduler)
        if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
            raise ValueError(f"--jobs: must be a positive integer, got {jobs!r}")
        self.notes: list[str] = []
        remote = scheduler.startswith(("tcp://", "tls://"))
        if jobs is None:
            jobs = _cores() if scheduler == "local" else 1
        if not remote:
            cap = min(jobs, max(1, n_tasks if n_tasks is not None else jobs), _cores())
            if cap < jobs:
                self.notes.append(
                    f"--jobs {jobs} capped at {cap} ({n_tasks} jobs to run, {_cores()} cores)"
                    if n_tasks is not None
                    else f"--jobs {jobs} capped at {cap} ({_cores()} cores)"
                )
                jobs = cap
        if scheduler == "auto":
            if jobs <= 1:
                scheduler = "serial"
            elif dask_available():
                scheduler = "local"
            else:
                scheduler = "processes"
                self.notes.append(
                    "dask.distributed is not installed: running on a process pool (--scheduler processes)"
                )
        elif scheduler == "local" and not dask_available():
            self.notes.append("dask.distributed is not installed: --scheduler local falls back to a process pool")
            scheduler = "processes"
        elif remote and not dask_available():
            raise ValueError(f"--scheduler {scheduler}: needs dask.distributed (pip install 'fp16emu[dask]')")
        if scheduler == "processes" and jobs <= 1:
            scheduler = "serial"
        self.kind = scheduler
        self.jobs = jobs
        self.dashboard: str | None = None
        self._client = None
        self._cluster = None
        self._pool = None
        self._old_handler = None

    # -- description -------------------------------------------------------------------------

    def describe(self) -> str:
        """One line: where the jobs run (for stderr and the report)."""
        if self.kind == "serial":
            where = "in this process"
        elif self.kind == "processes":
            where = f"process pool, {_workers(self.jobs)}"
        elif self.kind == "local":
            where = f"Dask LocalCluster, {_workers(self.jobs)} × 1 thread"
        else:
            where = f"Dask cluster at {self.kind}"
        if self.dashboard:
            where += f", dashboard {self.dashboard}"
        return where

    # -- lifetime ----------------------------------------------------------------------------

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._old_handler = signal.getsignal(signal.SIGTERM)

            def on_term(signum, frame):
                _quiet_dask()
                raise Terminated()

            signal.signal(signal.SIGTERM, on_term)
        return self

    def __exit__(self, *exc):
        if isinstance(exc[1], KeyboardInterrupt):
            _quiet_dask()  # ended by a signal: one line, not the log of workers stopped mid-start
        self.close()
        if isinstance(exc[1], KeyboardInterrupt):
            _end_children()
        if self._old_handler is not None:
            signal.signal(signal.SIGTERM, self._old_handler)
            self._old_handler = None
        return False

    def _start_dask(self) -> None:
        if self.kind == "local":  # before any worker starts: a child's traceback, then a hang, otherwise
            need = LOCAL_CLUSTER_FILES + FILES_PER_WORKER * self.jobs
            nofile = _open_files_limit()
            if nofile is not None and nofile < need:
                raise ValueError(
                    f"--scheduler local: the open-files limit is {nofile} (ulimit -n); a Dask LocalCluster of "
                    f"{_workers(self.jobs)} needs about {need}: raise it, or use --scheduler processes"
                )
        from dask.distributed import Client, LocalCluster

        has_dashboard = True
        if self.kind == "local":
            has_dashboard = importlib.util.find_spec("bokeh") is not None
            # ":0", a free port, even without bokeh: the scheduler's HTTP server (metrics, health)
            # starts anyway and would otherwise take the fixed 8787, so a second run at the same
            # time (or anything else on 8787) failed with "Port 8787 is already in use"
            try:
                self._cluster = LocalCluster(
                    n_workers=self.jobs,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=":0",
                    silence_logs=logging.ERROR,
                )
                self._client = Client(self._cluster)
            except Exception as err:  # noqa: BLE001 (Dask's start-up errors are RuntimeErrors, OSErrors …)
                self.close()
                raise ValueError(f"--scheduler local: the Dask cluster did not start ({_why_not(err)})") from None
        else:
            reach_scheduler(self.kind)
            try:
                self._client = Client(self.kind, timeout=f"{CONNECT_TIMEOUT_S * 2:g}s")
            except (OSError, TimeoutError, MemoryError) as err:
                raise ValueError(
                    f"--scheduler {self.kind}: the Dask scheduler did not answer ({' '.join(str(err).split())[:120]})"
                ) from None
        try:
            link = self._client.dashboard_link
        except Exception:  # pragma: no cover
            link = None
        # a LocalCluster serves a dashboard only with bokeh installed (the link is formatted anyway)
        self.dashboard = link if has_dashboard else None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool = None
        for obj in (self._client, self._cluster):
            if obj is not None:
                try:
                    obj.close()
                except Exception:  # pragma: no cover
                    pass
        self._client = self._cluster = None

    # -- running -----------------------------------------------------------------------------

    def map_unordered(
        self, fn: Callable, items: Iterable, on_start: Callable[[Engine], None] | None = None
    ) -> Iterator:
        """``fn(item)`` for every item, yielded as each finishes (submitted in the given order).
        ``fn`` and the items must be picklable for the pool and Dask schedulers; ``on_start`` is
        called once the workers exist (the dashboard link is known then)."""
        items = list(items)
        if not items:
            return
        if self.kind == "serial":
            if on_start is not None:
                on_start(self)
            for item in items:
                yield fn(item)
        elif self.kind == "processes":
            if self._pool is None:
                # workers live as long as the engine, over every map: each compiles (or loads) the
                # numba kernels once
                ctx = mp.get_context("spawn")
                self._pool = ctx.Pool(self.jobs, initializer=_pool_init, initargs=(os.getpid(),))
            if on_start is not None:
                on_start(self)
            yield from self._pool.imap_unordered(fn, items, chunksize=1)
        else:
            from dask.distributed import as_completed

            if self._client is None:
                self._start_dask()
            if on_start is not None:
                on_start(self)
            futures = [
                self._client.submit(_dask_call, fn, item, retries=RETRIES, pure=False, priority=-i)
                for i, item in enumerate(items)
            ]
            try:
                for fut in as_completed(futures):
                    yield fut.result()
            finally:
                for fut in futures:
                    fut.cancel()


#: not empty while :func:`ending_on_signals` watches (an inner one leaves it to the outer)
_WATCHING: list[bool] = []


#: signals whose handler raised inside a callback that cannot raise, for the watcher to re-deliver
_SWALLOWED: list[int] = []


@contextlib.contextmanager
def _signals_outlive_callbacks() -> Iterator[None]:
    """While it lasts, a :class:`Terminated` or ``KeyboardInterrupt`` raised by a signal handler
    that Python ran inside a callback which cannot raise (a garbage-collector callback such as
    ``distributed.gc``'s, a ``__del__``, a weakref finaliser) is neither printed ("Exception
    ignored … Traceback") nor lost: the signal goes into ``_SWALLOWED`` and the watcher of
    :func:`ending_on_signals` delivers it to the main thread again once the callback has
    returned, so the command still ends in order with its one line."""
    previous = sys.unraisablehook

    def hook(unraisable):
        err = unraisable.exc_value
        if isinstance(err, KeyboardInterrupt):
            _SWALLOWED.append(int(signal.SIGTERM if isinstance(err, Terminated) else signal.SIGINT))
            return
        previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        if sys.unraisablehook is hook:
            sys.unraisablehook = previous
        _SWALLOWED.clear()


@contextlib.contextmanager
def ending_on_signals(
    message: str | Callable[[int], str], grace_s: float = 0.5, heard: list[int] | None = None
) -> Iterator[None]:
    """Around a whole command: SIGTERM and SIGINT honoured within a second in every phase,
    children never left behind. SIGTERM raises :class:`Terminated` in the main thread (SIGINT
    ``KeyboardInterrupt``, as always), so an engine stops its workers and the command answers in
    order (143 or 130). Python runs that handler only between bytecodes, so a long compiled call
    would delay it: the signal's number also reaches a watcher thread at once
    (``signal.set_wakeup_fd``, written by the C-level handler whatever the main thread is doing),
    and when the command has not ended ``grace_s`` seconds later the watcher kills this
    process's child processes (pool workers, Dask nannies and workers), prints ``message`` (or
    ``message(signum)``) and exits with 128 + the signal. The watcher runs while a kernel
    computes because every kernel releases the GIL (``emu.jit``: ``nogil=True``); a call that
    held it would stop the watcher too, until it returned. A signal ignored when the command
    started (``nohup``, a background job) stays ignored. A handler that Python ran inside a
    callback which cannot raise (a gc callback, a ``__del__``) loses its exception there: the
    watcher delivers that signal to the main thread again. The numbers of the signals received are
    appended to ``heard`` (so that a command line can skip the interpreter's slow teardown)."""
    if threading.current_thread() is not threading.main_thread() or _WATCHING:
        yield  # signals are the main thread's; nested (study inside fp16emu's main): the outer one's
        return
    wanted = {int(signal.SIGTERM)}
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        wanted.add(int(signal.SIGINT))
    done = threading.Event()
    r, w = os.pipe()
    os.set_blocking(w, False)
    old_term = signal.getsignal(signal.SIGTERM)
    ignored_term = old_term is signal.SIG_IGN
    if ignored_term:
        wanted.discard(int(signal.SIGTERM))

    def on_term(signum, frame):
        _quiet_dask()  # what stops now may log: the command answers one line
        raise Terminated()

    def on_int(signum, frame):
        _quiet_dask()
        raise KeyboardInterrupt()

    old_int = signal.getsignal(signal.SIGINT)
    own_int = old_int is signal.default_int_handler

    def watch():
        import select

        while not done.is_set():
            ready, _, _ = select.select([r], [], [], 0.2)
            if not ready:
                continue
            got = [b for b in os.read(r, 64) if b in wanted]
            if heard is not None:
                heard.extend(got)
            if not got:
                continue
            deadline = time.monotonic() + grace_s
            while not done.wait(0.05) and time.monotonic() < deadline:
                if _SWALLOWED:  # the handler raised inside a callback: again, from here
                    signal.pthread_kill(threading.main_thread().ident, _SWALLOWED.pop())
            if done.is_set():
                continue
            for child in mp.active_children():
                with contextlib.suppress(Exception):
                    child.kill()
            print(message(got[0]) if callable(message) else message, file=sys.stderr, flush=True)
            os._exit(128 + got[0])

    if not ignored_term:
        signal.signal(signal.SIGTERM, on_term)
    if own_int:
        signal.signal(signal.SIGINT, on_int)
    old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    watcher = threading.Thread(target=watch, name="fp16emu-signals", daemon=True)
    watcher.start()
    _WATCHING.append(True)
    try:
        with _signals_outlive_callbacks():
            yield
    except KeyboardInterrupt:  # Terminated included: no child outlives the command
        _end_children()
        raise
    finally:
        _WATCHING.clear()
        done.set()
        signal.set_wakeup_fd(old_fd)
        watcher.join(1.0)
        if heard is not None and not heard:  # a signal the watcher had no time to read
            os.set_blocking(r, False)
            with contextlib.suppress(OSError):
                heard.extend(b for b in os.read(r, 64) if b in wanted)
        os.close(r)
        os.close(w)
        if not ignored_term:
            signal.signal(signal.SIGTERM, old_term)
        if own_int:
            signal.signal(signal.SIGINT, old_int)
