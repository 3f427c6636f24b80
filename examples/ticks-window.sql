-- The ticks of `make demo-window`, as CSV: per symbol and second, the trades above 100.
CREATE TABLE ticks (
  symbol VARCHAR NOT NULL,
  price DECIMAL(15, 6) NOT NULL,
  volume BIGINT NOT NULL,
  ts TIMESTAMP(3) NOT NULL,
  venue VARCHAR NOT NULL,
  WATERMARK FOR ts AS ts
) WITH ('topic' = 'I1', 'format' = 'csv');

SELECT window.start AS window_start, window.end AS window_end, symbol,
       count(*) AS count, avg(price) AS avg_price, max(price) AS max_price
FROM ticks
WHERE price > 100
GROUP BY window(ts, '1 second'), symbol;
