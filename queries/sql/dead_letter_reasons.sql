-- Dead-lettered events by reason: how many, and when the latest one arrived
SELECT error_kind, count(*) AS events, max(ingest_time) AS latest
FROM {dead_letter}
GROUP BY error_kind
ORDER BY events DESC, error_kind
