// The JVM peer of the Kafka figure: Kafka Streams with exactly-once (exactly_once_v2) doing the same
// selection as the pipeline and the Quix peer (parse the tick, keep price > 100) over the same pre-filled
// source topics on the same broker, writing the selected ticks to a topic of its own. One stream thread,
// as the Quix peer and Nu each consume in one. Built and run by bench/jvm/build.sh kstreams and
// bench.jvm_peers.select_throughput:
//
//     java -cp .cache/jvm/kstreams/classes:.cache/jvm/kstreams/libs/* SelectPeer BOOTSTRAP PREFIX TOTAL [FIRST_WAIT_S]
//
// Prints one JSON line: tuples, seconds (first record to the last one processed), tuples_per_s, selected,
// and committed (whether the last transaction committed before the peer closed).

import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.UUID;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;

public final class SelectPeer {
    public static void main(String[] args) throws InterruptedException {
        String bootstrap = args[0], prefix = args[1];
        long total = Long.parseLong(args[2]);
        long firstWait = args.length > 3 ? Long.parseLong(args[3]) : 120;
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "kstreams-" + UUID.randomUUID().toString().substring(0, 8));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.STATE_DIR_CONFIG, System.getProperty("java.io.tmpdir") + "/kstreams-peer-"
                  + UUID.randomUUID());
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        // A single-broker cluster: the internal topics (none for this topology) and the transaction log
        // cannot have three replicas.
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);

        Tally tally = new Tally(total);
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(List.of(prefix + "I1", prefix + "I2"), Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
               .filter((key, value) -> tally.keep(value))
               .to(prefix + "kstreams-results", Produced.with(Serdes.ByteArray(), Serdes.ByteArray()));
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        // A failure (source topics missing, the broker gone) ends the client and the wait at once, with
        // its cause on stderr, rather than after the deadline.
        streams.setUncaughtExceptionHandler(e -> {
            System.err.println("SelectPeer: " + e);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                tally.abandon();
            }
        });
        streams.start();
        // Nothing read within firstWait seconds (a broker that does not answer: the client retries for
        // ever) fails the run; after the first record, the whole run has 600 s.
        if (tally.awaitFirst(firstWait)) {
            tally.awaitDone(600);
        } else {
            System.err.println("SelectPeer: no record from " + prefix + "I1, " + prefix + "I2 at " + bootstrap
                               + " within " + firstWait + " s");
        }
        // Closing commits the open transaction: the selected records are then visible to read_committed.
        boolean committed = streams.close(Duration.ofSeconds(60));
        System.out.println(tally.report(committed));
        System.exit(tally.finished() && committed ? 0 : 1);
    }
}
