import pytest

from lazystandby.config import NodeConfig, load
from lazystandby.core.errors import PredicateError
from lazystandby.core.tuples import TupleBatch
from lazystandby.formats.control import encode as control_payload
from lazystandby.formats.predicate import compile_predicate
from lazystandby.formats.ticks import Tick
from lazystandby.harness.check import compare, expected_outputs
from lazystandby.operators.selection import Selection


def fields(**kw):
    t = Tick(**{"symbol": "ACME", "price": 101.5, "volume": 300, "ts": 1, "venue": "XTKS", **kw})
    return t.encode().decode().split(",")


@pytest.mark.parametrize("expr,tick,want", [
    ("price > 100", {}, True),
    ("price > 100", {"price": 99.0}, False),
    ("price > 100 AND volume >= 500", {}, False),
    ("price > 100 OR volume >= 500", {"price": 1.0, "volume": 600}, True),
    ("NOT (venue = 'XTKS')", {}, False),
    ("symbol <> 'ACME' or (price <= 101.5 and ts = 1)", {}, True),
])
def test_predicate_language(expr, tick, want):
    assert compile_predicate(expr)(fields(**tick)) is want


@pytest.mark.parametrize("expr", ["price >", "colour = 'red'", "price > 'x'", "symbol = 3", "price > 1 junk",
                                  "__import__('os')", "(price > 1"])
def test_bad_predicates_are_refused_with_a_reason(expr):
    with pytest.raises(PredicateError):
        compile_predicate(expr)


def test_selection_switches_predicate_at_the_control_tuple_position():
    ticks = [Tick("A", p, 100, 1, "X").encode() for p in (50.0, 150.0, 50.0, 150.0)]
    b = TupleBatch(first=1, streams=[1, 1, 0, 1, 1], seqs=[1, 2, 3, 3, 4],
                   payloads=[ticks[0], ticks[1], control_payload("price < 100"), ticks[2], ticks[3]])
    sel = Selection("price > 100")
    assert sel.process(b).tolist() == [1, 3]
    assert sel.switches == [(3, "price < 100")]


def test_selection_counts_unparseable_payloads_and_skips_them():
    b = TupleBatch(first=1, streams=[1, 1], seqs=[1, 2], payloads=[b"garbage", Tick("A", 200.0, 1, 1, "X").encode()])
    sel = Selection("price > 100")
    assert sel.process(b).tolist() == [1] and sel.unparseable == 1


def test_config_layers_defaults_env_and_flags():
    cfg = load(["--bsize", "inf", "--role", "standby"], env={"LS_BSIZE": "5", "LS_CODEC": "zstd"})
    assert cfg.bsize is None and cfg.codec == "zstd" and cfg.name == "N'"
    assert load([], env={"LS_BSIZE": "5"}).bsize == 5
    assert load([], env={"LS_HEARTBEAT_INTERVAL": "0.5"}).heartbeat_interval == 0.5


@pytest.mark.parametrize("bad", [{"role": "boss"}, {"codec": "lz4"}, {"bsize": "0"}, {"dict_samples": 0},
                                 {"dict_size": -1}])
def test_config_refuses_bad_values(bad):
    with pytest.raises(ValueError):
        NodeConfig(**bad)


def test_truth_table_check_reports_loss_duplication_and_order():
    exp = expected_outputs(["I1", "I2"], seed=1, total=200, predicate="price > 100")
    good = [(i + 1, s, q) for i, (s, q) in enumerate(exp)]
    assert compare(exp, good).ok
    lost = compare(exp, good[:5] + good[6:])
    assert lost.lost == 1 and lost.oseq_gaps > 0 and lost.diff
    dup = compare(exp, good + [(len(good) + 1, *exp[3])])
    assert dup.duplicated == 1
    i1 = [i for i, (s, _) in enumerate(exp) if s == "I1"][:2]
    order = list(exp)
    order[i1[0]], order[i1[1]] = order[i1[1]], order[i1[0]]
    swapped = compare(exp, [(i + 1, s, q) for i, (s, q) in enumerate(order)])
    assert swapped.out_of_order >= 1 and swapped.lost == 0 and not swapped.ok
    k = next(i for i in range(len(exp) - 1) if exp[i][0] != exp[i + 1][0])  # two outputs of different streams
    across = compare(exp, [(i + 1, s, q) for i, (s, q) in enumerate(exp[:k] + exp[k:k + 2][::-1] + exp[k + 2:])])
    assert across.out_of_order == 0 and not across.same_order and not across.ok
    extra = compare(exp, good + [(len(good) + 1, "I1", 10**9)])
    assert extra.unexpected == 1 and extra.duplicated == 0 and not extra.ok


def test_control_records_are_validated_as_control_not_as_ticks():
    from lazystandby.core.errors import MalformedRecord
    from lazystandby.formats.control import validate_control

    validate_control(control_payload("price > 5"))
    for bad in [b"price > 5", b'{"predicate": "colour = 1"}', b'{"x": 1}', b"\xff"]:
        with pytest.raises(MalformedRecord):
            validate_control(bad)


def test_typed_settings_round_trip_through_node_flags():
    from lazystandby.config import to_args

    args = to_args({"bsize": None, "codec": "zstd", "rate": 5000.0, "heartbeat_misses": 5})
    assert args == ["--bsize", "inf", "--codec", "zstd", "--rate", "5000.0", "--heartbeat-misses", "5"]
    cfg = load(args, env={})
    assert cfg.bsize is None and cfg.codec == "zstd" and cfg.rate == 5000.0 and cfg.heartbeat_misses == 5
    assert load(to_args({"bsize": 10}), env={}).bsize == 10
    with pytest.raises(ValueError, match="unknown setting 'bsise'"):
        to_args({"bsise": 10})


def test_kafka_bootstrap_is_read_one_way():
    from lazystandby.config import kafka_bootstrap_from_env

    assert kafka_bootstrap_from_env({"KAFKA_BOOTSTRAP": "a:1"}) == "a:1"
    assert kafka_bootstrap_from_env({"KAFKA_BOOTSTRAP": "a:1", "LS_KAFKA_BOOTSTRAP": "b:2"}) == "b:2"
    assert kafka_bootstrap_from_env({}) == ""


def test_spark_parse_columns_come_from_the_tick_schema():
    from lazystandby.formats.ticks import FIELDS, spark_columns

    cols = spark_columns("payload")
    assert [c.rsplit(" AS ", 1)[1] for c in cols] == [name for name, _ in FIELDS]
    assert cols[1] == "try_cast(split(payload, ',')[1] AS DOUBLE) AS price"
    assert cols[0] == "split(payload, ',')[0] AS symbol"


def test_control_record_encode_decode_and_refusals():
    from lazystandby.core.errors import MalformedRecord
    from lazystandby.formats import control

    assert control.decode(control.encode("price < 7")) == "price < 7"
    for bad in (b"{}", b"not json", b'{"predicate": 5}', control.encode("price >>> 3")):
        with pytest.raises(MalformedRecord, match="control record refused"):
            control.decode(bad)


def test_the_readme_settings_table_is_generated_from_the_config():
    from pathlib import Path

    from lazystandby.config import HELP, NodeConfig, settings_markdown

    assert set(HELP) == {f for f in NodeConfig.__dataclass_fields__ if f != "extra"}  # every setting explained
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    table = readme.split("<!-- settings:begin -->\n", 1)[1].split("<!-- settings:end -->", 1)[0]
    assert table == settings_markdown(), "run: python -m lazystandby.config, and paste it into the README"


def test_the_takeover_lease_must_run_out_before_a_declined_standby_suspects_a_crashed_primary_again():
    from lazystandby.config import NodeConfig, load, to_args
    from lazystandby.core.errors import SettingError

    assert NodeConfig().lease_s == pytest.approx(0.075)  # auto: three quarters of the 0.1 s interval
    assert NodeConfig(heartbeat_interval=0.2).lease_s == pytest.approx(0.15)  # it follows the detector
    with pytest.raises(SettingError, match=r"takeover_lease .*below heartbeat_interval \(0.05"):
        NodeConfig(heartbeat_interval=0.05, takeover_lease=0.075)
    assert NodeConfig(heartbeat_interval=0.05, takeover_lease=0.04).lease_s == 0.04
    assert NodeConfig(takeover_lease=0).lease_s == 0
    assert load([], env={"LS_TAKEOVER_LEASE": "0.05"}).lease_s == 0.05
    assert load(["--takeover-lease", "auto"], env={"LS_TAKEOVER_LEASE": "0.05"}).takeover_lease is None
    assert load(to_args({"takeover_lease": None}), env={}).takeover_lease is None
    with pytest.raises(SettingError, match="takeover_lease .*auto or a number of seconds"):
        NodeConfig(takeover_lease="soon")


def test_spark_settings_pass_through_and_the_feed_address_follows_bind_and_advertise():
    from lazystandby.config import load, to_args
    from lazystandby.core.errors import SettingError
    from lazystandby.operators.spark import feed_address

    c = load(["--spark-conf", "spark.executor.memory=2g", "--spark-conf", "spark.sql.shuffle.partitions=4"],
             env={"LS_SPARK_CONF": "spark.ignored=1"})
    assert c.spark_conf == ("spark.executor.memory=2g", "spark.sql.shuffle.partitions=4")  # flags win
    assert load(to_args({"spark_conf": c.spark_conf}), env={}).spark_conf == c.spark_conf
    assert load([], env={"LS_SPARK_CONF": "spark.a=1; spark.b=x=y"}).spark_conf == ("spark.a=1", "spark.b=x=y")
    with pytest.raises(SettingError, match="spark_conf"):
        load(["--spark-conf", "executor.memory=2g"], env={})
    assert feed_address("127.0.0.1:0", "", 5000) == "127.0.0.1:5000"
    assert feed_address("0.0.0.0:0", "node-1", 5001) == "node-1:5001"
    assert feed_address("0.0.0.0:0", "node-1:9000", 5001) == "node-1:9000"


def test_the_harness_picks_ports_below_the_kernels_ephemeral_range_and_never_twice(monkeypatch):
    """A port the kernel picked for bind(0) is one it may hand to the next process that connects anywhere
    (a Spark JVM opens dozens): the harness picks from below that range, distinct ports, each free."""
    import socket

    from lazystandby.harness import launcher

    low, _ = launcher.ephemeral_range()
    ports = launcher.free_ports(40)
    assert len(set(ports)) == 40
    assert all(launcher.PORTS_FROM <= p < low for p in ports)
    s = socket.socket()
    s.bind(("127.0.0.1", ports[0]))  # free when handed out
    s.close()
    # A range that leaves no room below it: the kernel's choice, still distinct.
    monkeypatch.setattr(launcher, "ephemeral_range", lambda: (launcher.PORTS_FROM + 1, 60999))
    assert len(set(launcher.free_ports(5))) == 5


def test_the_ephemeral_range_is_read_from_the_kernel_or_defaults(tmp_path):
    from lazystandby.harness.launcher import ephemeral_range

    f = tmp_path / "range"
    f.write_text("40000\t50000\n")
    assert ephemeral_range(str(f)) == (40000, 50000)
    assert ephemeral_range(str(tmp_path / "missing")) == (32768, 60999)


def test_a_chaos_campaign_takes_codec_and_bsize_for_every_run_and_refuses_bad_ones(monkeypatch, tmp_path, capsys):
    import json

    from lazystandby.harness import campaign

    trials = []

    def fake_trial(**kw):
        trials.append(kw)
        return {"ok": True, "lost": 0, "duplicated": 0, "expected": 10, "got": 10, "delivered_all": True,
                "failovers": 1, "workdir": ""}

    monkeypatch.setattr(campaign, "run_trial", fake_trial)
    monkeypatch.setattr(campaign, "run_dir", lambda: tmp_path)
    monkeypatch.setattr(campaign.config, "kafka_bootstrap_from_env", lambda: "127.0.0.1:9")  # no broker started
    assert campaign.main(["--codec", "lz4"]) == 2
    assert "codec" in capsys.readouterr().err
    assert campaign.main(["--bsize", "0"]) == 2
    assert "bsize" in capsys.readouterr().err
    assert not trials
    assert campaign.main(["--runs", "2", "--seed", "1", "--codec", "zstd-dict", "--bsize", "inf"]) == 0
    assert [(t["codec"], t["bsize"]) for t in trials] == [("zstd-dict", None)] * 2
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (summary["codec"], summary["bsize"], summary["runs"]) == ("zstd-dict", "inf", 2)
