-- Three stages, each with its own primary and standby: a filter feeding a window feeding a window.
-- The bids on even-numbered auctions; their count per auction in 10 s windows sliding by 2 s; per window,
-- the highest count and how many auctions had bids.
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

CREATE TABLE hot_auctions WITH ('topic' = 'nexmark-hot-auctions');

-- Stage 1: a selection; it passes date_time through as it is, so its view keeps the event time and delay.
CREATE VIEW even_bids AS
SELECT auction, bidder, price, date_time FROM bid WHERE MOD(auction, 2) = 0;

-- Stage 2: the counts, one result per auction and window, in window order.
CREATE VIEW auction_bids AS
SELECT auction, window.start AS window_start, window.end AS window_end, count(*) AS num
FROM even_bids
GROUP BY window(date_time, '10 seconds', '2 seconds'), auction;

-- Stage 3: each 2 s window of window_end holds one sliding window's counts.
INSERT INTO hot_auctions
SELECT window.start AS hop_end, max(num) AS maxn, count(*) AS auctions
FROM auction_bids
GROUP BY window(window_end, '2 seconds');
