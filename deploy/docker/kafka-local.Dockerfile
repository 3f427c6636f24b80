# A Kafka broker image built from the Maven Central jars (deploy/kafka/resolve.sh), for machines that cannot
# pull apache/kafka. It reads the same KAFKA_* environment as the official image and offers the same
# /opt/kafka/bin/kafka-topics.sh for the compose healthcheck.
ARG BASE=lazystandby/debian:bookworm
FROM ${BASE}
COPY .cache/kafka/libs /opt/kafka/libs
COPY deploy/docker/kafka-start.sh /opt/kafka/bin/start.sh
RUN printf '#!/bin/sh\nexec java -Xmx256m -cp "/opt/kafka/libs/*" org.apache.kafka.tools.TopicCommand "$@"\n' \
      > /opt/kafka/bin/kafka-topics.sh && chmod +x /opt/kafka/bin/*.sh
ENTRYPOINT ["/opt/kafka/bin/start.sh"]
