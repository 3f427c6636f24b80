-- Nexmark q5 in one stage: per 10 s window sliding by 2 s, the auctions with the most bids, every tie
-- kept. Nexmark's text joins the counts with their maximum per window; QUALIFY ranks them instead (Flink
-- SQL's Window Top-N says the same with ROW_NUMBER or RANK in a subquery).
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

CREATE TABLE q5 WITH ('topic' = 'nexmark-q5');

INSERT INTO q5
SELECT auction, window.start AS starttime, window.end AS endtime, count(*) AS num
FROM bid
GROUP BY window(date_time, '10 seconds', '2 seconds'), auction
QUALIFY rank() OVER (PARTITION BY window.start ORDER BY count(*) DESC) <= 1;
