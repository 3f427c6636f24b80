// Flink SQL's peer of the Nexmark bench: one Nexmark query as a Flink SQL job (Flink 2.2, its local
// MiniCluster, parallelism 1) over the bid topic the pipeline reads, on the same broker: JSON format,
// RocksDB state, a checkpoint every second, the Kafka sink exactly-once (transactions committed on each
// checkpoint). Bounded at the topic's end (the throughput runs) or unbounded (the failover runs); a run may
// start from a checkpoint. Built by bench/jvm/build.sh flinksql, run by bench.nexmark:
//
//     java -cp .cache/jvm/flinksql/classes:.cache/jvm/flinksql/libs/* FlinkSqlPeer BOOTSTRAP SOURCE SINK QUERY
//          CHECKPOINTS TXN_PREFIX bounded|unbounded [RESTORE_FROM]
//
// QUERY is q0, q1, q2, q5 (bids per auction in 10 s windows sliding by 2 s), q5whole (Nexmark's q5 as its
// suite writes it: those counts joined with their maximum per window, the auctions with the most bids) or
// q7 (the highest price per 10 s tumbling window). Prints `started <ms>` once the job is submitted and, bounded, one JSON line at the end:
// seconds (submission to the job's end, its final checkpoint committed) and finished.

import java.util.Map;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.TableResult;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;

public final class FlinkSqlPeer {
    // q5's bids per auction and sliding window, as both sides of its self-join read them.
    static final String COUNTS = "SELECT auction, COUNT(*) AS num, window_start AS starttime, window_end AS endtime "
        + "FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dt), INTERVAL '2' SECOND, INTERVAL '10' SECOND)) "
        + "GROUP BY auction, window_start, window_end";
    static final Map<String, String> QUERIES = Map.of(
        "q0", "SELECT auction, bidder, price, date_time, extra FROM bid",
        "q1", "SELECT auction, bidder, 0.908 * price AS price, date_time, extra FROM bid",
        "q2", "SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0",
        "q5", "SELECT auction, window_start, window_end, COUNT(*) AS num FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dt), "
              + "INTERVAL '2' SECOND, INTERVAL '10' SECOND)) GROUP BY auction, window_start, window_end",
        "q5whole", "SELECT AuctionBids.auction, AuctionBids.num FROM (" + COUNTS + ") AS AuctionBids JOIN ("
              + "SELECT MAX(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime FROM (" + COUNTS
              + ") AS CountBids GROUP BY CountBids.starttime, CountBids.endtime) AS MaxBids "
              + "ON AuctionBids.starttime = MaxBids.starttime AND AuctionBids.endtime = MaxBids.endtime "
              + "AND AuctionBids.num >= MaxBids.maxn",
        "q7", "SELECT window_start, window_end, MAX(price) AS maxprice FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dt), "
              + "INTERVAL '10' SECOND)) GROUP BY window_start, window_end");
    static final Map<String, String> SINKS = Map.of(
        "q0", "auction BIGINT, bidder BIGINT, price BIGINT, date_time BIGINT, extra STRING",
        "q1", "auction BIGINT, bidder BIGINT, price DECIMAL(23, 3), date_time BIGINT, extra STRING",
        "q2", "auction BIGINT, price BIGINT",
        "q5", "auction BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3), num BIGINT",
        "q5whole", "auction BIGINT, num BIGINT",
        "q7", "window_start TIMESTAMP(3), window_end TIMESTAMP(3), maxprice BIGINT");

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], source = args[1], sinkTopic = args[2], query = args[3], checkpoints = args[4];
        String txn = args[5];
        boolean bounded = "bounded".equals(args[6]);
        Configuration conf = new Configuration();
        conf.setString("state.backend.type", "rocksdb");
        conf.setString("execution.checkpointing.interval", "1s");
        conf.setString("execution.checkpointing.dir", "file://" + checkpoints);
        conf.setString("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        conf.setString("parallelism.default", "1");
        if (args.length > 7) {
            conf.setString("execution.state-recovery.path", args[7]);
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        StreamTableEnvironment t = StreamTableEnvironment.create(env);
        t.executeSql("CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, "
            + "date_time BIGINT, extra STRING, dt AS TO_TIMESTAMP_LTZ(date_time, 3), "
            + "WATERMARK FOR dt AS dt - INTERVAL '4' SECOND) WITH ('connector' = 'kafka', 'topic' = '" + source
            + "', 'properties.bootstrap.servers' = '" + bootstrap + "', 'properties.group.id' = '" + txn
            + "', 'scan.startup.mode' = 'earliest-offset'"
            + (bounded ? ", 'scan.bounded.mode' = 'latest-offset'" : "") + ", 'format' = 'json')");
        t.executeSql("CREATE TABLE results (" + SINKS.get(query) + ") WITH ('connector' = 'kafka', 'topic' = '"
            + sinkTopic + "', 'properties.bootstrap.servers' = '" + bootstrap + "', 'format' = 'json', "
            + "'sink.delivery-guarantee' = 'exactly-once', 'sink.transactional-id-prefix' = '" + txn + "', "
            // Flink's default (one hour) is above the broker's transaction.max.timeout.ms (15 minutes).
            + "'properties.transaction.timeout.ms' = '600000')");
        long t0 = System.nanoTime();
        TableResult result = t.executeSql("INSERT INTO results " + QUERIES.get(query));
        System.out.println("started " + System.currentTimeMillis());
        System.out.flush();
        result.await();
        double seconds = (System.nanoTime() - t0) / 1e9;
        System.out.println("{\"query\": \"" + query + "\", \"seconds\": " + seconds + ", \"finished\": true}");
        System.exit(0);
    }
}
