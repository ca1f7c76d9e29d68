"""Load the dimension tables from the source database in one consistent read.

This is the initial-snapshot half of CDC: it copies ``products`` and ``user_member``
from MariaDB/MySQL (one REPEATABLE READ transaction, so both tables come from the
same moment) into the Iceberg dimension tables, replacing their contents. Streaming
changes on top of it is the CDC job's work; the demo uses this to start enriched.
"""

from __future__ import annotations

import pymysql

from lakehouse.settings import Settings, secret
from pipeline.tables import ensure_dimension_tables

PRODUCTS_SQL = "SELECT productId, name, description, product_price, update_time FROM products"
MEMBERS_SQL = "SELECT userid, name, show_params, memberLevel, update_time FROM user_member"


def read_source(settings: Settings) -> tuple[list[tuple], list[tuple]]:
    m = settings.mariadb
    conn = pymysql.connect(host=m.host, port=m.port, user=m.cdc_user, database=m.database,
                           password=secret(m.cdc_password, "mariadb.cdc_password"), connect_timeout=5)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            cur.execute(PRODUCTS_SQL)
            products = list(cur.fetchall())
            cur.execute(MEMBERS_SQL)
            members = list(cur.fetchall())
            cur.execute("COMMIT")
    finally:
        conn.close()
    return products, members


def load_dimensions(spark, settings: Settings) -> tuple[int, int]:
    """Replace both Iceberg dimension tables with the source rows; returns row counts."""
    ensure_dimension_tables(spark, settings)
    products, members = read_source(settings)
    cat = settings.catalog
    spark.createDataFrame(products, "productId STRING, name STRING, description STRING, "
                                    "product_price DECIMAL(10,4), update_time TIMESTAMP") \
        .writeTo(cat.products_table).overwritePartitions()
    spark.createDataFrame(members, "userid STRING, name STRING, show_params STRING, member_level INT, "
                                   "update_time TIMESTAMP") \
        .writeTo(cat.members_table).overwritePartitions()
    return len(products), len(members)
