"""SIGTERM and SIGINT end a command within a second in every phase, children included (issue 41.7):
:func:`validation.engine.ending_on_signals` hears the signal through the C-level wakeup fd, so
even when the main thread cannot run its handler (here: asleep in a call the signal does not
interrupt, as in a long compiled or numpy call that releases the GIL), the command ends about a
second later with 143 (130) and its one line, and its child processes do not outlive it."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

SCRIPT = textwrap.dedent(
    """
    import multiprocessing as mp, os, signal, sys, threading, time
    from validation.engine import ending_on_signals

    def child():
        time.sleep(120)

    if __name__ == "__main__":
        mp.set_start_method("spawn")
        with ending_on_signals("fp16emu: terminated (test)"):
            kid = mp.Process(target=child)
            kid.start()
            # the signal goes to a helper thread (the main thread blocks it), as it may go to a
            # BLAS or numba thread: the main thread's handler waits for its sleep to end
            helper = threading.Thread(target=time.sleep, args=(120,), daemon=True)
            helper.start()
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
            print(kid.pid, flush=True)
            time.sleep(60)
        print("not reached", flush=True)
    """
)


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_the_command_ends_within_a_second_and_takes_its_children(tmp_path, sig, code):
    script = tmp_path / "cmd.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    p = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    kid = int(p.stdout.readline())
    time.sleep(0.5)
    t0 = time.monotonic()
    p.send_signal(sig)
    out, err = p.communicate(timeout=30)
    seconds = time.monotonic() - t0
    assert p.returncode == code, (p.returncode, err)
    assert err.strip().splitlines()[-1] == "fp16emu: terminated (test)" and "not reached" not in out
    assert seconds < 3.0, seconds  # the 1 s grace, on a loaded machine
    for _ in range(50):  # the child is killed, not orphaned
        try:
            os.kill(kid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(kid, signal.SIGKILL)
        pytest.fail("the child outlived the command")
