// Kafka Streams' peer of the window figures: the `window` query (WindowQuery: per symbol and tumbling
// event-time window, count, avg and max of the prices above 100) as a windowed aggregation (a RocksDB
// window store with its changelog) whose final results only are emitted (suppress until the window
// closes), exactly_once_v2, one stream thread. The source topics are keyed by symbol, so the aggregation
// needs no repartition: one task reads both topics. Event time is the tick's ts (a record that is no tick
// is skipped); a window closes once stream time passes its end by LATENESS_MS (the grace). Built by
// bench/jvm/build.sh kstreams; run by bench.jvm_peers:
//
//     WindowPeer throughput BOOTSTRAP PREFIX TOTAL SIZE_MS LATENESS_MS [FIRST_WAIT_S]
//         Prints the Tally line timed from the first record read to the TOTAL-th one applied, once
//         closing the client committed its last transaction.
//     WindowPeer failover BOOTSTRAP PREFIX SIZE_MS LATENESS_MS APP_ID INSTANCE
//         One instance of the group APP_ID, with a standby replica (num.standby.replicas 1) on the other,
//         until killed: prints WindowQuery.Progress lines and "running active N" after each rebalance. The
//         group settings are the fastest failover the broker's defaults allow (session timeout 6 s,
//         heartbeats every 1.5 s), as the selection's FailoverPeer.

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.UUID;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.state.WindowStore;

public final class WindowPeer {
    /** An Acc as three longs. */
    static final Serde<WindowQuery.Acc> ACC = Serdes.serdeFrom(
            (Serializer<WindowQuery.Acc>) (topic, a) -> a == null ? null
                    : ByteBuffer.allocate(24).putLong(a.count).putLong(a.sum).putLong(a.max).array(),
            (Deserializer<WindowQuery.Acc>) (topic, b) -> {
                if (b == null) {
                    return null;
                }
                ByteBuffer buf = ByteBuffer.wrap(b);
                WindowQuery.Acc a = new WindowQuery.Acc();
                a.count = buf.getLong();
                a.sum = buf.getLong();
                a.max = buf.getLong();
                return a;
            });

    /** A selected tick's price, from the parse to the aggregation. */
    static final class Price {
        final long price;

        Price(long price) {
            this.price = price;
        }
    }

    public static void main(String[] args) throws InterruptedException {
        boolean failover = args[0].equals("failover");
        String bootstrap = args[1], prefix = args[2];
        int a = failover ? 3 : 4;
        long size = Long.parseLong(args[a]), lateness = Long.parseLong(args[a + 1]);
        String appId = failover ? args[5] : "kstreams-window-" + UUID.randomUUID().toString().substring(0, 8);
        String instance = failover ? args[6] : "throughput";
        Tally tally = failover ? null : new Tally(Long.parseLong(args[3]));
        WindowQuery.Progress progress = failover ? new WindowQuery.Progress() : null;
        String firstTopic = prefix + "I1";

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.CLIENT_ID_CONFIG, appId + "-" + instance);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1); // one broker: internal topics have one replica
        props.put(StreamsConfig.STATE_DIR_CONFIG, System.getProperty("java.io.tmpdir") + "/kstreams-window-"
                  + appId + "-" + instance);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        if (failover) {
            props.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, 1);
            props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
            props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1500);
        }

        StreamsBuilder builder = new StreamsBuilder();
        // Event time from the tick; a record that is no tick gets -1, which Kafka Streams skips.
        Consumed<byte[], byte[]> consumed = Consumed.with(Serdes.ByteArray(), Serdes.ByteArray())
                .withTimestampExtractor((record, previous) -> {
                    WindowQuery.Tick t = record.value() == null ? null : WindowQuery.parse((byte[]) record.value());
                    return t == null ? -1 : t.ts;
                });
        builder.stream(List.of(prefix + "I1", prefix + "I2"), consumed)
               .processValues(() -> new FixedKeyProcessor<byte[], byte[], Price>() {
                   private FixedKeyProcessorContext<byte[], Price> context;

                   @Override
                   public void init(FixedKeyProcessorContext<byte[], Price> context) {
                       this.context = context;
                   }

                   @Override
                   public void process(FixedKeyRecord<byte[], byte[]> record) {
                       WindowQuery.Tick t = WindowQuery.parse(record.value());
                       boolean keep = WindowQuery.selected(t);
                       if (keep) {
                           context.forward(record.withValue(new Price(t.price))); // aggregated before it returns
                       }
                       if (tally != null) {
                           tally.count(keep);
                       }
                       if (progress != null) {
                           var meta = context.recordMetadata().orElseThrow();
                           progress.applied(meta.topic().equals(firstTopic) ? 0 : 1, meta.offset());
                       }
                   }
               })
               .groupByKey(Grouped.with(Serdes.ByteArray(), null))
               .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(size), Duration.ofMillis(lateness)))
               .aggregate(WindowQuery.Acc::new, (key, p, acc) -> acc.add(p.price),
                          Materialized.<byte[], WindowQuery.Acc, WindowStore<Bytes, byte[]>>as("window")
                                  .withKeySerde(Serdes.ByteArray()).withValueSerde(ACC))
               .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
               .toStream()
               .map((w, acc) -> new org.apache.kafka.streams.KeyValue<>(w.key(), WindowQuery.result(
                       new String(w.key(), StandardCharsets.US_ASCII), w.window().start(), w.window().end(), acc)
                       .getBytes(StandardCharsets.US_ASCII)))
               .to(prefix + "kstreams-window", Produced.with(Serdes.ByteArray(), Serdes.ByteArray()));
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setUncaughtExceptionHandler(e -> {
            System.err.println("WindowPeer: " + e);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setStateListener((now, before) -> {
            if (failover) {
                if (now == KafkaStreams.State.RUNNING) {
                    long active = streams.metadataForLocalThreads().stream()
                            .mapToLong(t -> t.activeTasks().size()).sum();
                    System.out.println("running active " + active);
                } else {
                    System.out.println("state " + now);
                }
                System.out.flush();
            } else if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                tally.abandon();
            }
        });
        if (failover) {
            Runtime.getRuntime().addShutdownHook(new Thread(streams::close));
            streams.start();
            System.out.println("started");
            System.out.flush();
            return;
        }
        streams.start();
        long firstWait = args.length > 6 ? Long.parseLong(args[6]) : 120;
        if (tally.awaitFirst(firstWait)) {
            tally.awaitDone(600);
        } else {
            System.err.println("WindowPeer: no record from " + prefix + "I1, " + prefix + "I2 at " + bootstrap
                               + " within " + firstWait + " s");
        }
        boolean committed = streams.close(Duration.ofSeconds(60));
        System.out.println(tally.report(committed));
        System.exit(tally.finished() && committed ? 0 : 1);
    }
}
