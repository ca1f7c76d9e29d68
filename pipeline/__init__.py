"""The product's data jobs, each a Spark application (or one of several in one: ``app``), and the binlog connector.

On Spark: the click ingestion (``clicks``), the CDC apply (``cdc``, writing through ``lake_writer``), the
live aggregates and the daily batch (``aggregates``) and maintenance (``maintenance``); ``jobs`` declares
them, ``runner`` loops them, ``kafka_source`` is the one Kafka reader they share. Not on Spark: the binlog
capture (``capture``), a source connector that writes Kafka topics, as Debezium's does.
"""
