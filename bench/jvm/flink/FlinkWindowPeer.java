// Flink's peer of the window figures: the `window` query (WindowQuery: per symbol and tumbling event-time
// window, count, avg and max of the prices above 100) as a keyed DataStream window with an incremental
// aggregate, on the RocksDB state backend (incremental checkpoints every second), reading the same source
// topics on the same broker and writing each window's result to an exactly-once KafkaSink. Event time is
// the tick's ts; each source partition's watermark trails its highest ts by LATENESS_MS, and Flink's
// watermark is the least of them. Local MiniCluster, parallelism 1 (Flink's distribution is not on Maven
// Central here). Built by bench/jvm/build.sh flink; run by bench.jvm_peers:
//
//     FlinkWindowPeer throughput BOOTSTRAP PREFIX TOTAL SIZE_MS LATENESS_MS [FIRST_WAIT_S]
//         Bounded at the topics' ends. Prints the Tally line timed from the first record read to the last
//         window result emitted (the final watermark at the end of input closes every window), with
//         "results"; committed once the job ended, its final checkpoint committing the last transaction.
//     FlinkWindowPeer failover BOOTSTRAP PREFIX SIZE_MS LATENESS_MS CHECKPOINT_DIR TXN_PREFIX [RESTORE_FROM]
//         Unbounded, until killed; the window operator prints WindowQuery.Progress lines. The bench kills
//         it and starts it again from the newest complete checkpoint (RESTORE_FROM).

import java.time.Duration;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.serialization.SerializationSchema;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;

public final class FlinkWindowPeer {
    // The job runs in this JVM (the local MiniCluster): its tasks count into main's tally and times.
    static Tally tally;
    static volatile long lastResult;
    static volatile long results;
    static String firstTopic;

    /** A source record as a Tick (null values and non-ticks are dropped, as counted reads). */
    static final class Ticks implements KafkaRecordDeserializationSchema<WindowQuery.Tick> {
        @Override
        public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<WindowQuery.Tick> out) {
            WindowQuery.Tick t = record.value() == null ? null : WindowQuery.parse(record.value());
            if (tally != null) {
                tally.count(WindowQuery.selected(t));
            }
            if (t != null) {
                t.topic = record.topic().equals(firstTopic) ? 0 : 1;
                t.offset = record.offset();
                out.collect(t);
            }
        }

        @Override
        public TypeInformation<WindowQuery.Tick> getProducedType() {
            return TypeInformation.of(WindowQuery.Tick.class);
        }
    }

    static final class Aggregate implements AggregateFunction<WindowQuery.Tick, WindowQuery.Acc, WindowQuery.Acc> {
        // One per window operator instance (parallelism 1): a failover run's progress.
        private transient WindowQuery.Progress progress;
        private final boolean report;

        Aggregate(boolean report) {
            this.report = report;
        }

        @Override
        public WindowQuery.Acc createAccumulator() {
            return new WindowQuery.Acc();
        }

        @Override
        public WindowQuery.Acc add(WindowQuery.Tick t, WindowQuery.Acc a) {
            if (report) {
                if (progress == null) {
                    progress = new WindowQuery.Progress();
                }
                progress.applied(t.topic, t.offset);
            }
            return a.add(t.price);
        }

        @Override
        public WindowQuery.Acc getResult(WindowQuery.Acc a) {
            return a;
        }

        @Override
        public WindowQuery.Acc merge(WindowQuery.Acc a, WindowQuery.Acc b) {
            return a.merge(b);
        }
    }

    static final class Emit extends ProcessWindowFunction<WindowQuery.Acc, String, String, TimeWindow> {
        @Override
        public void process(String symbol, Context ctx, Iterable<WindowQuery.Acc> accs, Collector<String> out) {
            WindowQuery.Acc a = accs.iterator().next();
            out.collect(WindowQuery.result(symbol, ctx.window().getStart(), ctx.window().getEnd(), a));
            results += 1;
            lastResult = System.nanoTime();
        }
    }

    static final class Text implements SerializationSchema<String> {
        @Override
        public byte[] serialize(String value) {
            return value.getBytes(java.nio.charset.StandardCharsets.US_ASCII);
        }
    }

    public static void main(String[] args) throws Exception {
        boolean failover = args[0].equals("failover");
        String bootstrap = args[1], prefix = args[2];
        int a = failover ? 3 : 4;
        long size = Long.parseLong(args[a]), lateness = Long.parseLong(args[a + 1]);
        firstTopic = prefix + "I1";
        Configuration conf = new Configuration();
        conf.setString("state.backend.type", "rocksdb");
        conf.setString("execution.checkpointing.incremental", "true");
        conf.setString("execution.checkpointing.interval", "1 s");
        String txn = "flink-window-" + UUID.randomUUID().toString().substring(0, 8);
        if (failover) {
            conf.setString("execution.checkpointing.dir", "file://" + args[5]);
            conf.setString("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
            conf.setString("execution.checkpointing.num-retained", "3");
            txn = args[6];
            if (args.length > 7) {
                conf.setString("execution.state-recovery.path", args[7]);
            }
        } else {
            tally = new Tally(Long.parseLong(args[3]));
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(1);
        var source = KafkaSource.<WindowQuery.Tick>builder()
                .setBootstrapServers(bootstrap)
                .setTopics(prefix + "I1", prefix + "I2")
                .setGroupId(txn)
                .setStartingOffsets(OffsetsInitializer.earliest())
                .setDeserializer(new Ticks());
        if (!failover) {
            source.setBounded(OffsetsInitializer.latest());
        }
        Properties producer = new Properties();
        // Flink's default (one hour) is above the broker's transaction.max.timeout.ms (15 minutes).
        producer.setProperty("transaction.timeout.ms", "600000");
        KafkaSink<String> sink = KafkaSink.<String>builder()
                .setBootstrapServers(bootstrap)
                .setKafkaProducerConfig(producer)
                .setRecordSerializer(KafkaRecordSerializationSchema.<String>builder()
                        .setTopic(prefix + "flink-window")
                        .setValueSerializationSchema(new Text())
                        .build())
                .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
                .setTransactionalIdPrefix(txn)
                .build();
        WatermarkStrategy<WindowQuery.Tick> time = WatermarkStrategy
                .<WindowQuery.Tick>forBoundedOutOfOrderness(Duration.ofMillis(lateness))
                .withTimestampAssigner((t, previous) -> t.ts);
        DataStream<WindowQuery.Tick> ticks = env.fromSource(source.build(), time, "ticks");
        ticks.filter(WindowQuery::selected)
             .keyBy(t -> t.symbol)
             .window(TumblingEventTimeWindows.of(Duration.ofMillis(size)))
             .aggregate(new Aggregate(failover), new Emit())
             .sinkTo(sink);
        if (failover) {
            System.out.println("started");
            System.out.flush();
            env.execute("flink-window-failover");
            return;
        }
        JobClient job = env.executeAsync("flink-window-peer");
        long firstWait = args.length > 6 ? Long.parseLong(args[6]) : 120;
        boolean committed = false;
        if (tally.awaitFirst(firstWait)) {
            try {
                job.getJobExecutionResult().get(600, TimeUnit.SECONDS);
                committed = true;
            } catch (Exception e) {
                System.err.println("FlinkWindowPeer: the job failed: " + e);
            }
        } else {
            System.err.println("FlinkWindowPeer: no record from " + prefix + "I1, " + prefix + "I2 at " + bootstrap
                               + " within " + firstWait + " s");
            job.cancel().get(60, TimeUnit.SECONDS);
        }
        long end = lastResult != 0 ? lastResult : System.nanoTime();
        System.out.println(tally.report(committed, end, ", \"results\": " + results));
        System.exit(tally.finished() && committed ? 0 : 1);
    }
}
