// The selection every peer of the bench runs, as the pipeline's default predicate (price > 100) does.

import java.nio.charset.StandardCharsets;

final class Ticks {
    private Ticks() {
    }

    /** A tick (symbol,price,volume,ts,venue) is kept when it has five fields and a price above 100. */
    static boolean select(byte[] value) {
        String[] fields = new String(value, StandardCharsets.US_ASCII).split(",", -1);
        if (fields.length != 5) {
            return false;
        }
        try {
            return Double.parseDouble(fields[1]) > 100;
        } catch (NumberFormatException e) {
            return false;
        }
    }
}
