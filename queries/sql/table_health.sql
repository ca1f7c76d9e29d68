-- Click table health from its metadata: data files, rows and average file size per day, and the snapshot count
SELECT f.partition.event_time_day AS day,
       count(*) AS data_files,
       sum(f.record_count) AS records,
       CAST(round(avg(f.file_size_in_bytes)) AS BIGINT) AS avg_file_bytes,
       (SELECT count(*) FROM {clicks:snapshots}) AS snapshots
FROM {clicks:files} f
WHERE f.content = 0
GROUP BY f.partition.event_time_day
ORDER BY day
