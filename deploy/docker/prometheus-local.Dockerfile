# Prometheus from Debian's package (already in the local base), laid out like prom/prometheus.
ARG BASE=lazystandby/debian:bookworm
FROM ${BASE}
ENTRYPOINT ["/usr/bin/prometheus", "--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
