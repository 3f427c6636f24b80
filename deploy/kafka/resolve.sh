#!/usr/bin/env bash
# Resolve the Kafka broker's jars from Maven Central into .cache/kafka/libs (idempotent: a stamp file
# records the pom it was resolved from). Users with Docker get the official apache/kafka image instead.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$root/.cache/kafka/libs"
stamp="$root/.cache/kafka/resolved.sha"
want="$(sha256sum "$here/pom.xml" | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -n "$(ls "$out"/kafka_2.13-*.jar 2>/dev/null)" ]]; then
  exit 0
fi
command -v mvn >/dev/null || { echo "resolve.sh: Maven (mvn) is needed to fetch Kafka's jars" >&2; exit 1; }
command -v java >/dev/null || { echo "resolve.sh: Java 17+ is needed to run Kafka" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out"
mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies -DoutputDirectory="$out" -DincludeScope=runtime
echo "$want" > "$stamp"
echo "resolve.sh: $(ls "$out" | wc -l) jars in $out"
