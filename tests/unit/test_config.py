"""Typed settings: defaults, env vars and flags in layers, refusals, the generated table in docs/settings.md."""

import re

import pytest

from lazystandby.config import NodeConfig, load


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


def test_the_settings_table_is_generated_from_the_config():
    from dataclasses import fields
    from pathlib import Path

    from lazystandby.config import NodeConfig, settings_markdown

    assert all(f.metadata.get("help") for f in fields(NodeConfig) if f.name != "extra")  # every setting explained
    doc = (Path(__file__).resolve().parents[2] / "docs" / "settings.md").read_text()
    table = doc.split("<!-- settings:begin -->\n", 1)[1].split("<!-- settings:end -->", 1)[0]
    assert table == settings_markdown(), "run: python -m lazystandby.config, and paste it into docs/settings.md"


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


def test_a_query_is_checked_where_it_is_set():
    from lazystandby.config import NodeConfig
    from lazystandby.core.errors import SettingError

    assert NodeConfig().parsed_query.kind == "select" and NodeConfig().parsed_query.where == "price > 100"
    assert NodeConfig(query="window").parsed_query.stateful
    with pytest.raises(SettingError, match=r"query .*LS_QUERY.*is not a SELECT; a tick query is SELECT \* FROM ticks"):
        NodeConfig(query="count everything")
    assert NodeConfig(query="window", operator="spark", spark_state_store="rocksdb").parsed_query.stateful
    with pytest.raises(SettingError, match=r"query .*tumbling windows with the Spark operator"):
        NodeConfig(query="SELECT symbol, count(*) FROM ticks "
                         "GROUP BY window(ts, '1 second', '500 milliseconds'), symbol", operator="spark")
    with pytest.raises(SettingError, match=r"spark_state_store .*hdfs or rocksdb"):
        NodeConfig(spark_state_store="memory")
    with pytest.raises(SettingError, match="chaos_poison"):
        NodeConfig(query="window", chaos_poison="x")
    with pytest.raises(SettingError, match="watermark_every"):
        NodeConfig(watermark_every=1)
    with pytest.raises(SettingError, match="keys"):
        NodeConfig(keys=1_000_001)


def _bounded():
    from dataclasses import fields

    return [f for f in fields(NodeConfig) if f.metadata.get("low") is not None or f.metadata.get("above") is not None
            or f.metadata.get("high") is not None]


@pytest.mark.parametrize("f", _bounded(), ids=lambda f: f.name)
def test_each_declared_bound_is_the_check_and_says_what_it_accepts(f):
    from lazystandby.config import to_args
    from lazystandby.core.errors import SettingError

    m = f.metadata
    kind = int if isinstance(f.default, int) else float
    if m["low"] is not None:
        below = kind(m["low"]) - 1
        said = re.escape(f"{f.name} (--{f.name.replace('_', '-')}, env LS_{f.name.upper()}): expected {m['checked']}")
        with pytest.raises(SettingError, match=f"^{said}, got"):
            load(to_args({f.name: below}), env={})
        assert getattr(load(to_args({f.name: kind(m["low"])}), env={}), f.name) == kind(m["low"])
    if m["above"] is not None:
        with pytest.raises(SettingError, match=rf"^{f.name} .*expected a number > {m['above']}"):
            NodeConfig(**{f.name: m["above"]})
    if m["high"] is not None:
        with pytest.raises(SettingError, match=rf"^{f.name} .*expected a whole number \d+-"):
            NodeConfig(**{f.name: m["high"] + 1})
        assert getattr(NodeConfig(**{f.name: m["high"]}), f.name) == m["high"]


@pytest.mark.parametrize("name,bad", [("role", "boss"), ("operator", "flink"), ("standby_state", "cold"),
                                      ("spark_state_store", "memory")])
def test_a_setting_of_declared_choices_names_them(name, bad):
    from dataclasses import fields

    from lazystandby.core.errors import SettingError

    choices = {f.name: f.metadata.get("choices") for f in fields(NodeConfig)}[name]
    said = " or ".join(choices) if len(choices) == 2 else "one of " + ", ".join(choices)
    with pytest.raises(SettingError, match=f"expected {said}, got"):
        NodeConfig(**{name: bad})


def test_an_on_off_setting_refuses_a_word_it_does_not_know():
    from lazystandby.core.errors import SettingError

    assert load(["--exit-when-fenced", "on"], env={}).exit_when_fenced is True
    assert load([], env={"LS_HANDOVER_ON_STOP": "off"}).handover_on_stop is False
    with pytest.raises(SettingError, match=r"exit_when_fenced .*expected true or false .*got 'maybe'"):
        load(["--exit-when-fenced", "maybe"], env={})


def test_the_flags_help_is_the_declared_meaning(capsys):
    with pytest.raises(SystemExit):
        load(["--help"], env={})
    out = " ".join(capsys.readouterr().out.split())
    assert "most tuples per frame on every link" in out and "env LS_FRAME_MAX" in out
    assert "accepts a whole number >= 1" in out
