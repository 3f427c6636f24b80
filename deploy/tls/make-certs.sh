#!/usr/bin/env bash
# A development CA and one certificate per node, for mutual TLS between nodes (make certs; the compose stack
# and the integration tests call it too). Idempotent: what exists is kept.
#
#   deploy/tls/make-certs.sh OUTDIR NAME:ROLE[:HOST,HOST...] ...
#
# The role is the certificate's common name prefix ("ROLE:NAME"): upstream, operator (N and N', which may
# become primary), downstream, or admin (launchers, checks, health probes: Status only). Every certificate
# is valid for server and client use, for its hosts, localhost and 127.0.0.1. For development only: the CA
# key sits beside the certificates; production uses the organisation's CA.
set -euo pipefail
out="${1:?usage: make-certs.sh OUTDIR NAME:ROLE[:HOSTS] ...}"
shift
command -v openssl >/dev/null || { echo "make-certs.sh: openssl is needed" >&2; exit 1; }
mkdir -p "$out"
umask 077
if [[ ! -s "$out/ca.crt" || ! -s "$out/ca.key" ]]; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -sha256 -subj "/CN=lazystandby development CA" \
    -keyout "$out/ca.key" -out "$out/ca.crt" 2>/dev/null
fi
for spec in "$@"; do
  IFS=: read -r name role hosts <<<"$spec"
  case "$role" in upstream|operator|downstream|admin) ;; *) echo "make-certs.sh: unknown role '$role' for $name" >&2; exit 2;; esac
  [[ -s "$out/$name.crt" && -s "$out/$name.key" ]] && continue
  san="DNS:localhost,IP:127.0.0.1"
  IFS=, read -ra hs <<<"${hosts:-$name}"
  for h in "${hs[@]}"; do
    if [[ "$h" =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]]; then san="$san,IP:$h"; elif [[ -n "$h" ]]; then san="$san,DNS:$h"; fi
  done
  ext="$(mktemp)"
  trap 'rm -f "$ext"' EXIT
  printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n' \
    "$san" >"$ext"
  openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=$role:$name" -keyout "$out/$name.key" \
    -out "$out/$name.csr" 2>/dev/null
  openssl x509 -req -in "$out/$name.csr" -CA "$out/ca.crt" -CAkey "$out/ca.key" -CAcreateserial -days 825 \
    -sha256 -extfile "$ext" -out "$out/$name.crt" 2>/dev/null
  rm -f "$out/$name.csr" "$ext"
done
chmod 644 "$out"/*.crt
# LS_CERTS_OWNER=uid: hand the files to the user the nodes run as (the compose stack's certs job runs as root).
if [[ -n "${LS_CERTS_OWNER:-}" ]]; then chown -R "$LS_CERTS_OWNER" "$out"; fi
