"""halting.wait_for: a node's main thread answers a signal that the kernel handed to another of its threads."""

import subprocess
import sys
import textwrap
import threading

import pytest

from lazystandby.halting import wait_for

# A process whose SIGUSR1 handler sets `halt`, and a thread that sends SIGUSR1 to itself (pthread_kill):
# the C-level handler runs in that thread, as when the kernel hands a process's signal to one of gRPC's.
PROGRAM = textwrap.dedent("""
    import signal, sys, threading, time
    from lazystandby.halting import wait_for
    halt = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: halt.set())
    def side():
        time.sleep(0.2)
        signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)
    threading.Thread(target=side, daemon=True).start()
    t0 = time.monotonic()
    if sys.argv[1] == "wait_for":
        wait_for(halt)
    elif sys.argv[1] == "ticking":  # as `lazystandby run`: a progress line every 10 s
        wait_for(halt, every_s=10.0, tick=lambda: print("tick", file=sys.stderr))
    else:
        halt.wait()
    print(round(time.monotonic() - t0, 3))
""")


def run(how: str, timeout: float) -> float:
    out = subprocess.run([sys.executable, "-c", PROGRAM, how], capture_output=True, text=True, timeout=timeout,
                         check=True)
    return float(out.stdout)


def test_a_signal_taken_by_another_thread_ends_the_wait():
    assert 0.2 <= run("wait_for", timeout=20) < 2.0


def test_a_signal_ends_a_wait_between_its_progress_lines():
    assert 0.2 <= run("ticking", timeout=20) < 2.0


def test_tick_runs_every_period_until_halt():
    halt, ticks = threading.Event(), []

    def tick():
        ticks.append(1)
        if len(ticks) == 3:
            halt.set()

    wait_for(halt, look_s=0.01, every_s=0.02, tick=tick)
    assert len(ticks) == 3


def test_no_tick_before_its_period():
    halt, ticks = threading.Event(), []
    threading.Timer(0.2, halt.set).start()
    wait_for(halt, look_s=0.01, every_s=60.0, tick=lambda: ticks.append(1))
    assert ticks == []


def test_an_untimed_wait_would_sleep_through_it():
    # Why wait_for looks: the bare wait is woken only by a signal delivered to the main thread.
    with pytest.raises(subprocess.TimeoutExpired):
        run("bare", timeout=3)
