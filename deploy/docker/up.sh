#!/usr/bin/env bash
# `make up`: make sure a Docker engine and Compose v2 exist, build what cannot be pulled, start the stack
# and wait until it is healthy. LS_LOCAL_IMAGES=0 uses the official images instead (a laptop with internet).
# If the stack does not come up healthy, every container's log is kept in run/up-logs/ and the stack is
# taken down (containers, network, volumes).
set -euo pipefail
cd "$(dirname "$0")/../.."
flags=$(bash deploy/docker/build.sh)  # a failed build stops here (set -e)
# A pipeline of several stages (LS_PIPELINE): each later stage's nodes come from a generated override
# (harness/compose_stages.py), which also says which node services every stage runs.
py=.venv/bin/python
[[ -x "$py" ]] || py=python3
nodes=(nd n n-standby nu)
if [[ -n "${LS_PIPELINE:-}" ]]; then
  flags=$(PYTHONPATH=services "$py" -m lazystandby.harness.compose_stages flags)
  read -ra nodes <<< "$(PYTHONPATH=services "$py" -m lazystandby.harness.compose_stages services)"
fi
read -ra files <<< "$flags"
compose=(docker compose -p lazystandby "${files[@]}")
if [[ "${LS_LOCAL_IMAGES:-1}" == "1" ]]; then
  echo "local images: Grafana is not available on this machine and is left out (on a laptop it starts provisioned)"
fi
fail() {
  mkdir -p run/up-logs
  for svc in $("${compose[@]}" ps -a --services 2>/dev/null); do
    "${compose[@]}" logs --no-color --timestamps "$svc" > "run/up-logs/$svc.log" 2>&1 || true
  done
  "${compose[@]}" ps -a || true
  "${compose[@]}" --profile spares down -v --remove-orphans >/dev/null 2>&1 || true
  echo "make up: the stack did not come up healthy; logs of every container are in run/up-logs/" >&2
  exit 1
}
# Everything healthy first; then the generator (it exits when its load is written, so it is not waited on).
"${compose[@]}" up -d --wait --wait-timeout 600 kafka "${nodes[@]}" prometheus || fail
"${compose[@]}" up -d generator || fail
"${compose[@]}" ps
