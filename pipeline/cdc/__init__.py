"""Change data capture: MySQL/MariaDB binlog -> Debezium envelopes in Kafka -> Iceberg MERGE."""
