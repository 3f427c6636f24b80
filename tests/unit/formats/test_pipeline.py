from pathlib import Path

import pytest

from lazystandby.core.errors import PipelineError, UnsupportedSql
from lazystandby.formats.pipeline import parse_pipeline, read_pipeline, statements

EXAMPLES = sorted((Path(__file__).parents[3] / "examples").glob("*.sql"))
TABLE = "CREATE TABLE t (a BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ('topic' = 't');"


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_plans(path):
    p = read_pipeline(path)
    assert p.tables and p.plan.names


def test_statements_are_cut_at_semicolons_outside_literals_and_comments():
    assert statements("-- a; b\nSELECT 'x;y' FROM t; SET bsize = 3;") == ["SELECT 'x;y' FROM t", "SET bsize = 3"]


def test_settings_sink_and_query_are_read():
    p = parse_pipeline(TABLE + "CREATE TABLE out WITH ('topic' = 'o'); SET Bsize = 'inf'; "
                       "INSERT INTO out SELECT a FROM t WHERE a > 1;")
    assert p.sink_topic == "o" and p.settings == (("bsize", "inf"),) and p.plan.names == ["a"]


@pytest.mark.parametrize("text, error, says", [
    ("SELECT 1", PipelineError, "declares no table"),
    (TABLE, PipelineError, "holds 0 queries"),
    (TABLE + "SELECT a FROM t; SELECT a FROM t", PipelineError, "holds 2 queries"),
    (TABLE + "INSERT INTO out SELECT a FROM t", PipelineError, "no such sink"),
    (TABLE + TABLE + "SELECT a FROM t", PipelineError, "declared twice"),
    (TABLE + "DROP TABLE t", PipelineError, "expected CREATE TABLE"),
    (TABLE + "SET bsize; SELECT a FROM t", PipelineError, "SET <setting>"),
    (TABLE + "CREATE TABLE out WITH ('format' = 'json'); SELECT a FROM t", PipelineError, "names no topic"),
    (TABLE + "SELECT b FROM t", UnsupportedSql, "no such column"),
])
def test_a_pipeline_that_declares_nothing_runnable_is_refused(text, error, says):
    with pytest.raises(error, match=says):
        parse_pipeline(text)


def test_an_unreadable_file_is_refused(tmp_path):
    with pytest.raises(PipelineError, match="cannot read"):
        read_pipeline(tmp_path / "missing.sql")
