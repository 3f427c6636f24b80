// Flink's failover figure: the same selection as FlinkSelectPeer over unbounded sources, an exactly-once
// KafkaSink, checkpoints every second kept in CHECKPOINT_DIR after the job dies. The bench
// (bench.jvm_peers.flink_failover) kills the process with SIGKILL and starts it again from the newest
// complete checkpoint (RESTORE_FROM), as a single-node Flink user does: Flink's distribution, for a
// standalone cluster with a spare TaskManager, is not on Maven Central here. Each selected tick is written as
// "INSTANCE,topic,offset,input timestamp" (the layout of the Kafka Streams peer's FailoverPeer), so the bench
// sees which run wrote it and when its input arrived. Runs until killed:
//
//     java -cp .cache/jvm/flink/classes:.cache/jvm/flink/libs/* FlinkFailoverPeer BOOTSTRAP PREFIX \
//          CHECKPOINT_DIR TRANSACTIONAL_ID_PREFIX INSTANCE [RESTORE_FROM]
//
// The transactional id prefix stays the same across the restart, so the restarted sink aborts the
// transaction the killed one left open (read_committed readers wait on it until then).

import java.nio.charset.StandardCharsets;
import java.util.Properties;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;

public final class FlinkFailoverPeer {
    /** A source record as "topic,offset,timestamp|tick": where it came from travels with it. */
    static final class Positioned implements KafkaRecordDeserializationSchema<String> {
        @Override
        public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<String> out) {
            out.collect(record.topic() + "," + record.offset() + "," + record.timestamp() + "|"
                        + new String(record.value(), StandardCharsets.US_ASCII));
        }

        @Override
        public TypeInformation<String> getProducedType() {
            return Types.STRING;
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], prefix = args[1], checkpoints = args[2], txnPrefix = args[3], instance = args[4];
        Configuration conf = new Configuration();
        conf.setString("execution.checkpointing.interval", "1 s");
        conf.setString("execution.checkpointing.dir", "file://" + checkpoints);
        conf.setString("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        conf.setString("execution.checkpointing.num-retained", "3");
        if (args.length > 5) {
            conf.setString("execution.state-recovery.path", args[5]);
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(1);
        KafkaSource<String> source = KafkaSource.<String>builder()
                .setBootstrapServers(bootstrap)
                .setTopics(prefix + "I1", prefix + "I2")
                .setGroupId("flink-failover-" + txnPrefix)
                .setStartingOffsets(OffsetsInitializer.earliest())
                .setDeserializer(new Positioned())
                .build();
        Properties producer = new Properties();
        producer.setProperty("transaction.timeout.ms", "600000");
        KafkaSink<String> sink = KafkaSink.<String>builder()
                .setBootstrapServers(bootstrap)
                .setKafkaProducerConfig(producer)
                .setRecordSerializer(KafkaRecordSerializationSchema.<String>builder()
                        .setTopic(prefix + "flink-failover")
                        .setValueSerializationSchema(new SimpleStringSchema())
                        .build())
                .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
                .setTransactionalIdPrefix(txnPrefix)
                .build();
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "ticks")
           .filter(s -> Ticks.select(s.substring(s.indexOf('|') + 1).getBytes(StandardCharsets.US_ASCII)))
           .map(s -> instance + "," + s.substring(0, s.indexOf('|'))).returns(Types.STRING)
           .sinkTo(sink);
        System.out.println("started");
        System.out.flush();
        env.execute("flink-failover-peer");
    }
}
