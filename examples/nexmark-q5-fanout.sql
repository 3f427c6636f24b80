-- One view read by two queries, each into a sink of its own (a DAG of three stages, each with its own
-- primary and standby): Nexmark q5's counts per auction per sliding window feed both q5's hot items and
-- a per-window summary.
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

CREATE TABLE q5 WITH ('topic' = 'nexmark-q5-fanout-hot');
CREATE TABLE window_stats WITH ('topic' = 'nexmark-q5-fanout-stats');

-- Stage 1: the counts, one result per auction and window, in window order.
CREATE VIEW auction_bids AS
SELECT auction, window.start AS window_start, window.end AS window_end, count(*) AS num
FROM bid
GROUP BY window(date_time, '10 seconds', '2 seconds'), auction;

-- Stage 2: per window, the auctions with the most bids (q5).
INSERT INTO q5
SELECT auction, window.start AS hop_end, max(num) AS num
FROM auction_bids
GROUP BY window(window_end, '2 seconds'), auction
QUALIFY rank() OVER (PARTITION BY window.start ORDER BY max(num) DESC) <= 1;

-- Stage 3: per window, how many auctions had bids and how many bids they had.
INSERT INTO window_stats
SELECT window.start AS hop_end, count(*) AS auctions, sum(num) AS bids
FROM auction_bids
GROUP BY window(window_end, '2 seconds');
