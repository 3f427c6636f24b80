#!/usr/bin/env bash
# Install Prometheus (and promtool) from Debian's packages, for local runs and tests. Idempotent.
# Compose users get prom/prometheus instead.
set -euo pipefail
if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
SUDO=""
[[ $(id -u) -eq 0 ]] || SUDO="sudo"
# No service start from the package's postinst: our fixtures start their own instance on loopback.
printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
$SUDO chmod +x /usr/sbin/policy-rc.d
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
$SUDO rm -f /usr/sbin/policy-rc.d
command -v promtool >/dev/null
