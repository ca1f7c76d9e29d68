"""The `lakehouse` command: thin commands over the product (the roof: nothing imports it).

Every command imports what it runs inside its own body, and only there: `lakehouse --help`
loads none of Spark, Locust or DuckDB and answers at once. The harness's commands (`bench`,
`chaos`, `demo`, `report`) live in ``lab/commands`` and are added where ``lab`` is installed
(``cli.main``); the image holds no ``lab/`` (tests/lakehouse/test_layout.py checks both).
"""
