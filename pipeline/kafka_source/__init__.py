"""Exactly-once Kafka reading for PySpark without Spark's Kafka connector: one reader, ``stream.KafkaStream``,
in the five roles of Spark 4's ``DataSourceStreamReader``.

- *initial offset*: the offsets the target table's newest snapshot recorded (``offsets``): the only
  checkpoint, so a restart resumes from the table;
- *latest offset*: each partition's last stable offset, capped per partition (``planner.Planner``);
- *partitions*: the batch's offset ranges cut into one partition a core (``ranges.balance``);
- *read*: each partition fetched in a Spark task into Arrow, exactly ``[start, end)`` of each range, so a
  retried task reads the same records (``stream.PartitionReader``, ``range_reader.RangeReader``);
- *commit*: the end offsets written in the same Iceberg snapshot as the rows.

``batch_job.KafkaBatchJob`` plays them once a micro-batch for the click ingestion and the CDC apply.
"""
