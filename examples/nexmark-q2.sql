-- Nexmark q2: (auction, price) of the bids whose auction is a multiple of 123.
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

CREATE TABLE q2_results WITH ('topic' = 'nexmark-q2');

INSERT INTO q2_results
SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0;
