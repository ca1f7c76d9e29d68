"""PySpark jobs: Kafka -> Iceberg ingestion, CDC apply, aggregates and batch."""
