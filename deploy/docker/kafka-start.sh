#!/bin/sh
# KAFKA_FOO_BAR=x becomes foo.bar=x, as in the official image; then format (once) and run the broker.
set -e
props=/opt/kafka/server.properties
: > "$props"
env | grep '^KAFKA_' | while IFS='=' read -r k v; do
  echo "$(echo "${k#KAFKA_}" | tr 'A-Z_' 'a-z.')=$v" >> "$props"
done
echo "log.dirs=/var/lib/kafka/data" >> "$props"
cp="/opt/kafka/libs/*"
if [ ! -f /var/lib/kafka/data/meta.properties ]; then
  java -cp "$cp" kafka.tools.StorageTool format -t "${CLUSTER_ID:-lazystandby-cluster-01}" -c "$props" --ignore-formatted
fi
exec java -Xmx512m -cp "$cp" kafka.Kafka "$props"
