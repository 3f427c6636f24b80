#!/usr/bin/env bash
# Build the local base image `lazystandby/debian:bookworm` without a container registry: debootstrap of
# Debian bookworm (Python, a JRE for Spark and Kafka, CA certificates) imported into Docker. The host's CA
# bundle is copied in, so builds on top of it reach PyPI where the host does. Idempotent: skipped when the
# image exists (LS_REBUILD_BASE=1 forces it).
set -euo pipefail
image=lazystandby/debian:bookworm
if docker image inspect "$image" >/dev/null 2>&1 && [[ -z "${LS_REBUILD_BASE:-}" ]]; then
  exit 0
fi
command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }
root=$(mktemp -d /tmp/lazystandby-rootfs.XXXX)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase \
  --include=ca-certificates,python3,python3-venv,openjdk-17-jre-headless,procps,prometheus \
  bookworm "$root" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >/dev/null
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$image" >/dev/null
echo "built $image"
