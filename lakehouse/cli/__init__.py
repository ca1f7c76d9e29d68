"""The `lakehouse` command: thin commands over the product and the harness.

Every command imports what it runs inside its own body, and only there: `lakehouse --help`
loads none of Spark, Locust or matplotlib and answers at once, and the image, which holds
no `lab/`, still runs every product command (tests/lakehouse/test_layout.py checks both).
"""
