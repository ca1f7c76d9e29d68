-- Most active users of each day in the daily batch (lakehouse run batch --date D)
SELECT dt, uid, member_level, sessions, page_views, distinct_products, spend_potential
FROM {daily_users}
ORDER BY dt DESC, page_views DESC, uid
LIMIT 20
