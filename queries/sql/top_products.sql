-- Top 10 products by views right now (live aggregates; a price change shows as a new row)
SELECT productId, name, product_price, views, unique_users
FROM {product_views}
ORDER BY views DESC, productId, product_price
LIMIT 10
