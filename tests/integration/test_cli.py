"""The command line as a newcomer meets it: every bad value refused in one line that names the setting,
within a few seconds, with no traceback; SIGTERM stops the whole topology; `pip install .` in a fresh
virtual environment gives a `lazystandby` command that runs the pipeline with no PYTHONPATH."""

import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from lazystandby.harness.operator_procs import descendants

from .procs import cmdline

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": f"{ROOT / 'services'}:{ROOT / 'spark'}:{ROOT}"}

BAD = [  # (arguments, extra env, the setting the one line must name, seconds allowed)
    (["launch", "--bsize", "0"], {}, "bsize (--bsize, env LS_BSIZE)", 5),
    (["launch", "--bsize", "-1"], {}, "bsize (--bsize, env LS_BSIZE)", 5),
    (["launch", "--bsize", "abc"], {}, "bsize (--bsize, env LS_BSIZE)", 5),
    (["launch", "--codec", "lz4"], {}, "codec (--codec, env LS_CODEC): expected one of none, zlib, zstd", 5),
    (["launch", "--heartbeat-interval", "x"], {}, "heartbeat_interval (--heartbeat-interval", 5),
    (["launch"], {"LS_RATE": "x"}, "rate (--rate, env LS_RATE)", 5),
    (["launch", "--predicate", "price >>> 3"], {}, "predicate (--predicate, env LS_PREDICATE)", 5),
    (["launch"], {"LS_PREDICATE": "price >>> 3"}, "predicate (--predicate, env LS_PREDICATE)", 5),
    (["failover-check", "--operator", "flink"], {}, "operator (--operator, env LS_OPERATOR)", 5),
    (["launch", "--kafka"], {"KAFKA_BOOTSTRAP": "127.0.0.1:9"}, "kafka_bootstrap (KAFKA_BOOTSTRAP", 15),
    (["node", "--bsize", "0"], {}, "bsize (--bsize, env LS_BSIZE)", 5),
    (["launch", "--fault", "meteor"], {}, "fault (--fault): expected one of", 5),
]


@pytest.mark.parametrize("argv, env, names, bound", BAD, ids=[" ".join(b[0]) + str(b[1]) for b in BAD])
def test_a_bad_value_is_one_line_naming_the_setting(argv, env, names, bound):
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "lazystandby.cli", *argv], env={**ENV, **env}, capture_output=True,
                       text=True, timeout=60)
    took = time.monotonic() - t0
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1 and names in lines[0], p.stderr
    assert "Traceback" not in p.stderr + p.stdout
    assert took < bound, took


def test_explain_describes_every_example_and_refuses_a_bad_file_in_one_line(tmp_path):
    for f in sorted((ROOT / "examples").glob("*.sql")):
        p = subprocess.run([sys.executable, "-m", "lazystandby.cli", "explain", str(f)], env=ENV, capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        d = json.loads(p.stdout.strip().splitlines()[-1])
        assert d["stages"] and all(s["writes"]["columns"] for s in d["stages"]), f
    bad = tmp_path / "bad.sql"
    bad.write_text("CREATE VIEW v AS SELECT 1;\n")
    p = subprocess.run([sys.executable, "-m", "lazystandby.cli", "explain", str(bad)], env=ENV, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_sigterm_to_launch_stops_every_node_of_its_topology(tmp_path):
    p = subprocess.Popen([sys.executable, "-m", "lazystandby.cli", "launch", "--total", "2000000", "--rate", "5000"],
                         env={**ENV, "LS_RUN_DIR": str(tmp_path)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        deadline = time.monotonic() + 60
        nodes: set[int] = set()
        while time.monotonic() < deadline and len(nodes) < 4:
            nodes = {c for c in descendants(p.pid) if "lazystandby.cli" in cmdline(c)}
            time.sleep(0.2)
        assert len(nodes) == 4, nodes
        time.sleep(1.0)
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == 130
        assert "every node of the topology was stopped" in p.stderr.read()
        time.sleep(0.5)
        assert [n for n in nodes if _alive(n)] == []
    finally:
        if p.poll() is None:
            p.kill()


def test_sigquit_makes_a_node_write_its_threads_stacks_and_run_on(tmp_path):
    """What the harness asks of a node that does not exit when stopped: its stacks, in its log."""
    from lazystandby.harness.launcher import free_ports

    port = free_ports(1)[0]
    log = open(tmp_path / "nd.log", "wb")  # noqa: SIM115 - the child's
    p = subprocess.Popen([sys.executable, "-m", "lazystandby.cli", "node", "--role", "downstream", "--name", "Nd",
                          "--listen", f"127.0.0.1:{port}", "--sink", str(tmp_path / "out")], env=ENV,
                         stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while "listening on" not in (tmp_path / "nd.log").read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        p.send_signal(signal.SIGQUIT)
        time.sleep(1.0)
        text = (tmp_path / "nd.log").read_text()
        assert "most recent call first" in text and "in run_node" in text, text[-2000:]
        assert p.poll() is None
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=15) == 0
    finally:
        if p.poll() is None:
            p.kill()
        log.close()


@pytest.mark.slow
def test_pip_install_in_a_fresh_venv_gives_a_working_command(tmp_path):
    """`pip install .` builds the package in isolation and installs it, the generated protocol modules and
    the command included. Its dependencies come from the suite's own environment through a .pth file, so
    pip finds them satisfied instead of installing them again: a second copy of pyspark, pyarrow and pandas
    is over 1 GB of disk and of TMPDIR, and ran a CI machine out of space."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    vpy = str(venv / "bin" / "python")
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(subprocess.run([vpy, "-c", purelib], check=True, capture_output=True, text=True).stdout.strip())
    # A path line, not a site directory: the suite's own .pth files (its editable lazystandby) stay unread.
    (site / "suite-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = subprocess.run([vpy, "-m", "pip", "install", "-q", str(ROOT)], capture_output=True, text=True,
                         timeout=900)
    assert pip.returncode == 0, pip.stderr[-2000:]
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    where = subprocess.run([vpy, "-c", "import lazystandby.v1.lazystandby_pb2 as m; print(m.__file__)"], env=clean,
                           cwd=tmp_path, capture_output=True, text=True)
    assert where.returncode == 0 and where.stdout.startswith(str(site)), (where.stdout, where.stderr)
    # The build compiled the native compressor into the installed package (this machine has a C compiler).
    nat = subprocess.run([vpy, "-c", "from lazystandby import native as n; print(n.__file__, n.backend())"],
                         env=clean, cwd=tmp_path, capture_output=True, text=True)
    assert nat.returncode == 0 and nat.stdout.startswith(str(site)) and "via zrun.c" in nat.stdout, nat
    helped = subprocess.run([str(venv / "bin" / "lazystandby"), "--help"], env=clean, capture_output=True, text=True)
    assert helped.returncode == 0
    for cmd in ("node", "launch", "failover-check", "chaos-campaign", "stack-check", "dashboards-check"):
        assert f"  {cmd} " in helped.stdout, helped.stdout
    ran = subprocess.run([str(venv / "bin" / "lazystandby"), "launch", "--total", "20000", "--rate", "10000"],
                         env={**clean, "LS_RUN_DIR": str(tmp_path / "run")}, cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    summary = json.loads(ran.stdout.strip().splitlines()[-1])
    assert ran.returncode == 0 and summary["ok"] and summary["lost"] == 0 and summary["duplicated"] == 0, ran.stderr
    assert 0 < summary["primary_longest_silence_ms"] < 5000 and summary["takeover_lease_ms"] == 75.0, summary
