"""The compose stack of a pipeline of several stages (LS_PIPELINE naming a file with CREATE VIEW ...).

Stage 1 runs on the stack's own node services (nu, n, n-standby, the spares, nd); each later stage K on
copies of them named `sK-nu`, `sK-n`, `sK-n-standby`, ...: a primary and its standby per stage, with its
own Nu (reading its view, which an earlier stage writes) and Nd (writing its own view, or its sink).
Compose has no loop over a list, so the copies are written into an override file beside
docker-compose.yml, generated from the stack's own definitions as `docker compose config
--no-interpolate` reads them: a stage-K node is
what the stage-1 node is, with its stage (LS_STAGE), its addresses, its certificate and its Spark driver's
host its own. Its `${...}` settings stay unresolved, so `.env` and the environment set every stage alike.
The certs job makes every copy's certificate, and Prometheus scrapes every stage's nodes (the scrape file
rewritten the same way, each series labelled with its node's `pipeline_stage`).

    python -m lazystandby.harness.compose_stages flags      # the compose -f flags for LS_PIPELINE
    python -m lazystandby.harness.compose_stages services   # the node services of every stage, Nd first

With no pipeline, or one of a single stage, there is no override and the stack is the one of
docker-compose.yml.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from ..core.errors import SettingError

ROOT = Path(__file__).resolve().parents[3]
BASE_FILES = ("docker-compose.yml", "deploy/docker/compose.local.yml")
# The node services of one stage, in the order they start (Nd first, Nu last: it pushes to the others).
NODES = ("nd", "n", "n-standby", "n-standby-2", "n-standby-3", "nu")
RUNNING = ("nd", "n", "n-standby", "nu")  # the spares start only when a fault asks for them
OUT = Path("run") / "compose"  # under the project directory: the override names its files relative to it

# A node service's name where it is a whole host name: in an address (nu:50051), a certificate's path
# (/tls/nu.crt) or a Spark driver's host (spark.driver.host=n). Longest first, so n-standby-2 is not read
# as n-standby.
_HOST = re.compile(r"(?<![\w-])(" + "|".join(re.escape(s) for s in sorted(NODES, key=len, reverse=True))
                   + r")(?=[:.]|$)")
_RENAMED_ENV = ("LS_TLS_CERT", "LS_TLS_KEY", "LS_SPARK_FEED_ADVERTISE", "LS_SPARK_CONF")


def service(name: str, stage: int) -> str:
    """Stage `stage`'s copy of the stack's node service `name` (stage 1, or 0 for no pipeline: itself)."""
    return name if stage <= 1 else f"s{stage}-{name}"


def stage_of(name: str) -> int:
    """The stage whose copy the service `name` is (1: the stack's own services)."""
    m = re.match(r"s(\d+)-", name)
    return int(m.group(1)) if m else 1


def services(stages: int, names: tuple[str, ...] = RUNNING) -> list[str]:
    """Every stage's copies of `names`, stage by stage."""
    return [service(n, k) for k in range(1, max(stages, 1) + 1) for n in names]


def _rename(text: str, stage: int) -> str:
    return _HOST.sub(lambda m: service(m.group(1), stage), text)


def _volume(v: dict | str) -> str:
    """A volume in the short syntax, which compose reads as a bind or a named volume once it has
    interpolated its source (`config --no-interpolate` reports an unresolved bind as a volume)."""
    if isinstance(v, str):
        return v
    return f"{v['source']}:{v['target']}{':ro' if v.get('read_only') else ''}"


def copy(node: dict, stage: int) -> dict:
    """Stage `stage`'s copy of a stage-1 node service `node` (as `config --no-interpolate` gives it)."""
    env = {k: _rename(v, stage) if k in _RENAMED_ENV and isinstance(v, str) else v
           for k, v in (node.get("environment") or {}).items()}
    env["LS_STAGE"] = str(stage)
    out = {k: v for k, v in node.items() if k not in ("build", "container_name", "volumes", "depends_on",
                                                     "environment", "command")}
    out["environment"] = env
    out["command"] = [_rename(a, stage) for a in node.get("command") or []]
    out["volumes"] = [_volume(v) for v in node.get("volumes") or []]
    out["depends_on"] = {(service(d, stage) if d in NODES else d): {"condition": c["condition"]}
                         for d, c in (node.get("depends_on") or {}).items()}
    return out


def override(base: dict, stages: int, scrape_file: str) -> dict:
    """The override of a stack of `stages` stages: LS_STAGE=1 on the stack's own nodes, a copy of them per
    later stage, every copy's certificate in the certs job, and `scrape_file` as Prometheus' scrape file."""
    svcs = base["services"]
    out: dict = {name: {"environment": {"LS_STAGE": "1"}} for name in NODES}
    certs = list(svcs["certs"]["entrypoint"])
    for k in range(2, stages + 1):
        for name in NODES:
            out[service(name, k)] = copy(svcs[name], k)
        certs += [f"{service(name, k)}:{role}" for name, _, role in (a.partition(":") for a in certs[3:])
                  if name in NODES]
    out["certs"] = {"entrypoint": certs}
    out["prometheus"] = {"volumes": [f"{scrape_file}:/etc/prometheus/prometheus.yml:ro"]}
    return {"services": out}


def scrape_config(text: str, stages: int) -> str:
    """deploy/prometheus/prometheus.yml with each node target ("nu:9100") joined by its stages' copies."""
    def every_stage(m: re.Match) -> str:
        return ", ".join(f'"{service(m.group(1), k)}:{m.group(2)}"' for k in range(1, stages + 1))

    return re.sub(r'"(' + "|".join(re.escape(s) for s in NODES) + r'):(\d+)"', every_stage, text)


def host_pipeline(env: dict | None = None) -> Path | None:
    """The host's copy of the stack's pipeline (LS_PIPELINE, `examples/<file>`, read from LS_PIPELINE_DIR as
    the containers read it); None for the tick example. SettingError says what is wrong with it."""
    env = os.environ if env is None else env
    name = env.get("LS_PIPELINE", "")
    if not name:
        return None
    rel = Path(name)
    if rel.parts[:1] != ("examples",) or len(rel.parts) < 2:
        raise SettingError(f"LS_PIPELINE={name!r}: the stack reads a pipeline as examples/<file> (the host's "
                           f"LS_PIPELINE_DIR, ./examples by default, mounted at /app/examples)")
    path = Path(env.get("LS_PIPELINE_DIR") or ROOT / "examples").joinpath(*rel.parts[1:])
    if not path.is_file():
        raise SettingError(f"LS_PIPELINE={name!r}: no such file {path}")
    return path


def stage_count(env: dict | None = None) -> int:
    """How many stages the stack's pipeline runs (1 without one); SettingError for a file that does not
    read, with what is wrong in it."""
    from ..config import pipeline_stages

    path = host_pipeline(env)
    if path is None:
        return 1
    try:
        return len(pipeline_stages(str(path)))
    except ValueError as e:
        raise SettingError(f"LS_PIPELINE: {e}") from None


def base_files(env: dict | None = None) -> tuple[str, ...]:
    """The stack's compose files: with the local images' override unless LS_LOCAL_IMAGES=0 (a laptop with
    internet), as deploy/docker/build.sh chooses."""
    env = os.environ if env is None else env
    return BASE_FILES if env.get("LS_LOCAL_IMAGES", "1") == "1" else BASE_FILES[:1]


def write(stages: int, files: tuple[str, ...] | None = None, root: Path = ROOT) -> list[str]:
    """Write the override of a stack of `stages` stages (none for one) and return the compose -f flags."""
    files = base_files() if files is None else files
    flags = [a for f in files for a in ("-f", str(root / f))]
    if stages <= 1:
        return flags
    base = json.loads(subprocess.run(["docker", "compose", "-p", "lazystandby", *flags, "--profile", "spares",
                                      "config", "--no-interpolate", "--format", "json"], check=True,
                                     capture_output=True, text=True, cwd=root).stdout)
    out = root / OUT
    out.mkdir(parents=True, exist_ok=True)
    scrape = out / "prometheus.yml"
    scrape.write_text(scrape_config((root / "deploy" / "prometheus" / "prometheus.yml").read_text(), stages))
    (out / "stages.yml").write_text(json.dumps(override(base, stages, f"./{OUT / 'prometheus.yml'}"), indent=1))
    return [*flags, "-f", str(out / "stages.yml")]


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "flags"
    try:
        stages = stage_count()
    except SettingError as e:
        print(f"compose stages: {e}", file=sys.stderr)
        return 2
    if what == "services":
        print(" ".join(services(stages)))
    elif what == "flags":
        print(" ".join(write(stages)))
    else:
        print("usage: python -m lazystandby.harness.compose_stages [flags|services]", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
