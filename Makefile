# lazystandby. Two commands set up a fresh machine and run:  make demo   and   make test
SHELL := /bin/bash
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROTO_OUT := services/lazystandby/v1/lazystandby_pb2.py
export PYTHONPATH := $(CURDIR)/services:$(CURDIR)
export PYSPARK_PYTHON := $(CURDIR)/$(VPY)
export PYSPARK_DRIVER_PYTHON := $(CURDIR)/$(VPY)

KILLS ?= 20
BSIZE ?= 10
CODEC ?= zstd-stream-dict

.PHONY: setup proto lint test test-unit test-integration demo failover-check clean

$(STAMP): requirements.txt
	test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -r requirements.txt
	touch $(STAMP)

setup: $(STAMP) proto

proto: $(PROTO_OUT)

$(PROTO_OUT): proto/lazystandby/v1/lazystandby.proto $(STAMP)
	$(VPY) -m grpc_tools.protoc -Iproto --python_out=services --grpc_python_out=services --pyi_out=services $<

lint: setup
	$(VPY) -m ruff check services tests

test-unit: setup
	$(VPY) -m pytest -q tests/unit

test-integration: setup
	$(VPY) -m pytest -q tests/integration

# The whole suite (what .ci/run calls).
test: setup
	$(VPY) -m ruff check services tests
	$(VPY) -m pytest -q -ra tests

# The main job: the four-node pipeline on loopback with a kill of N in the middle.
demo: setup
	$(VPY) -m lazystandby.cli launch --bsize $(BSIZE) --codec $(CODEC)

failover-check: setup
	$(VPY) -m lazystandby.cli failover-check --kills $(KILLS) --bsize $(BSIZE) --codec $(CODEC)

clean:
	rm -rf $(VENV) run .pytest_cache .ruff_cache services/lazystandby/v1/*_pb2*
