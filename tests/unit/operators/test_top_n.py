import pyarrow as pa
import pytest

from lazystandby.formats.schema import parse_table
from lazystandby.formats.sql import plan
from lazystandby.operators.top_n import top_mask

T = parse_table("CREATE TABLE t (k VARCHAR, v BIGINT, at BIGINT, WATERMARK FOR at AS at)")


def mask(qualify, wins, vals):
    p = plan(f"SELECT k, window.start, max(v) AS hi FROM t GROUP BY window(at, '1 second'), k QUALIFY {qualify}",
             {"t": T})
    cols = {"_agg0": pa.array(vals, pa.int64()), "k": pa.array([str(i) for i in range(len(vals))])}
    return top_mask(p.top, cols, [pa.array(wins, pa.int64())], len(vals)).to_pylist()


WINS = [0, 0, 0, 0, 1000, 1000, 1000]
VALS = [5, 9, 9, 7, 1, None, 1]


@pytest.mark.parametrize("qualify, kept", [
    # Ties share a rank: both 9s are first in window 0, and the next rank after them is 3.
    ("rank() OVER (PARTITION BY window.start ORDER BY hi DESC) <= 1", [0, 1, 1, 0, 1, 0, 1]),
    ("rank() OVER (PARTITION BY window.start ORDER BY hi DESC) <= 2", [0, 1, 1, 0, 1, 0, 1]),
    ("dense_rank() OVER (PARTITION BY window.start ORDER BY hi DESC) <= 2", [0, 1, 1, 1, 1, 1, 1]),
    # Ascending puts NULL first (Spark's default); NULLS LAST as written moves it behind.
    ("rank() OVER (PARTITION BY window.start ORDER BY hi) = 1", [1, 0, 0, 0, 0, 1, 0]),
    ("rank() OVER (PARTITION BY window.start ORDER BY hi NULLS LAST) < 2", [1, 0, 0, 0, 1, 0, 1]),
    ("rank() OVER (PARTITION BY window.start ORDER BY hi DESC NULLS FIRST) <= 1", [0, 1, 1, 0, 0, 1, 0]),
])
def test_a_window_keeps_its_top_groups_with_every_tie(qualify, kept):
    assert mask(qualify, WINS, VALS) == [bool(x) for x in kept]


def test_no_rows_keep_nothing_and_one_row_is_first():
    assert mask("rank() OVER (PARTITION BY window.start ORDER BY hi) <= 1", [], []) == []
    assert mask("rank() OVER (PARTITION BY window.start ORDER BY hi) <= 1", [0], [3]) == [True]
