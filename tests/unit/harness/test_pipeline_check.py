from lazystandby.formats.pipeline import parse_pipeline
from lazystandby.harness.pipeline_check import compare

TABLE = "CREATE TABLE t (a BIGINT, at TIMESTAMP(3), WATERMARK FOR at AS at) WITH ('topic' = 't');"
SELECT = parse_pipeline(TABLE + "SELECT a FROM t WHERE a > 1")
WINDOW = parse_pipeline(TABLE + "SELECT window.start AS ws, a, count(*) AS n FROM t GROUP BY window(at, '1 second'), a")


def test_a_selection_is_compared_by_the_input_each_result_came_from():
    truth = {"results": [("t", 1, b'{"a":2}'), ("t", 2, b'{"a":3}'), ("t", 3, b'{"a":4}')]}
    rows = [(1, "t", 1, b'{"a":2}'), (2, "t", 2, b'{"a":30}'), (3, "t", 2, b'{"a":3}'), (4, "t", 9, b'{"a":9}')]
    r = compare(SELECT, truth, rows)
    assert (r["lost"], r["duplicated"], r["wrong"], r["unexpected"], r["ok"]) == (1, 1, 1, 1, False)


def test_window_results_are_compared_by_group_in_emission_order():
    a = b'{"ws":"1970-01-01T00:00:00.000Z","a":1,"n":2}'
    b = b'{"ws":"1970-01-01T00:00:00.000Z","a":2,"n":5}'
    truth = {"results": [a, b]}
    assert compare(WINDOW, truth, [(1, "", 0, a), (2, "", 0, b)])["ok"]
    swapped = compare(WINDOW, truth, [(1, "", 0, b), (2, "", 0, a)])
    assert swapped["ok"] and not swapped["same_order"]
    wrong = compare(WINDOW, truth, [(1, "", 0, a), (2, "", 0, b.replace(b'"n":5', b'"n":6'))])
    assert wrong["wrong"] == 1 and not wrong["ok"]


def test_window_results_that_name_no_group_are_compared_in_order():
    spec = parse_pipeline(TABLE + "SELECT count(*) AS n FROM t GROUP BY window(at, '1 second')")
    assert not spec.plan.names_groups and WINDOW.plan.names_groups
    truth = {"results": [b'{"n":2}', b'{"n":5}']}
    assert compare(spec, truth, [(1, "", 0, b'{"n":2}'), (2, "", 0, b'{"n":5}')])["ok"]
    r = compare(spec, truth, [(1, "", 0, b'{"n":2}'), (2, "", 0, b'{"n":4}'), (3, "", 0, b'{"n":4}')])
    assert (r["wrong"], r["duplicated"], r["ok"]) == (1, 1, False)
