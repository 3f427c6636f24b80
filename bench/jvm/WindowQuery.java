// The window query every window peer of the bench runs, as the pipeline's `window` example does: per symbol
// and tumbling event-time window, count, avg(price) and max(price) of the ticks with price > 100 (of every
// tick with -Dwindow.where=none). Prices are kept exactly, in millionths (a tick's price has at most 6
// decimals and 9 integer digits), so a sum of a window's prices cannot round as a double's would.

import java.io.Serializable;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;

public final class WindowQuery {
    private WindowQuery() {
    }

    static final long MIN_PRICE = 100_000_000L; // 100, in millionths
    // -Dwindow.where=none: every tick, for the failover figures' query (no filter, so more live keys).
    static final boolean WHERE = !"none".equals(System.getProperty("window.where"));

    /** A parsed tick, with where it was read from (topic 0 or 1, offset), for a failover's progress. */
    public static class Tick implements Serializable {
        public String symbol;
        public long price; // millionths
        public long ts; // event time, ms
        public int topic;
        public long offset;

        public Tick() {
        }
    }

    /** The tick in `value` (symbol,price,volume,ts,venue), or null when it is no tick. */
    static Tick parse(byte[] value) {
        String[] f = new String(value, StandardCharsets.US_ASCII).split(",", -1);
        if (f.length != 5 || f[0].isEmpty()) {
            return null;
        }
        try {
            Tick t = new Tick();
            t.symbol = f[0];
            t.price = new BigDecimal(f[1]).movePointRight(6).longValueExact();
            t.ts = Long.parseLong(f[3]);
            return t;
        } catch (NumberFormatException | ArithmeticException e) {
            return null;
        }
    }

    static boolean selected(Tick t) {
        return t != null && (!WHERE || t.price > MIN_PRICE);
    }

    /** A window's partial aggregate: count, sum and max of the prices (millionths). */
    public static class Acc implements Serializable {
        public long count;
        public long sum;
        public long max = Long.MIN_VALUE;

        public Acc() {
        }

        Acc add(long price) {
            count += 1;
            sum = Math.addExact(sum, price);
            max = Math.max(max, price);
            return this;
        }

        Acc merge(Acc o) {
            count += o.count;
            sum = Math.addExact(sum, o.sum);
            max = Math.max(max, o.max);
            return this;
        }
    }

    /** A result as text: symbol,window start,window end,count,avg,max (avg rounded half-even to 6 places). */
    static String result(String symbol, long start, long end, Acc a) {
        BigDecimal avg = new BigDecimal(BigInteger.valueOf(a.sum), 6)
                .divide(BigDecimal.valueOf(a.count), 6, RoundingMode.HALF_EVEN);
        return symbol + "," + start + "," + end + "," + a.count + "," + avg.toPlainString() + ","
               + BigDecimal.valueOf(a.max, 6).toPlainString();
    }

    /**
     * What a failover peer has folded into its state: the highest offset of each source topic applied, printed
     * at most every 50 ms as "progress NOW_MS OFFSET_I1 OFFSET_I2". The bench reads, in the log of the
     * instance that took over, the first line past the topics' ends at the kill: input that arrived after
     * the kill, applied to the restored state.
     */
    static final class Progress {
        private final long[] applied = {-1, -1};
        private long printed;

        void applied(int topic, long offset) {
            applied[topic] = Math.max(applied[topic], offset);
            long now = System.currentTimeMillis();
            if (now - printed >= 50) {
                printed = now;
                System.out.println("progress " + now + " " + applied[0] + " " + applied[1]);
                System.out.flush();
            }
        }
    }
}
