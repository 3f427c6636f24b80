#!/usr/bin/env bash
# The Kafka Streams peers of the bench (throughput and failover): their jars from Maven Central into
# .cache/kstreams/libs and bench/kstreams/*.java compiled into .cache/kstreams/classes. Idempotent: each
# step is skipped while a stamp holds the hash of what it was made from.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cache="$root/.cache/kstreams"
libs="$cache/libs" classes="$cache/classes"
command -v mvn >/dev/null || { echo "build.sh: Maven (mvn) is needed to fetch Kafka Streams' jars" >&2; exit 1; }
command -v javac >/dev/null || { echo "build.sh: a JDK 17+ (javac) is needed to build the Kafka Streams peer" >&2; exit 1; }
mkdir -p "$cache"
want="$(sha256sum "$here/pom.xml" | cut -d' ' -f1)"
if [[ ! -f "$cache/libs.sha" || "$(cat "$cache/libs.sha")" != "$want" || -z "$(ls "$libs"/kafka-streams-*.jar 2>/dev/null)" ]]; then
  rm -rf "$libs" && mkdir -p "$libs"
  mvn -q -B -Dstyle.color=never -f "$here/pom.xml" dependency:copy-dependencies -DoutputDirectory="$libs" -DincludeScope=runtime
  echo "$want" > "$cache/libs.sha"
  rm -f "$cache/classes.sha"
fi
want="$(cat "$here"/*.java "$cache/libs.sha" | sha256sum | cut -d' ' -f1)"
if [[ ! -f "$cache/classes.sha" || "$(cat "$cache/classes.sha")" != "$want" ]]; then
  rm -rf "$classes" && mkdir -p "$classes"
  javac --release 17 -cp "$libs/*" -d "$classes" "$here"/*.java
  echo "$want" > "$cache/classes.sha"
  echo "build.sh: the peers built against $(ls "$libs" | wc -l) jars in $libs" >&2
fi
