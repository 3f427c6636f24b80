"""lazystandby explain: a pipeline file described stage by stage, as the nodes that run it read it."""

import json
from pathlib import Path

import pytest

from lazystandby import explain
from lazystandby.config import NodeConfig
from lazystandby.sources.kafka_source import Topics

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_q5_is_two_stages_joined_by_its_view():
    d = explain.describe(str(EXAMPLES / "nexmark-q5.sql"), "p.")
    one, two = d["stages"]
    assert (one["stage"], two["stage"]) == (1, 2)
    assert one["reads"]["table"] == "bid" and not one["reads"]["view"] and one["reads"]["topic"] == "bid"
    assert one["reads"]["event_time"] == "date_time" and one["reads"]["watermark_delay_ms"] == 4000
    assert one["writes"]["view"] and one["writes"]["topic"] == "p.auction_bids"
    # The next stage reads what this one writes, with the view's columns, its event time the window end.
    assert two["reads"]["topic"] == one["writes"]["topic"] and two["reads"]["columns"] == one["writes"]["columns"]
    assert two["reads"]["event_time"] == "window_end" and two["reads"]["watermark_delay_ms"] == 0
    c = one["computes"]
    assert (c["kind"], c["size_ms"], c["slide_ms"], c["lateness_ms"]) == ("window", 10_000, 2_000, 4_000)
    assert c["keys"] == ["auction"] and c["aggregates"] == ["count(*)"]
    top = two["computes"]["top"]
    assert top == {"fn": "rank", "partition": ["window"], "limit": 1, "order": ["max(num) DESC NULLS LAST"]}
    assert two["writes"] == {"name": "q5", "view": False, "topic": "nexmark-q5",
                             "columns": ["auction BIGINT", "hop_end TIMESTAMP(3)", "num BIGINT"],
                             "record_key": ["auction", "hop_end"], "read_by": None}
    assert one["writes"]["read_by"] == [2]
    assert two["engine_topics"]["control"] == "p.stage2.control"


def test_the_topics_are_those_a_node_of_each_stage_uses():
    path = str(EXAMPLES / "nexmark-hot-auctions.sql")
    d = explain.describe(path, "x.")
    for st in d["stages"]:
        t = Topics.of(NodeConfig(pipeline=path, stage=st["stage"], topic_prefix="x."))
        assert st["reads"]["topic"] == t.source(st["reads"]["table"])
        assert st["writes"]["topic"] == t.results
        assert st["engine_topics"]["link_log"] == t.linklog


def test_a_selection_stage_has_no_window_and_no_late_topic():
    st = explain.describe(str(EXAMPLES / "nexmark-hot-auctions.sql"))["stages"][0]
    assert st["computes"] == {"kind": "selection", "where": "auction % 2 = 0"}
    assert st["engine_topics"]["late"] is None and st["writes"]["record_key"] is None


def test_having_names_the_aggregate_not_its_internal_column(tmp_path):
    f = tmp_path / "p.sql"
    f.write_text("CREATE TABLE t (k BIGINT, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) "
                 "WITH ('topic' = 't');\n"
                 "SELECT k, sum(v) AS s FROM t GROUP BY window(ts, '5 seconds'), k HAVING sum(v) > 10;\n")
    c = explain.describe(str(f))["stages"][0]["computes"]
    assert "_agg" not in c["having"] and "sum(v)" in c["having"].lower()


def test_text_then_the_json_on_the_last_line(capsys):
    path = str(EXAMPLES / "nexmark-q5.sql")
    assert explain.main([path]) == 0
    out = capsys.readouterr().out.splitlines()
    assert json.loads(out[-1]) == explain.describe(path)
    text = "\n".join(out[:-1])
    assert "2 stages" in text and "stage 2:" in text and "qualify   rank()" in text
    assert "writes    view auction_bids to topic ls.auction_bids" in text


@pytest.mark.parametrize(("text", "error"), [
    (None, "cannot read the pipeline file"),
    ("CREATE TABLE t (a BIGINT) WITH ('topic' = 't');\nSELECT b FROM t;\n", "b: no such column"),
    ("CREATE TABLE t (a BIGINT WITH ('topic' = 't');\nSELECT a FROM t;\n", "does not parse"),
])
def test_a_file_the_nodes_would_refuse_is_refused_in_one_line(tmp_path, capsys, text, error):
    f = tmp_path / "p.sql"
    if text is not None:
        f.write_text(text)
    assert explain.main([str(f)]) == 2
    got = capsys.readouterr()
    assert got.out == "" and error in got.err and got.err.count("\n") == 1


def test_a_view_read_by_two_stages_says_so():
    d = explain.describe(str(EXAMPLES / "nexmark-q5-fanout.sql"))
    one, hot, stats = d["stages"]
    assert one["writes"]["read_by"] == [2, 3]
    assert hot["reads"]["topic"] == stats["reads"]["topic"] == one["writes"]["topic"]
    assert hot["writes"]["topic"] != stats["writes"]["topic"]
    assert "read by stages 2, 3" in explain.render(d)
