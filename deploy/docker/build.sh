#!/usr/bin/env bash
# Build the stack's images: here (LS_LOCAL_IMAGES=1, the default) on local bases made without a registry;
# with LS_LOCAL_IMAGES=0 on the official images (a laptop with internet). Prints the compose file flags.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash deploy/docker/engine.sh
# The nexmark generator goes into the node image; where cargo is missing the image goes without it.
mkdir -p .cache/nexmark/bin
if command -v cargo >/dev/null && [[ ! -x .cache/nexmark/bin/nexmark ]]; then make -s nexmark >&2; fi
files=(-f docker-compose.yml)
if [[ "${LS_LOCAL_IMAGES:-1}" == "1" ]]; then
  bash deploy/docker/local-base.sh >&2
  bash deploy/kafka/resolve.sh >&2
  files+=(-f deploy/docker/compose.local.yml)
fi
docker compose -p lazystandby "${files[@]}" build >&2
echo "${files[@]}"
