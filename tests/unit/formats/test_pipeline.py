from pathlib import Path

import pytest

from lazystandby.core.errors import PipelineError, UnsupportedSql
from lazystandby.formats.pipeline import file_text, parse_pipeline, parse_stages, read_pipeline, read_stages, statements

EXAMPLES = sorted((Path(__file__).parents[3] / "examples").glob("*.sql"))
TABLE = "CREATE TABLE t (a BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ('topic' = 't');"


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_plans(path):
    for p in read_stages(path):
        assert p.tables and p.plan.names


def test_statements_are_cut_at_semicolons_outside_literals_and_comments():
    assert statements("-- a; b\nSELECT 'x;y' FROM t; SET bsize = 3;") == ["SELECT 'x;y' FROM t", "SET bsize = 3"]


def test_settings_sink_and_query_are_read():
    p = parse_pipeline(TABLE + "CREATE TABLE out WITH ('topic' = 'o'); SET Bsize = 'inf'; "
                       "INSERT INTO out SELECT a FROM t WHERE a > 1;")
    assert p.sink_topic == "o" and p.settings == (("bsize", "inf"),) and p.plan.names == ["a"]


@pytest.mark.parametrize("text, error, says", [
    ("SELECT 1", PipelineError, "declares no table"),
    (TABLE, PipelineError, "holds no query besides its views"),
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


COUNTS = ("CREATE VIEW counts AS SELECT a, window.start AS window_start, window.end AS window_end, count(*) AS n "
          "FROM t GROUP BY window(ts, '10 seconds', '2 seconds'), a;")
TWO = TABLE + "CREATE TABLE out WITH ('topic' = 'o');" + COUNTS + \
    "INSERT INTO out SELECT window.start AS at, max(n) AS top FROM counts GROUP BY window(window_end, '2 seconds');"


def test_each_view_and_the_last_query_are_stages_each_reading_the_one_before():
    first, second = parse_stages(TWO)
    assert (first.stage, first.stages, second.stage) == (1, 2, 2)
    assert (first.sink_name, first.sink_topic) == ("counts", "counts")
    assert (second.sink_name, second.sink_topic) == ("out", "o")
    assert [t.table for t in first.sources] == ["t"] and [t.table for t in second.sources] == ["counts"]
    view = second.sources[0]
    assert view.names == ["a", "window_start", "window_end", "n"]
    assert [c.type.kind for c in view.columns] == ["BIGINT", "TIMESTAMP", "TIMESTAMP", "BIGINT"]
    # Results come out in window order: their end is an event time with no delay.
    assert (view.event_time, view.watermark_delay_ms, view.topic) == ("window_end", 0, "counts")
    assert (first.stage_prefix, second.stage_prefix) == ("stage1.", "stage2.")
    assert parse_pipeline(TWO, stage=2) == second


def test_a_stage_is_a_pipeline_file_of_its_own_under_a_prefix():
    second = parse_stages(TWO)[1]
    alone = parse_pipeline(second.text("x."))
    assert alone.plan.names == second.plan.names and alone.sink_topic == "x.o"
    assert alone.sources[0].topic == "x.counts" and alone.sources[0].event_time == "window_end"
    assert alone.stages == 1 and alone.stage_prefix == ""


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_a_whole_file_is_written_again_with_its_tables_and_sink_under_a_prefix(path):
    """Every stage reads as it did; the file's tables and its sink lie under the prefix, a view's topic
    does not (it lies under the deployment's prefix already)."""
    first = read_stages(path)
    again = parse_stages(file_text(first, "x."))
    assert [s.plan.text for s in again] == [s.plan.text for s in first]
    assert [s.plan.top for s in again] == [s.plan.top for s in first]  # QUALIFY as written, not a subquery
    assert [s.settings for s in again] == [s.settings for s in first]
    for a, b in zip(again, first, strict=True):
        assert [t.topic for t in a.tables] == [t.topic if t.table in b.views else "x." + t.topic for t in b.tables]
        assert a.sink_topic == (b.sink_topic if b.sink_name in b.views else "x." + b.sink_topic if b.sink_name else "")


def test_a_selections_view_keeps_its_sources_event_time_if_it_selects_it():
    delayed = TABLE.replace("AS ts)", "AS ts - INTERVAL '3' SECOND)")
    kept = parse_stages(delayed + "CREATE VIEW big AS SELECT a, ts AS at FROM t WHERE a > 1;"
                        "SELECT at, count(*) AS n FROM big GROUP BY window(at, '1 second'), at;")[1].sources[0]
    assert (kept.event_time, kept.watermark_delay_ms) == ("at", 3000)
    with pytest.raises(UnsupportedSql, match="view big has no event time"):
        parse_stages(TABLE + "CREATE VIEW big AS SELECT a FROM t;"
                     "SELECT count(*) AS n FROM big GROUP BY window(a, '1 second');")


def test_a_node_runs_one_stage_of_several():
    with pytest.raises(PipelineError, match=r"runs 2 stages .* stage = 1..2, not 0"):
        parse_pipeline(TWO)
    with pytest.raises(PipelineError, match="not 3"):
        parse_pipeline(TWO, stage=3)
    assert parse_pipeline(TABLE + "SELECT a FROM t", stage=1).stage == 1


@pytest.mark.parametrize("text, says", [
    (TABLE + COUNTS + "SELECT a FROM t", "view counts is read by no later query"),
    (TABLE + COUNTS + "SELECT a FROM counts; SELECT a FROM counts", "with several, each writes a sink of its own"),
    (TABLE + COUNTS + "CREATE VIEW again AS SELECT a FROM counts; SELECT a FROM counts;"
     "SELECT a FROM again", "holds 2 queries"),
    (TABLE + COUNTS.replace("counts AS", "t AS") + "SELECT a FROM t", "declared twice"),
    (TABLE + "SELECT a FROM t;" + COUNTS, "view counts is read by no later query"),
    (TABLE + "CREATE VIEW v AS DELETE FROM t; SELECT a FROM t", "expected CREATE VIEW <name> AS SELECT"),
])
def test_a_pipeline_of_views_that_cannot_run_is_refused(text, says):
    with pytest.raises(PipelineError, match=says):
        parse_stages(text)


def test_a_view_that_reads_a_later_view_is_refused():
    with pytest.raises(UnsupportedSql, match="FROM w: no such table"):
        parse_stages(TABLE + "CREATE VIEW v AS SELECT a FROM w; CREATE VIEW w AS SELECT a FROM t; SELECT a FROM v")
    with pytest.raises(UnsupportedSql, match="FROM v: no such table"):
        parse_stages(TABLE + "SELECT a FROM v; CREATE VIEW v AS SELECT a FROM t")


FANOUT = TABLE + "CREATE TABLE hot WITH ('topic' = 'h'); CREATE TABLE busy WITH ('topic' = 'b');" + COUNTS + \
    "INSERT INTO hot SELECT window.start AS at, max(n) AS top FROM counts GROUP BY window(window_end, '2 seconds');" \
    "INSERT INTO busy SELECT a, window_end FROM counts WHERE n > 3;"


def test_a_view_may_feed_several_later_stages_each_into_its_own_sink():
    one, hot, busy = parse_stages(FANOUT)
    assert [s.stage for s in (one, hot, busy)] == [1, 2, 3] and {s.stages for s in (one, hot, busy)} == {3}
    assert hot.sources == busy.sources and hot.sources[0].table == "counts"
    assert (hot.sink_name, hot.sink_topic, busy.sink_name, busy.sink_topic) == ("hot", "h", "busy", "b")
    assert hot.views == busy.views == ("counts",)


def test_a_fanned_out_file_is_written_back_whole():
    again = parse_stages(file_text(parse_stages(FANOUT), "x."))
    assert [(s.sink_name, s.sink_topic, s.plan.text) for s in again] == \
        [(s.sink_name, "x." + s.sink_topic if s.stage > 1 else s.sink_topic, s.plan.text)
         for s in parse_stages(FANOUT)]
    assert again[0].sources[0].topic == "x.t"


@pytest.mark.parametrize("text, says", [
    (TABLE + "CREATE TABLE hot WITH ('topic' = 'h');" + COUNTS +
     "INSERT INTO hot SELECT a FROM counts; SELECT a FROM counts", "each writes a sink of its own"),
    (TABLE + "CREATE TABLE hot WITH ('topic' = 'h');" + COUNTS +
     "INSERT INTO hot SELECT a FROM counts; INSERT INTO hot SELECT a FROM counts", "each writes a sink of its own"),
    (TABLE + "CREATE TABLE hot WITH ('topic' = 'h'); CREATE TABLE busy WITH ('topic' = 'h');" + COUNTS +
     "INSERT INTO hot SELECT a FROM counts; INSERT INTO busy SELECT a FROM counts", "each sink's topic its own"),
    (TABLE + "CREATE TABLE hot WITH ('topic' = 'h'); CREATE TABLE busy WITH ('topic' = 'b');" + COUNTS +
     "INSERT INTO hot SELECT a FROM counts; INSERT INTO busy SELECT a FROM t", r"stage 3 \(busy\) reads table t"),
    (TABLE + "CREATE TABLE hot WITH ('topic' = 'h');" + COUNTS +
     "INSERT INTO hot SELECT a FROM counts; INSERT INTO nowhere SELECT a FROM counts", "INSERT INTO nowhere: no such"),
])
def test_several_queries_that_could_not_be_told_apart_are_refused(text, says):
    with pytest.raises(PipelineError, match=says):
        parse_stages(text)
