// Flink's peer of the Kafka figure: a Flink job (Flink 2.2, its local MiniCluster, parallelism 1) doing the
// same selection as the pipeline and the other peers (parse the tick, keep price > 100) over the same
// pre-filled source topics on the same broker: KafkaSource bounded at the topics' ends, KafkaSink with
// DeliveryGuarantee.EXACTLY_ONCE (Kafka transactions committed on checkpoints, every second, and on the
// final checkpoint when the bounded job ends). Built and run by bench/jvm/build.sh flink and
// bench.jvm_peers.select_throughput:
//
//     java -cp .cache/jvm/flink/classes:.cache/jvm/flink/libs/* FlinkSelectPeer BOOTSTRAP PREFIX TOTAL [FIRST_WAIT_S]
//
// Prints one JSON line: tuples, seconds (first record to the last one processed), tuples_per_s, selected,
// and committed (the job finished, its final checkpoint committing the last transaction).

import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.FilterFunction;
import org.apache.flink.api.common.serialization.SerializationSchema;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class FlinkSelectPeer {
    // The job runs in this JVM (the local MiniCluster), so its one task counts into main's tally.
    static Tally tally;

    static final class Select implements FilterFunction<byte[]> {
        @Override
        public boolean filter(byte[] value) {
            return tally.keep(value);
        }
    }

    /** Writes a selected tick's bytes as they came (a class, not a lambda: Flink infers its type). */
    static final class Bytes implements SerializationSchema<byte[]> {
        @Override
        public byte[] serialize(byte[] value) {
            return value;
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], prefix = args[1];
        tally = new Tally(Long.parseLong(args[2]));
        long firstWait = args.length > 3 ? Long.parseLong(args[3]) : 120;
        String id = UUID.randomUUID().toString().substring(0, 8);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(1);
        env.enableCheckpointing(1000);
        KafkaSource<byte[]> source = KafkaSource.<byte[]>builder()
                .setBootstrapServers(bootstrap)
                .setTopics(prefix + "I1", prefix + "I2")
                .setGroupId("flink-" + id)
                .setStartingOffsets(OffsetsInitializer.earliest())
                .setBounded(OffsetsInitializer.latest())
                .setDeserializer(KafkaRecordDeserializationSchema.valueOnly(ByteArrayDeserializer.class))
                .build();
        Properties producer = new Properties();
        // Flink's default (one hour) is above the broker's transaction.max.timeout.ms (15 minutes).
        producer.setProperty("transaction.timeout.ms", "600000");
        KafkaSink<byte[]> sink = KafkaSink.<byte[]>builder()
                .setBootstrapServers(bootstrap)
                .setKafkaProducerConfig(producer)
                .setRecordSerializer(KafkaRecordSerializationSchema.<byte[]>builder()
                        .setTopic(prefix + "flink-results")
                        .setValueSerializationSchema(new Bytes())
                        .build())
                .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
                .setTransactionalIdPrefix("flink-" + id)
                .build();
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "ticks").filter(new Select()).sinkTo(sink);
        JobClient job = env.executeAsync("flink-select-peer-" + id);
        boolean committed = false;
        if (tally.awaitFirst(firstWait)) {
            try {
                job.getJobExecutionResult().get(600, TimeUnit.SECONDS);
                committed = true;
            } catch (Exception e) {
                System.err.println("FlinkSelectPeer: the job failed: " + e);
            }
        } else {
            System.err.println("FlinkSelectPeer: no record from " + prefix + "I1, " + prefix + "I2 at " + bootstrap
                               + " within " + firstWait + " s");
            job.cancel().get(60, TimeUnit.SECONDS);
        }
        System.out.println(tally.report(committed));
        System.exit(tally.finished() && committed ? 0 : 1);
    }
}
