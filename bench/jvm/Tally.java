// What every throughput peer counts and reports: the records it read and kept, timed from the first to the
// `total`-th, and the JSON line the bench reads.

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

final class Tally {
    private final long total;
    // Written by the one task thread that reads the records, read by main after the latches.
    private volatile long seen, selected, t0, t1;
    private final CountDownLatch first = new CountDownLatch(1), done = new CountDownLatch(1);

    Tally(long total) {
        this.total = total;
    }

    /** Ticks.select on one record, counted and timed. */
    boolean keep(byte[] value) {
        return count(Ticks.select(value));
    }

    /** One record read, kept or not, counted and timed. */
    boolean count(boolean keep) {
        if (t0 == 0) {
            t0 = System.nanoTime();
            first.countDown();
        }
        selected += keep ? 1 : 0;
        if (++seen == total) {
            t1 = System.nanoTime();
            done.countDown();
        }
        return keep;
    }

    /** Ends both waits at once (the peer failed). */
    void abandon() {
        first.countDown();
        done.countDown();
    }

    boolean awaitFirst(long seconds) throws InterruptedException {
        return first.await(seconds, TimeUnit.SECONDS);
    }

    void awaitDone(long seconds) throws InterruptedException {
        done.await(seconds, TimeUnit.SECONDS);
    }

    /** Whether the `total`-th record was read. */
    boolean finished() {
        return t1 != 0;
    }

    /** The JSON line: tuples, seconds (first record to the last), tuples_per_s, selected, committed. */
    String report(boolean committed) {
        return report(committed, finished() ? t1 : System.nanoTime(), "");
    }

    /** The JSON line timed from the first record to `end` (System.nanoTime), with `extra` fields (", ..."). */
    String report(boolean committed, long end, String extra) {
        double seconds = t0 == 0 ? 0 : (end - t0) / 1e9;
        return String.format("{\"tuples\": %d, \"seconds\": %.3f, \"tuples_per_s\": %d, \"selected\": %d, \"committed\": %b%s}",
                             seen, seconds, seconds > 0 ? Math.round(seen / seconds) : 0, selected,
                             committed && finished(), extra);
    }
}
