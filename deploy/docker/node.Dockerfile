# One image for every node role (Nu, N, N', Nd), the generator and the certs job, Spark runtime included.
# Runtime dependencies only (requirements.lock), one Python, a non-root user.
# BASE defaults to the official Python image; here, a locally imported Debian base (deploy/docker/local-base.sh).
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE}
ARG PIP_INDEX_URL
ENV DEBIAN_FRONTEND=noninteractive PYTHONUNBUFFERED=1 PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    PYSPARK_PYTHON=/opt/venv/bin/python PATH=/opt/venv/bin:$PATH
# Java for Spark, openssl for the certs job; Debian's Python only where the base brings none (the local base).
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps ca-certificates \
      openssl $(command -v python3 >/dev/null || echo python3 python3-venv) && rm -rf /var/lib/apt/lists/*
COPY requirements.lock /tmp/requirements.lock
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir -r /tmp/requirements.lock
# The package itself; its build step generates the protocol modules (grpcio-tools only in the build's own env).
COPY pyproject.toml setup.py README.md /tmp/src/
COPY proto /tmp/src/proto
COPY services /tmp/src/services
COPY spark/lazystandby_spark /tmp/src/spark/lazystandby_spark
COPY deploy/tls/make-certs.sh /tmp/src/deploy/tls/make-certs.sh
RUN /opt/venv/bin/pip install --no-cache-dir --no-deps /tmp/src && rm -rf /tmp/src /tmp/requirements.lock \
    && /opt/venv/bin/python -m pip uninstall -y -q pip setuptools  # no build tools left in the image
COPY deploy/tls/make-certs.sh /app/deploy/tls/make-certs.sh
# The `nexmark` crate's generator, for a Nexmark pipeline's load (build.sh installs it into .cache when
# cargo is there; without it the directory is empty and such a load says how to get it).
COPY .cache/nexmark/bin/ /opt/nexmark/bin/
ENV NEXMARK_BIN=/opt/nexmark/bin/nexmark
RUN useradd --system --uid 10001 --home-dir /app --shell /usr/sbin/nologin lazystandby && chown -R lazystandby /app
USER 10001
WORKDIR /app
# Health over the node's own port, following its role (a fenced primary is NOT_SERVING); with mutual TLS
# (LS_TLS_*), the probe presents the node's own certificate. A node of the Spark operator serves only once
# its Spark session and query run, which on two cores shared by four such nodes takes longer than the
# retries' minute: failures in the start period (the stack's start bound, as `up --wait` and the chaos
# runner allow) do not count, and the first probe that passes ends it.
HEALTHCHECK --interval=2s --timeout=2s --retries=30 --start-period=300s CMD python -c "import grpc,os; from grpc_health.v1 import health_pb2 as h, health_pb2_grpc as g; \
  e=os.environ; a=e.get('LS_LISTEN','127.0.0.1:50051').replace('0.0.0.0','127.0.0.1'); r=lambda k: open(e[k],'rb').read(); \
  ch=grpc.secure_channel(a, grpc.ssl_channel_credentials(r('LS_TLS_CA'), r('LS_TLS_KEY'), r('LS_TLS_CERT'))) if e.get('LS_TLS_CERT') else grpc.insecure_channel(a); \
  assert g.HealthStub(ch).Check(h.HealthCheckRequest(), timeout=1).status == 1"
ENTRYPOINT ["python", "-m", "lazystandby.cli"]
CMD ["node"]
