-- Nexmark q7's first stage: the highest bid price per 10 s tumbling window.
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

CREATE TABLE q7_max WITH ('topic' = 'nexmark-q7-max');

INSERT INTO q7_max
SELECT window.start AS window_start, window.end AS window_end, max(price) AS maxprice
FROM bid
GROUP BY window(date_time, '10 seconds');
