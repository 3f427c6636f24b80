# lazystandby. Two commands set up a fresh machine and run:  make demo   and   make test
SHELL := /bin/bash
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROTO_OUT := services/lazystandby/v1/lazystandby_pb2.py
NATIVE_LIB := services/lazystandby/native/_zrun.so
export PYTHONPATH := $(CURDIR)/services:$(CURDIR)/spark:$(CURDIR)
export PYSPARK_PYTHON := $(CURDIR)/$(VPY)
export PYSPARK_DRIVER_PYTHON := $(CURDIR)/$(VPY)

KILLS ?= 20
BSIZE ?= 10
CODEC ?= zstd-stream-dict

DEMO_TOTAL ?= 40000
DEMO_RATE ?= 5000

.PHONY: nexmark quix-venv jvm-peers setup proto native lint test test-unit test-integration demo demo-window demo-local failover-check kafka-jars kafka-up kafka-down \
	prometheus dashboards-check bench bench-quick bench-links bench-window bench-nexmark bench-ab bench-spark-cycle up down chaos shape chaos-campaign certs test-system clean

$(STAMP): requirements.lock requirements-dev.lock pyproject.toml setup.py
	test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -r requirements-dev.lock
	$(VPY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

setup: $(STAMP) proto native

proto: $(PROTO_OUT)

# Nu's backup compressor in C (lazystandby.native); without a C compiler the codec stays on python-zstandard.
native: $(NATIVE_LIB)

$(NATIVE_LIB): services/lazystandby/native/zrun.c $(STAMP)
	$(VPY) services/lazystandby/native/build.py

$(PROTO_OUT): proto/lazystandby/v1/lazystandby.proto $(STAMP)
	$(VPY) -m grpc_tools.protoc -Iproto --python_out=services --grpc_python_out=services --pyi_out=services $<

lint: setup
	$(VPY) -m ruff check services tests bench grafana deploy spark

test-unit: setup
	$(VPY) -m pytest -q tests/unit

test-integration: setup kafka-jars prometheus jvm-peers nexmark
	$(VPY) -m pytest -q tests/integration

# Parallel test workers (pytest-xdist), one per two cores: on two cores the suite already keeps the CPUs
# busy (three workers there made timing tests fail and saved a fifth of the time), so it runs in one
# process. The system tier stays on one worker (one compose project). TEST_WORKERS=0: one process.
TEST_WORKERS ?= $(shell n=$$(nproc); echo $$(( n >= 4 ? n / 2 : 0 )))
PARALLEL = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)

# The whole suite (what .ci/run calls): lint, unit, integration (real Kafka, Spark, Prometheus), system
# (the compose stack on a Docker engine started here if missing, containers killed with the docker SDK).
test: setup kafka-jars prometheus jvm-peers nexmark
	$(VPY) -m ruff check services tests bench grafana deploy spark
	$(VPY) -m pytest -q -ra $(PARALLEL) tests/unit tests/integration tests/system

# The compose stack and chaos alone (part of `make test`).
test-system: setup
	$(VPY) -m pytest -q -ra tests/system

kafka-jars:
	bash deploy/kafka/resolve.sh

# The Nexmark generator: the `nexmark` crate's CLI from Rust's package registry, built once into .cache/nexmark
# (sources/pipeline_load.py finds it there; NEXMARK_BIN overrides).
NEXMARK_VERSION := 0.2.0
NEXMARK_BIN := .cache/nexmark/bin/nexmark
nexmark: $(NEXMARK_BIN)

$(NEXMARK_BIN):
	cargo install nexmark --version $(NEXMARK_VERSION) --features bin --locked --root .cache/nexmark

# Prometheus and promtool from Debian's packages (local runs and tests; compose uses prom/prometheus).
prometheus:
	bash deploy/prometheus/install.sh

# A small pipeline, a real Prometheus, one failover; every dashboard panel query run; JSON summary last.
dashboards-check: setup prometheus
	$(VPY) -m lazystandby.cli dashboards-check --render $(if $(PUBLISH),docs/dashboards,run/dashboards)

# A development CA and a certificate per node for mutual TLS (run/tls/; the compose stack makes its own).
certs:
	bash deploy/tls/make-certs.sh run/tls nu:upstream n:operator n-standby:operator nd:downstream admin:admin
	@echo "run/tls: set tls_ca=run/tls/ca.crt, tls_cert=run/tls/<node>.crt, tls_key=run/tls/<node>.key on each node"

# A local Kafka broker (KRaft) on 127.0.0.1:19092 for manual runs; tests start their own.
kafka-up: setup kafka-jars
	$(VPY) -m lazystandby.harness.kafka_broker start --port 19092

kafka-down:
	$(VPY) -m lazystandby.harness.kafka_broker stop

# The main job: examples/ticks-select.sql (the ticks as CSV in a Kafka topic, the trades above 100) with
# the Spark operator on N and N', Nd writing the results topic; N is killed mid-run, N' takes over; the
# results are checked against DuckDB's truth. JSON summary last. KAFKA_BOOTSTRAP=host:port uses an existing
# cluster instead of starting a local broker.
demo: setup kafka-jars
	$(VPY) -m lazystandby.cli run examples/ticks-select.sql --fault kill-primary --operator spark --bsize $(BSIZE) \
	  --codec $(CODEC) --total $(DEMO_TOTAL) --rate $(DEMO_RATE)

# `make demo` with examples/ticks-window.sql (one-second windows by symbol): Spark's streaming aggregation
# on N and N', N killed mid-run, the results topic checked against the truth (`wrong` counts results whose
# aggregates differ).
demo-window: setup kafka-jars
	$(VPY) -m lazystandby.cli run examples/ticks-window.sql --fault kill-primary --operator spark --bsize $(BSIZE) \
	  --codec $(CODEC) --total $(DEMO_TOTAL) --rate $(DEMO_RATE)

# The same with the Python operator and the built-in generator: no Kafka, no Spark, a few seconds.
demo-local: setup
	$(VPY) -m lazystandby.cli launch --bsize $(BSIZE) --codec $(CODEC) $(if $(QUERY),--query "$(QUERY)")

# QUERY=window (or any query text, formats/query.py) runs the check on a keyed window aggregation.
failover-check: setup $(if $(KAFKA)$(PIPELINE),kafka-jars)
	$(VPY) -m lazystandby.cli failover-check --kills $(KILLS) --bsize $(BSIZE) --codec $(CODEC) \
	  $(if $(OPERATOR),--operator $(OPERATOR)) $(if $(KAFKA),--kafka) $(if $(QUERY),--query "$(QUERY)") \
	  $(if $(PIPELINE),--pipeline $(PIPELINE))

# The compose stack. Here (no registry): dockerd and Compose v2 installed if missing, local base images
# built (debootstrap + docker import; Kafka from the Maven jars; Prometheus from Debian), no Grafana.
# LS_LOCAL_IMAGES=0 make up uses the official images (a laptop with internet), Grafana included.
COMPOSE_LOCAL := docker compose -p lazystandby -f docker-compose.yml -f deploy/docker/compose.local.yml --profile spares
FAULT ?= kill-primary

up: setup
	bash deploy/docker/up.sh

down:
	-$(COMPOSE_LOCAL) down -v --remove-orphans

chaos: setup
	bash deploy/docker/build.sh >/dev/null
	$(if $(LINK),LS_LINK=$(LINK)) $(VPY) deploy/chaos/chaos.py $(FAULT)

# The running stack's node links shaped as `launch --link` shapes processes' (LINK=10mbit, 100mbit, 1gbit or
# RATE[:DELAY_MS]; root, tc on the host). make chaos LINK=... shapes each fault's stack the same way.
shape: setup
	$(VPY) deploy/chaos/chaos.py shape $(LINK)

# Faults drawn at random from the whole catalog (singles and pairs) against a Kafka load, processes on
# loopback, the truth table after each; JSON summary last (runs, lost, duplicated, stalled, double_faults).
RUNS ?= 10
chaos-campaign: setup kafka-jars
	$(VPY) -m lazystandby.cli chaos-campaign --runs $(RUNS) $(if $(SEED),--seed $(SEED)) --codec $(CODEC) --bsize $(BSIZE) \
	  $(if $(QUERY),--query "$(QUERY)") $(if $(PIPELINE),--pipeline $(PIPELINE))

# Benchmarks (results and plots under run/bench/, or docs/bench/ with PUBLISH=1; JSON summary as the last line).
# Quix Streams (bench-quick's Kafka peer) in a venv of its own: it pins confluent-kafka below the runtime's.
QUIX_VENV := .cache/quix-venv
$(QUIX_VENV)/.installed: bench/requirements-quix.lock
	test -x $(QUIX_VENV)/bin/python || $(PY) -m venv $(QUIX_VENV)
	$(QUIX_VENV)/bin/python -m pip install -q -r bench/requirements-quix.lock
	touch $@

quix-venv: $(QUIX_VENV)/.installed

# The JVM peers of the bench, Kafka Streams and Flink (throughput and failover): jars from Maven Central,
# compiled with the JDK.
jvm-peers:
	bash bench/jvm/build.sh kstreams && bash bench/jvm/build.sh flink

bench-quick: setup kafka-jars quix-venv jvm-peers
	$(VPY) -m bench.harness --quick $(if $(PUBLISH),--publish)

bench: setup kafka-jars quix-venv jvm-peers
	$(VPY) -m bench.harness $(if $(TRIALS),--trials $(TRIALS)) $(if $(CODECS),--codecs $(CODECS)) $(if $(PUBLISH),--publish)

# The window query: its throughput on the Kafka path and its failover at 1,000 to 1,000,000 keys (minutes).
# Seed 000's trade-off on shaped links (network namespaces and tc; needs root): Bsize 1 to inf on each
# link preset, N killed in every trial. LINKS=10mbit TRIALS=1 narrows it.
bench-links: setup
	$(VPY) -m bench.links $(if $(TRIALS),--trials $(TRIALS)) $(if $(LINKS),--links $(LINKS)) $(if $(PUBLISH),--publish)

bench-window: setup kafka-jars jvm-peers
	$(VPY) -m bench.window $(if $(TRIALS),--trials $(TRIALS)) $(if $(PUBLISH),--publish)

# This tree's headline throughput beside another commit's, taking turns (BASE=rev, ROUNDS=n pairs, TUPLES=n).
bench-ab: setup kafka-jars
	$(VPY) -m bench.ab --base $(or $(BASE),$(error BASE=<rev> names the commit to compare with)) \
	  $(if $(ROUNDS),--rounds $(ROUNDS)) $(if $(TUPLES),--tuples $(TUPLES)) $(if $(KAFKA_TUPLES),--kafka-tuples $(KAFKA_TUPLES)) \
	  $(if $(PUBLISH),--publish)

# Nexmark's q0, q1, q2, q5 whole (q5whole) and the first stages of q5 and q7: ours (warm standby; windowed also
# Passive) beside Flink SQL over the same bid topic (EVENTS=n bids, QUERIES=q0,q5, NX_KILLS=k failovers per query).
bench-nexmark: setup kafka-jars nexmark
	$(VPY) -m bench.nexmark $(if $(EVENTS),--events $(EVENTS)) $(if $(QUERIES),--queries $(QUERIES)) \
	  $(if $(NX_KILLS),--kills $(NX_KILLS)) $(if $(PUBLISH),--publish)

# What one Spark window micro-batch costs through the node's feed, beside Spark alone (a minute or two).
bench-spark-cycle: setup
	$(VPY) -m bench.spark_cycle $(if $(PUBLISH),--publish)

clean:
	rm -rf $(VENV) run .cache .pytest_cache .ruff_cache services/lazystandby/v1/*_pb2*
