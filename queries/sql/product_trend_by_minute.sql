-- Views per minute of the five most viewed products over the last hour of event time
WITH recent AS (
  SELECT productId, date_trunc('minute', event_time) AS minute
  FROM {clicks}
  WHERE event_time >= current_timestamp - INTERVAL '1' HOUR
),
top AS (
  SELECT productId FROM recent GROUP BY productId ORDER BY count(*) DESC, productId LIMIT 5
)
SELECT r.minute, r.productId, count(*) AS views
FROM recent r JOIN top t ON r.productId = t.productId
GROUP BY r.minute, r.productId
ORDER BY r.minute, r.productId
