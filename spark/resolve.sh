#!/usr/bin/env bash
# Resolve the Spark Kafka connector's jars from Maven Central into .cache/spark/jars (idempotent: a stamp
# records the pom it was resolved from). Prints the comma-separated jar list for spark.jars.
#
# Why 4.2.0 with pyspark 4.3.0: Maven Central has no spark-sql-kafka-0-10_2.13 4.3.0 (checked 2026-11-26);
# 4.2.0 is the newest served, and the source API it implements is unchanged in 4.3.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
out="$root/.cache/spark/jars"
stamp="$root/.cache/spark/resolved.sha"
want="$(sha256sum "$here/pom.xml" | cut -d' ' -f1)"
if ! [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -n "$(ls "$out"/spark-sql-kafka-*.jar 2>/dev/null)" ]]; then
  command -v mvn >/dev/null || { echo "spark/resolve.sh: Maven (mvn) is needed" >&2; exit 1; }
  rm -rf "$out" && mkdir -p "$out"
  mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies -DoutputDirectory="$out" -DincludeScope=runtime >&2
  echo "$want" > "$stamp"
fi
ls "$out"/*.jar | paste -sd, -
