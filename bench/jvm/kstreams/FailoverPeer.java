// One instance of the Kafka Streams peer's failover figure: the same selection as SelectPeer, exactly_once_v2,
// one stream thread and a standby replica (num.standby.replicas 1), in the consumer group APP_ID with the
// other instances. Each selected tick is written as "INSTANCE,topic,offset,input timestamp", so the bench
// (bench.jvm_peers.kstreams_failover) sees which instance handled which source partition, and when an input
// it outputs was produced. Runs until killed:
//
//     java -cp .cache/jvm/kstreams/classes:.cache/jvm/kstreams/libs/* FailoverPeer BOOTSTRAP PREFIX APP_ID INSTANCE
//
// The group settings are the fastest failover the broker's defaults allow: a session timeout of 6 s (the
// broker's group.min.session.timeout.ms) and heartbeats every 1.5 s. Everything else is Kafka Streams'
// default, the transaction timeout (10 s under exactly-once) included: the transaction a killed instance
// left open holds back read_committed readers of the results, and the offsets it was committing, until the
// broker aborts it.

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;

public final class FailoverPeer {
    public static void main(String[] args) {
        String bootstrap = args[0], prefix = args[1], appId = args[2], instance = args[3];
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.CLIENT_ID_CONFIG, appId + "-" + instance);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, 1);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        props.put(StreamsConfig.STATE_DIR_CONFIG, System.getProperty("java.io.tmpdir") + "/kstreams-failover-"
                  + appId + "-" + instance);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1500);

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(List.of(prefix + "I1", prefix + "I2"), Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
               .filter((key, value) -> Ticks.select(value))
               .processValues(() -> new FixedKeyProcessor<byte[], byte[], byte[]>() {
                   private FixedKeyProcessorContext<byte[], byte[]> context;

                   @Override
                   public void init(FixedKeyProcessorContext<byte[], byte[]> context) {
                       this.context = context;
                   }

                   @Override
                   public void process(FixedKeyRecord<byte[], byte[]> record) {
                       var meta = context.recordMetadata().orElseThrow();
                       String out = instance + "," + meta.topic() + "," + meta.offset() + "," + record.timestamp();
                       context.forward(record.withValue(out.getBytes(StandardCharsets.US_ASCII)));
                   }
               })
               .to(prefix + "kstreams-failover", Produced.with(Serdes.ByteArray(), Serdes.ByteArray()));
        final KafkaStreams streams = new KafkaStreams(builder.build(), props);
        // Each rebalance ends in RUNNING: the line then says how many tasks this instance now runs as the
        // active one (the bench kills the instance that runs the task, never its standby).
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING) {
                long active = streams.metadataForLocalThreads().stream().mapToLong(t -> t.activeTasks().size()).sum();
                System.out.println("running active " + active);
            } else {
                System.out.println("state " + now);
            }
            System.out.flush();
        });
        Runtime.getRuntime().addShutdownHook(new Thread(streams::close));
        streams.start();
        System.out.println("started");
        System.out.flush();
    }
}
