#!/usr/bin/env bash
# `make up`: make sure a Docker engine and Compose v2 exist, build what cannot be pulled, start the stack
# and wait until it is healthy. LS_LOCAL_IMAGES=0 uses the official images instead (a laptop with internet).
set -euo pipefail
cd "$(dirname "$0")/../.."
read -ra files < <(bash deploy/docker/build.sh)
if [[ "${LS_LOCAL_IMAGES:-1}" == "1" ]]; then
  echo "local images: Grafana is not available on this machine and is left out (on a laptop it starts provisioned)"
fi
# Everything healthy first; then the generator (it exits when its load is written, so it is not waited on).
docker compose -p lazystandby "${files[@]}" up -d --wait --wait-timeout 600 kafka nd n n-standby nu prometheus
docker compose -p lazystandby "${files[@]}" up -d generator
docker compose -p lazystandby "${files[@]}" ps
