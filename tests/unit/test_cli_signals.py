"""cli.wait_for: a node's main thread answers a signal that the kernel handed to another of its threads."""

import subprocess
import sys
import textwrap

import pytest

# A process whose SIGUSR1 handler sets `halt`, and a thread that sends SIGUSR1 to itself (pthread_kill):
# the C-level handler runs in that thread, as when the kernel hands a process's signal to one of gRPC's.
PROGRAM = textwrap.dedent("""
    import signal, sys, threading, time
    from lazystandby.cli import wait_for
    halt = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: halt.set())
    def side():
        time.sleep(0.2)
        signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)
    threading.Thread(target=side, daemon=True).start()
    t0 = time.monotonic()
    wait_for(halt) if sys.argv[1] == "wait_for" else halt.wait()
    print(round(time.monotonic() - t0, 3))
""")


def run(how: str, timeout: float) -> float:
    out = subprocess.run([sys.executable, "-c", PROGRAM, how], capture_output=True, text=True, timeout=timeout,
                         check=True)
    return float(out.stdout)


def test_a_signal_taken_by_another_thread_ends_the_wait():
    assert 0.2 <= run("wait_for", timeout=20) < 2.0


def test_an_untimed_wait_would_sleep_through_it():
    # Why wait_for looks: the bare wait is woken only by a signal delivered to the main thread.
    with pytest.raises(subprocess.TimeoutExpired):
        run("bare", timeout=3)
