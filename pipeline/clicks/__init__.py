"""Click-stream ingestion: ClickEvents from Kafka into the Iceberg click table."""
