-- Time travel: views per product as the click table was one minute ago
SELECT productId, count(*) AS views
FROM {clicks} FOR TIMESTAMP AS OF current_timestamp - INTERVAL '1' MINUTE
GROUP BY productId
ORDER BY views DESC, productId
