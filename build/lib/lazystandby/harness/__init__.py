"""The test and benchmark harness: process launcher, in-process topology, fault catalog, truth-table and
stack checks, local Kafka broker and Prometheus. Used by tests, bench and chaos; the runtime (core, node,
transport, operators, sources, sinks) never imports it."""
