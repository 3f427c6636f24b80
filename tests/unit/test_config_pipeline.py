"""The pipeline setting: the file read once, its SETs below flags and env vars, refusals in one line."""

import pytest

from lazystandby.config import NodeConfig, SettingError, load

TABLE = "CREATE TABLE t (a BIGINT, at TIMESTAMP(3), WATERMARK FOR at AS at) WITH ('topic' = 'tt'{fmt});\n"


def write(tmp_path, body, fmt=""):
    p = tmp_path / "p.sql"
    p.write_text(TABLE.format(fmt=fmt) + body)
    return str(p)


def test_a_pipelines_settings_lie_below_flags_and_env_vars(tmp_path):
    path = write(tmp_path, "SET bsize = 3; SET heartbeat_misses = 7; SELECT a FROM t;")
    cfg = load(["--pipeline", path, "--bsize", "5"], env={})
    assert cfg.bsize == 5 and cfg.heartbeat_misses == 7 and cfg.streams == "t"
    assert load(["--pipeline", path], env={"LS_HEARTBEAT_MISSES": "4"}).heartbeat_misses == 4
    assert not cfg.stateful and cfg.window_spec is None


def test_a_window_pipeline_is_stateful_with_its_delay_as_lateness(tmp_path):
    path = write(tmp_path, "SELECT count(*) AS n FROM t GROUP BY window(at, '2 seconds')")
    cfg = NodeConfig(pipeline=path)
    assert cfg.stateful and (cfg.window_spec.size_ms, cfg.window_spec.lateness_ms) == (2000, 0)


@pytest.mark.parametrize("body, flags, says", [
    ("SELECT nope FROM t", [], "no such column"),
    ("SET nope = 1; SELECT a FROM t", [], "SET nope: no such setting"),
    ("SET bsize = lots; SELECT a FROM t", [], "bsize"),
    ("SELECT a FROM t", ["--query", "window"], "empty with a pipeline"),
])
def test_a_pipeline_the_nodes_cannot_run_is_refused_in_one_line(tmp_path, body, flags, says):
    with pytest.raises(SettingError) as e:
        load(["--pipeline", write(tmp_path, body), *flags], env={})
    assert says in str(e.value) and "\n" not in str(e.value)


def test_avro_tables_run_on_both_operators(tmp_path):
    path = write(tmp_path, "SELECT a FROM t", fmt=", 'format' = 'avro'")
    for operator in ("python", "spark"):
        assert NodeConfig(pipeline=path, operator=operator).pipeline_spec.sources[0].format == "avro"


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(SettingError, match="cannot read"):
        NodeConfig(pipeline=str(tmp_path / "missing.sql"))


STAGES = ("SET bsize = 4; CREATE VIEW big AS SELECT a, at FROM t WHERE a > 1;"
          "SELECT count(*) AS n FROM big GROUP BY window(at, '2 seconds');")


def test_a_node_runs_the_stage_it_is_given_with_its_own_engine_topics(tmp_path):
    from lazystandby.sources.kafka_source import Topics

    path = write(tmp_path, STAGES)
    first = load(["--pipeline", path, "--stage", "1", "--topic-prefix", "p."], env={})
    second = load(["--pipeline", path, "--stage", "2", "--topic-prefix", "p."], env={})
    assert first.bsize == 4 == second.bsize  # the file's SETs hold in every stage
    assert not first.stateful and second.stateful and second.streams == "big"
    one, two = Topics.of(first), Topics.of(second)
    assert (one.control, two.control) == ("p.stage1.control", "p.stage2.control")
    assert one.results == "p.big" == two.source("big")  # the view, under the prefix: stage 1 writes, 2 reads
    assert one.source("t") == "tt" and two.results == "p.results"  # as a pipeline of one stage's results


@pytest.mark.parametrize("body, flags, says", [
    (STAGES, [], "runs 2 stages"),
    (STAGES, ["--stage", "3"], "stage = 1..2, not 3"),
    ("SELECT a FROM t", ["--stage", "2"], "runs 1 stage"),
    ("SET stage = 2; SELECT a FROM t", [], "SET stage: no such setting"),
])
def test_a_stage_that_is_not_in_the_file_is_refused(tmp_path, body, flags, says):
    with pytest.raises(SettingError) as e:
        load(["--pipeline", write(tmp_path, body), *flags], env={})
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_stage_without_a_pipeline_is_refused():
    with pytest.raises(SettingError, match="stage"):
        load(["--stage", "1"], env={})
