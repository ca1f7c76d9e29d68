"""Realistic changes to the shop database: the CDC path's load.

Prices and member levels change often; products and members are created and removed
now and then. Only rows this generator created are ever deleted, so the seed rows
stay; a deleted key may come back later (delete + re-insert of one key).
"""

from __future__ import annotations

import random
from decimal import Decimal

import pymysql

from lakehouse.settings import Settings, secret
from lakehouse.source_database import connect
from loadgen.key_space import SEED_MEMBER_IDS

SEED_PRODUCT_IDS = tuple(str(i) for i in range(1, 10))
#: the product whose one price change `make demo` follows through the pipeline; random changes leave its
#: price alone, so the demo's "clicks on product 1 before and after" reads as one change
STORY_PRODUCT_ID = "1"
REPRICED_PRODUCT_IDS = tuple(p for p in SEED_PRODUCT_IDS if p != STORY_PRODUCT_ID)


class ShopChanges:
    def __init__(self, settings: Settings, rng: random.Random, key_space: int = 200):
        m = settings.mariadb
        self.rng = rng
        self.key_space = key_space
        self.conn = connect(settings, user=m.app_user, database=m.database,
                            password=secret(m.app_password, "mariadb.app_password"))
        self.choices = [
            (40, "update product price", self.update_price),
            (30, "update member level", self.update_member_level),
            (10, "insert product", self.insert_product),
            (8, "delete product", self.delete_product),
            (7, "insert member", self.insert_member),
            (5, "delete member", self.delete_member),
        ]

    def random_change(self) -> tuple[str, Exception | None]:
        """Apply one change; (what, error or None)."""
        name, action = self.rng.choices([(n, a) for _, n, a in self.choices],
                                        weights=[w for w, _, _ in self.choices])[0]
        try:
            with self.conn.cursor() as cur:
                action(cur)
            return name, None
        except pymysql.MySQLError as exc:
            return name, exc

    def _product_id(self) -> str:
        return f"lg{self.rng.randrange(self.key_space)}"

    def update_price(self, cur) -> None:
        price = Decimal(self.rng.randrange(100, 100_000)) / Decimal(100)
        cur.execute("UPDATE products SET product_price = %s WHERE productId = %s",
                    (price, self.rng.choice(REPRICED_PRODUCT_IDS + (self._product_id(),))))

    def update_member_level(self, cur) -> None:
        cur.execute("UPDATE user_member SET memberLevel = %s WHERE userid = %s",
                    (self.rng.randint(1, 5), self.rng.choice(SEED_MEMBER_IDS)))

    def insert_product(self, cur) -> None:
        pid = self._product_id()
        cur.execute("INSERT INTO products (productId, name, description, product_price) VALUES (%s, %s, %s, %s) "
                    "ON DUPLICATE KEY UPDATE name = VALUES(name)",
                    (pid, f"product-{pid}", "generated", Decimal(self.rng.randrange(100, 10_000)) / Decimal(100)))

    def delete_product(self, cur) -> None:
        cur.execute("DELETE FROM products WHERE productId = %s", (self._product_id(),))

    def insert_member(self, cur) -> None:
        uid = f"lg{self.rng.randrange(self.key_space)}"
        cur.execute("INSERT INTO user_member (userid, name, memberLevel) VALUES (%s, %s, %s) "
                    "ON DUPLICATE KEY UPDATE memberLevel = VALUES(memberLevel)", (uid, f"member-{uid}",
                                                                               self.rng.randint(1, 5)))

    def delete_member(self, cur) -> None:
        cur.execute("DELETE FROM user_member WHERE userid = %s", (f"lg{self.rng.randrange(self.key_space)}",))
