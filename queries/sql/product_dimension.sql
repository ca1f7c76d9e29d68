-- The product dimension as CDC keeps it (merge-on-read: position deletes applied)
SELECT productId, name, product_price, update_time
FROM {products}
ORDER BY productId
