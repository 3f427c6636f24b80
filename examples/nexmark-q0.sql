-- Nexmark q0: every bid, its columns passed through.
CREATE TABLE bid (
  auction BIGINT,
  bidder BIGINT,
  price BIGINT,
  channel VARCHAR,
  url VARCHAR,
  date_time TIMESTAMP(3),
  extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH ('topic' = 'bid', 'format' = 'json');

CREATE TABLE q0_results WITH ('topic' = 'nexmark-q0');

INSERT INTO q0_results
SELECT auction, bidder, price, date_time, extra FROM bid;
