# One image for every node role (Nu, N, N', Nd) and the generator, Spark runtime included.
# BASE defaults to the official Python image; here, a locally imported Debian base (deploy/docker/local-base.sh).
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE}
ARG PIP_INDEX_URL
ENV DEBIAN_FRONTEND=noninteractive PYTHONUNBUFFERED=1 PYTHONPATH=/app/services:/app/spark PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    PYSPARK_PYTHON=/opt/venv/bin/python PATH=/opt/venv/bin:$PATH
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps ca-certificates openssl \
      python3 python3-venv && rm -rf /var/lib/apt/lists/*
COPY requirements.txt /app/requirements.txt
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir -r /app/requirements.txt
COPY proto /app/proto
COPY services /app/services
COPY spark/lazystandby_spark /app/spark/lazystandby_spark
COPY deploy/tls/make-certs.sh /app/deploy/tls/make-certs.sh
RUN /opt/venv/bin/python -m grpc_tools.protoc -I/app/proto --python_out=/app/services \
      --grpc_python_out=/app/services /app/proto/lazystandby/v1/lazystandby.proto
WORKDIR /app
# Health over the node's own port: with mutual TLS (LS_TLS_*), the probe presents the node's own certificate.
HEALTHCHECK --interval=2s --timeout=2s --retries=30 CMD python -c "import grpc,os; from grpc_health.v1 import health_pb2 as h, health_pb2_grpc as g; \
  e=os.environ; a=e.get('LS_LISTEN','127.0.0.1:50051').replace('0.0.0.0','127.0.0.1'); r=lambda k: open(e[k],'rb').read(); \
  ch=grpc.secure_channel(a, grpc.ssl_channel_credentials(r('LS_TLS_CA'), r('LS_TLS_KEY'), r('LS_TLS_CERT'))) if e.get('LS_TLS_CERT') else grpc.insecure_channel(a); \
  assert g.HealthStub(ch).Check(h.HealthCheckRequest(), timeout=1).status == 1"
ENTRYPOINT ["python", "-m", "lazystandby.cli"]
CMD ["node"]
