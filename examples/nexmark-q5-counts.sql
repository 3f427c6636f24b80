-- Nexmark q5's first stage: bids per auction in 10 s windows sliding by 2 s.
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

CREATE TABLE q5_counts WITH ('topic' = 'nexmark-q5-counts');

INSERT INTO q5_counts
SELECT auction, window.start AS window_start, window.end AS window_end, count(*) AS num
FROM bid
GROUP BY window(date_time, '10 seconds', '2 seconds'), auction;
