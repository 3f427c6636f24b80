"""A node's malloc keeps the memory it frees (lazystandby.allocator): the settings it asks glibc for, what
happens on a C library without them, and, on this machine's glibc, the page faults it saves."""

import subprocess
import sys
import textwrap

import pytest

from lazystandby.allocator import M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, MMAP_THRESHOLD_MAX, keep_freed_memory
from lazystandby.config import load
from lazystandby.core.errors import SettingError


class FakeLibc:
    def __init__(self, answer: int = 1) -> None:
        self.calls: list[tuple[int, int]] = []
        self.answer = answer

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return self.answer


def test_keeping_asks_for_the_trim_threshold_and_half_of_it_as_the_mmap_threshold():
    libc = FakeLibc()
    assert keep_freed_memory(16, libc)
    assert libc.calls == [(M_MMAP_THRESHOLD, 8 << 20), (M_TRIM_THRESHOLD, 16 << 20)]


def test_the_mmap_threshold_stops_at_glibcs_ceiling():
    libc = FakeLibc()
    assert keep_freed_memory(256, libc)
    assert libc.calls == [(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX), (M_TRIM_THRESHOLD, 256 << 20)]


def test_zero_leaves_the_allocator_alone():
    libc = FakeLibc()
    assert not keep_freed_memory(0, libc)
    assert libc.calls == []


def test_a_c_library_that_refuses_or_lacks_mallopt_is_reported_not_fatal():
    assert not keep_freed_memory(64, FakeLibc(answer=0))  # musl: every setting refused
    assert not keep_freed_memory(64, object())  # no mallopt at all


@pytest.mark.parametrize("mb", [-1, 1025])
def test_out_of_range_is_refused_by_the_function_and_the_setting(mb):
    with pytest.raises(ValueError, match="malloc_keep_mb"):
        keep_freed_memory(mb, FakeLibc())
    with pytest.raises(SettingError, match="malloc_keep_mb"):
        load(["--role", "upstream", "--malloc-keep-mb", str(mb)], env={})


def test_the_setting_defaults_to_64_and_reads_from_the_environment():
    assert load(["--role", "upstream"], env={}).malloc_keep_mb == 64
    assert load(["--role", "upstream"], env={"LS_MALLOC_KEEP_MB": "0"}).malloc_keep_mb == 0


def test_a_node_logs_a_setting_its_c_library_does_not_take_and_goes_on(monkeypatch, caplog):
    import logging

    from lazystandby import cli

    log = logging.getLogger("lazystandby.test")
    monkeypatch.setattr(cli, "keep_freed_memory", lambda mb: False)
    with caplog.at_level(logging.INFO, logger="lazystandby.test"):
        assert not cli.keep_memory(load(["--role", "upstream"], env={}), log)
    assert "did not take malloc_keep_mb=64" in caplog.text
    caplog.clear()
    monkeypatch.setattr(cli, "keep_freed_memory", lambda mb: pytest.fail("0 must not touch the allocator"))
    assert not cli.keep_memory(load(["--role", "upstream", "--malloc-keep-mb", "0"], env={}), log)
    assert caplog.text == ""


_CHURN = textwrap.dedent("""
    import resource, sys, threading
    from lazystandby.allocator import keep_freed_memory
    if sys.argv[1] == "keep":
        assert keep_freed_memory(64)
    def frames():  # a frame's buffers, about 1 MB each, made and dropped by two threads as a node's links do
        for i in range(200):
            a = bytes(bytearray(900_000 + (i % 7) * 50_000))
            b = a + b"x"
            del a, b
    threads = [threading.Thread(target=frames) for _ in range(2)]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc and /proc page-fault counts")
def test_on_glibc_kept_memory_spares_the_page_faults_of_each_frame():
    def faults(mode: str) -> int:
        out = subprocess.run([sys.executable, "-c", _CHURN, mode], capture_output=True, text=True, check=True,
                             timeout=60)
        return int(out.stdout.split()[-1])

    default, kept = faults("default"), faults("keep")
    # Each ~1 MB buffer is about 250 pages: by default glibc maps and unmaps them, so nearly every page of
    # every frame faults (about 200,000 here); kept, the same pages serve every frame.
    assert default > 50_000
    assert kept < default / 10
