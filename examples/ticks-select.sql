-- The ticks of `make demo`, as CSV: the trades above 100.
CREATE TABLE ticks (
  symbol VARCHAR NOT NULL,
  price DECIMAL(15, 6) NOT NULL,
  volume BIGINT NOT NULL,
  ts TIMESTAMP(3) NOT NULL,
  venue VARCHAR NOT NULL,
  WATERMARK FOR ts AS ts
) WITH ('topic' = 'I1', 'format' = 'csv');

SELECT symbol, price, volume, ts, venue FROM ticks WHERE price > 100;
