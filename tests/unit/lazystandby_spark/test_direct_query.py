import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def direct_query():
    spec = importlib.util.spec_from_file_location("direct_query", ROOT / "spark" / "direct_query.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_pipeline_that_ranks_is_refused_before_spark_starts(capsys):
    """Spark's peer cannot rank a streaming aggregation's rows: it says so and starts no session (which
    would cost seconds and a JVM)."""
    rc = direct_query().main(["--bootstrap", "127.0.0.1:1", "--checkpoint", "/nonexistent",
                              "--pipeline", str(ROOT / "examples" / "nexmark-q5-whole.sql")])
    assert rc == 2 and "QUALIFY" in capsys.readouterr().err
