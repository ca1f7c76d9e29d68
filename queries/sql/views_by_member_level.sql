-- Views, unique users and time spent per member level (live aggregates; NULL = no member record)
SELECT member_level, views, unique_users, expend_time_total,
       round(CAST(expend_time_total AS DOUBLE) / views, 2) AS avg_expend_time
FROM {member_activity}
ORDER BY member_level NULLS LAST
