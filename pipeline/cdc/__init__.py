"""The CDC apply (`lakehouse run dims`): the change topics merged into the dimension tables, on Spark.

The binlog connector (``pipeline.capture``) writes each captured table's changes as Debezium
envelopes; the apply reads them in Spark tasks (``change_reading``, ``changes``, ``images``),
one task per key bucket (``buckets``, ``held_state``), writes through the lake writer
(``pipeline.lake_writer``) and commits each table with its offsets on the driver (``apply``).
``targets`` and ``dimension_tables`` say which table a topic lands in; ``table_evolution``
follows the source's DDL.
"""
