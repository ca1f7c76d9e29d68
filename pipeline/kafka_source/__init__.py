"""Exactly-once Kafka reading for PySpark without Spark's Kafka connector.

The driver plans offset ranges (``planner``), executors fetch them into Arrow
(``fetch``), and the consumed offsets travel in the same Iceberg snapshot as the
rows (``offsets``). Restart resumes from the table, so a crash at any point neither
loses nor duplicates a record.
"""
