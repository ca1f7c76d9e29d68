-- The source database of the seed: products and members, with the seed's rows.
-- Idempotent: safe to apply on every `stack up`.
CREATE TABLE IF NOT EXISTS products (
  productId VARCHAR(32) NOT NULL PRIMARY KEY,
  name VARCHAR(255) NOT NULL,
  description VARCHAR(512),
  product_price DECIMAL(10,4) NOT NULL,
  update_time TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3)
);

CREATE TABLE IF NOT EXISTS user_member (
  userid VARCHAR(32) NOT NULL PRIMARY KEY,
  name VARCHAR(255) NOT NULL,
  show_params VARCHAR(1024),
  memberLevel INT NOT NULL,
  update_time TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3)
);

INSERT IGNORE INTO products (productId, name, description, product_price) VALUES
  ('1', 'test01', 'test01', 1.1000),
  ('2', 'test02', 'test02', 2.2000),
  ('3', 'test03', 'test03', 3.3000),
  ('4', 'test04', 'test04', 4.4000),
  ('5', 'test05', 'test05', 5.5000),
  ('6', 'test06', 'test06', 6.6000),
  ('7', 'test07', 'test07', 7.7000),
  ('8', 'test08', 'test08', 8.8000),
  ('9', 'test09', 'test09', 9.9000);

INSERT IGNORE INTO user_member (userid, name, show_params, memberLevel) VALUES
  ('513248', 'member-513248', '{"theme":"light"}', 1),
  ('10952',  'member-10952',  '{"theme":"dark"}',  3),
  ('555655', 'member-555655', '{"theme":"light"}', 1),
  ('795098', 'member-795098', '{"theme":"dark"}',  2),
  ('603670', 'member-603670', '{"theme":"light"}', 4);
