"""The binlog source connector (`lakehouse run cdc`): MySQL/MariaDB row changes -> Debezium envelopes in Kafka.

A consistent snapshot of each captured table, then every row change from the binlog, each as a
Debezium JSON envelope (``envelope``, the connector's output contract) on the table's change
topic; the DDL it meets followed or stopped at (``ddl``, ``source_schema``); each table's schema
over time on the schema-history topic; its binlog position (``gtid``) in the checkpoint topic,
where a restart resumes. It is the one long-running part that is not a Spark job: a source
connector, as Debezium's is. The apply reads its topics (``pipeline.cdc``).
"""
