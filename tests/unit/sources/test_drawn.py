import pyarrow as pa

from lazystandby.formats.by_name import record_format
from lazystandby.formats.schema import parse_table
from lazystandby.sources.drawn import draw_records, draw_rows
from lazystandby.sources.pipeline_load import is_nexmark, is_ticks, records

T = parse_table("""CREATE TABLE r (device VARCHAR(4) NOT NULL, temp DOUBLE, level DECIMAL(5, 2), ok BOOLEAN,
  at TIMESTAMP(3) NOT NULL, WATERMARK FOR at AS at - INTERVAL '1' SECOND) WITH ('format' = 'json')""")


def test_the_draw_is_deterministic_and_every_record_is_admitted():
    a = draw_records(T, 2000, seed=3, iso_times=True)
    assert a == draw_records(T, 2000, seed=3, iso_times=True) and a != draw_records(T, 2000, seed=4)
    assert draw_records(T, 100, seed=3, first=1900, iso_times=True) == a[1900:]
    d = record_format(T).decode(pa.array(a, pa.binary()))
    assert not d.bad and 0 < d.table.column("temp").null_count < 400


def test_event_times_step_back_now_and_then():
    times = [r["at"] for r in draw_rows(T, 5000, seed=2)]
    assert any(b < a for a, b in zip(times, times[1:], strict=False))


def test_the_load_picks_each_tables_generator():
    ticks = parse_table("CREATE TABLE ticks (symbol VARCHAR, price DECIMAL(15, 6), volume BIGINT, ts TIMESTAMP(3), "
                        "venue VARCHAR) WITH ('format' = 'csv')")
    bid = parse_table("CREATE TABLE bid (auction BIGINT, date_time TIMESTAMP(3)) WITH ('format' = 'json')")
    assert is_ticks(ticks) and not is_ticks(T) and is_nexmark(bid) and not is_nexmark(T)
    made = list(records(ticks, 5))
    assert len(made) == 5 and not record_format(ticks).decode(pa.array(made, pa.binary())).bad
    assert list(records(T, 3, seed=1)) == draw_records(T, 3, seed=1, iso_times=True)
