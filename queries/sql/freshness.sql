-- Freshness of the click table as a reader sees it: newest event and commit vs now, in seconds
SELECT count(*) AS rows_total,
       max(event_time) AS newest_event_time,
       max(ingest_time) AS newest_commit_time,
       date_diff('second', max(event_time), current_timestamp) AS event_age_seconds,
       date_diff('second', max(ingest_time), current_timestamp) AS commit_age_seconds
FROM {clicks}
