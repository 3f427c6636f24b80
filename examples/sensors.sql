-- Sensor readings in JSON, with nulls, a DECIMAL and ISO-8601 times: the average and peak temperature
-- per device and minute, for the devices whose battery is reported.
CREATE TABLE reading (
  device VARCHAR NOT NULL,
  site VARCHAR,
  temp DOUBLE,
  battery DECIMAL(5, 2),
  ok BOOLEAN,
  at TIMESTAMP(3) NOT NULL,
  WATERMARK FOR at AS at - INTERVAL '2' SECOND
) WITH ('topic' = 'sensors', 'format' = 'json');

CREATE TABLE per_device WITH ('topic' = 'sensors-per-minute');

SET bsize = 10;

INSERT INTO per_device
SELECT device, window.start AS window_start, window.end AS window_end,
       count(*) AS readings, avg(temp) AS avg_temp, max(temp) AS max_temp, min(battery) AS min_battery
FROM reading
WHERE battery IS NOT NULL
GROUP BY window(at, '1 minute'), device
HAVING count(*) >= 2;
