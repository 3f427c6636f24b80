-- Nexmark q5 in two stages, each with its own primary and standby: the bids per auction in 10 s windows
-- sliding by 2 s (the view), then per window the auctions with the most bids, every tie kept (q5 joins
-- its counts with their maximum per window; a rank in QUALIFY says the same without the self-join).
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

-- Stage 1: its results are the view's rows, ordered by window; window_end is the next stage's event time.
CREATE VIEW auction_bids AS
SELECT auction, window.start AS window_start, window.end AS window_end, count(*) AS num
FROM bid
GROUP BY window(date_time, '10 seconds', '2 seconds'), auction;

-- Stage 2: each 2 s window of window_end holds one sliding window's counts, one row per auction.
INSERT INTO q5
SELECT auction, window.start AS hop_end, max(num) AS num
FROM auction_bids
GROUP BY window(window_end, '2 seconds'), auction
QUALIFY rank() OVER (PARTITION BY window.start ORDER BY max(num) DESC) <= 1;
