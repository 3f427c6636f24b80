"""What a Spark node's JVM and session write to the system's temporary directory: a node killed with -9
cannot remove them, so the harness points them into the run's work directory (Topology.scratch_dir)."""

import tempfile
from pathlib import Path

SPARK_SCRATCH = ("spark-", "blockmgr-", "artifacts-", "liblz4-java", "lazystandby-spark-N", "lazystandby-pyfiles-")


def spark_scratch() -> set[str]:
    """The names of such files and directories in the system's temporary directory now."""
    return {p.name for p in Path(tempfile.gettempdir()).iterdir() if p.name.startswith(SPARK_SCRATCH)}
