#!/usr/bin/env bash
# The JVM peers of the bench: `bench/jvm/build.sh kstreams` (Kafka Streams: throughput and failover) or
# `bench/jvm/build.sh flink` (Flink: throughput and failover). Each peer's jars come from Maven Central into
# .cache/jvm/PEER/libs (bench/jvm/PEER/pom.xml); its sources, with the shared ones (bench/jvm/*.java), are
# compiled into .cache/jvm/PEER/classes. Idempotent: each step is skipped while a stamp holds the hash of what
# it was made from.
set -euo pipefail
peer="${1:?usage: build.sh kstreams|flink|flinksql}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
src="$here/$peer"
[[ -f "$src/pom.xml" ]] || { echo "build.sh: no peer named $peer (bench/jvm/$peer/pom.xml)" >&2; exit 2; }
cache="$root/.cache/jvm/$peer"
libs="$cache/libs" classes="$cache/classes"
command -v mvn >/dev/null || { echo "build.sh: Maven (mvn) is needed to fetch the $peer peer's jars" >&2; exit 1; }
command -v javac >/dev/null || { echo "build.sh: a JDK 17+ (javac) is needed to build the $peer peer" >&2; exit 1; }
mkdir -p "$cache"
want="$(sha256sum "$src/pom.xml" | cut -d' ' -f1)"
if [[ ! -f "$cache/libs.sha" || "$(cat "$cache/libs.sha")" != "$want" || -z "$(ls "$libs"/*.jar 2>/dev/null)" ]]; then
  rm -rf "$libs" && mkdir -p "$libs"
  mvn -q -B -Dstyle.color=never -f "$src/pom.xml" dependency:copy-dependencies -DoutputDirectory="$libs" \
    -DincludeScope=runtime
  echo "$want" > "$cache/libs.sha"
  rm -f "$cache/classes.sha"
fi
want="$(cat "$here"/*.java "$src"/*.java "$cache/libs.sha" | sha256sum | cut -d' ' -f1)"
if [[ ! -f "$cache/classes.sha" || "$(cat "$cache/classes.sha")" != "$want" ]]; then
  rm -rf "$classes" && mkdir -p "$classes"
  javac --release 17 -cp "$libs/*" -d "$classes" "$here"/*.java "$src"/*.java
  echo "$want" > "$cache/classes.sha"
  echo "build.sh: the $peer peer built against $(ls "$libs" | wc -l) jars in $libs" >&2
fi
