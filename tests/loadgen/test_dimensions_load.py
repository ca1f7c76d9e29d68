"""The dimension loader (loadgen/dimensions.py) on the real MariaDB: the rows asked for, in the key
space other generators draw from, and a second load adding nothing."""

from __future__ import annotations

import uuid

from deploy.local.services.mariadb import create_source_database
from lakehouse.source_database import connect
from loadgen.dimensions import load_table, member_key, product_key


def test_loading_twice_adds_the_rows_once_with_their_generated_keys(settings):
    database = f"shop_load_{uuid.uuid4().hex[:8]}"
    create_source_database(settings, database)
    seen: list[int] = []
    first = load_table(settings, "user_member", 2_500, database, progress=seen.append)
    again = load_table(settings, "user_member", 2_500, database)
    products = load_table(settings, "products", 300, database)
    assert (first.added, again.added, products.added) == (2_500, 0, 300)
    assert seen == [2_500] and first.rows_per_s > 0
    with connect(settings, database=database) as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*), MIN(userid), MAX(userid) FROM user_member WHERE CHAR_LENGTH(userid) = %s",
                    (len(member_key(0)),))  # the seed's ids are shorter
        assert cur.fetchone() == (2_500, member_key(0), member_key(2_499))
        cur.execute("SELECT name, product_price FROM products WHERE productId = %s", (product_key(299),))
        name, price = cur.fetchone()
        assert name == f"product-{product_key(299)}" and price > 0
        cur.execute(f"DROP DATABASE `{database}`")


def test_a_database_that_does_not_exist_is_named_with_what_to_check(settings):
    import pytest

    from lakehouse.errors import LakehouseError

    with pytest.raises(LakehouseError, match="'no_such_shop'.*does the database exist"):
        load_table(settings, "user_member", 10, "no_such_shop")
