-- Nexmark q1: every bid with its price converted (0.908 * price).
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

CREATE TABLE q1_results WITH ('topic' = 'nexmark-q1');

INSERT INTO q1_results
SELECT auction, bidder, 0.908 * price AS price, date_time, extra FROM bid;
