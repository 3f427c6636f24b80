"""Where nodes and the services the harness starts keep their temporary files: inside the run's work
directory, which goes when the run does, not in /tmp, where a process killed with -9 leaves them."""

import shlex
import tempfile

from lazystandby_spark import query

from lazystandby.harness import kafka_broker, launcher


class _Started:
    """Stands for subprocess.Popen: keeps the environment a node was started with."""

    envs: dict[str, dict[str, str]] = {}

    def __init__(self, args, env, **_kw) -> None:
        _Started.envs[args[args.index("--name") + 1]] = env

    def poll(self):
        return None


def test_each_node_the_harness_starts_has_a_tmpdir_of_its_own_in_the_work_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(launcher, "free_ports", lambda n: list(range(30_000, 30_000 + n)))
    monkeypatch.setattr(launcher.subprocess, "Popen", _Started)
    topo = launcher.Topology({"total": 0}, tmp_path)  # not stopped: no process was started
    for key in ("nd", "n", "n2", "nu"):
        topo.start(key)
    dirs = {name: env["TMPDIR"] for name, env in _Started.envs.items()}
    assert dirs == {name: str(tmp_path / "tmp" / key) for key, name in launcher.Topology.NAMES.items()}
    assert all((tmp_path / "tmp" / key).is_dir() for key in ("nd", "n", "n2", "nu"))


def test_the_spark_driver_jvm_follows_tmpdir_even_through_a_space(tmp_path, monkeypatch):
    where = tmp_path / "a scratch dir"
    monkeypatch.setattr(tempfile, "tempdir", str(where))
    settings = query.driver_settings()
    # Spark splits its Java options as a shell would: one option, the whole path; ours are kept.
    assert shlex.split(settings["spark.driver.extraJavaOptions"]) == [*query.JVM_OPTIONS.split(),
                                                                      f"-Djava.io.tmpdir={where}"]
    assert settings["spark.local.dir"] == str(where)


def test_the_local_kafka_broker_unpacks_its_native_libraries_in_its_own_directory(tmp_path):
    assert f"-Djava.io.tmpdir={tmp_path / 'tmp'}" in kafka_broker._java("256m", tmp_path / "tmp")
