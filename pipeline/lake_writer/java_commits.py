"""Commits of data files written elsewhere, through Iceberg's Java API in the Spark driver's JVM.

A micro-batch job whose tasks write Parquet data files with PyIceberg (the click job) commits
them here rather than through PyIceberg's catalog: PyIceberg reads the table's whole metadata
file again, copies and compares it, and writes it back in Python at every commit, so its
commit costs more with every snapshot the table keeps; Iceberg's Java table keeps the
metadata it committed in memory and writes the next file from it (docs/performance.md).
The commit is Iceberg's own operation: a fast append (``newFastAppend``) or a rewrite of
files into others with the same rows (``newRewrite``: a ``replace`` snapshot), with Iceberg's
own retry on a race with another writer and its own validation that the files a rewrite
removes are still live.

A PyIceberg ``DataFile`` becomes a Java one by its path, size, record count and partition;
the column statistics readers prune by are read from the file's own Parquet footer
(``ParquetUtil.fileMetrics``, the table's metrics configuration), so nothing is lost in the
crossing.
"""

from __future__ import annotations

from collections.abc import Iterable


class JavaTable:
    """One Iceberg table as the driver's JVM holds it (the Spark catalog's table), for committing files."""

    def __init__(self, spark, name: str):
        """``name``: the table as Spark names it (``catalog.namespace.table``)."""
        self._jvm = spark._jvm
        self._session = spark._jsparkSession
        self.name = name
        self.table = self._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(self._session, name)

    def refresh(self) -> None:
        """Read the table's current metadata (after a commit made by another client)."""
        self.table.refresh()

    def append(self, files: Iterable, properties: dict[str, str]) -> None:
        """One ``append`` snapshot of ``files`` carrying ``properties`` in its summary."""
        append = self.table.newFastAppend()
        for file in files:
            append.appendFile(self._data_file(file, with_metrics=True))
        for key, value in properties.items():
            append.set(key, value)
        append.commit()

    def replace(self, removed: Iterable, added: Iterable, properties: dict[str, str]) -> None:
        """One ``replace`` snapshot: ``added`` hold the rows of ``removed``. Iceberg refuses it (a
        ``ValidationException``) when another writer removed any of ``removed`` meanwhile."""
        rewrite = self.table.newRewrite()
        for file in removed:
            rewrite.deleteFile(self._data_file(file, with_metrics=False))
        for file in added:
            rewrite.addFile(self._data_file(file, with_metrics=True))
        for key, value in properties.items():
            rewrite.set(key, value)
        rewrite.commit()

    def _data_file(self, file, with_metrics: bool):
        """The Java ``DataFile`` of a PyIceberg one (written with the table's current partition spec)."""
        iceberg = self._jvm.org.apache.iceberg
        spec = self.table.spec()
        partition = iceberg.PartitionData(spec.partitionType())
        values = file.partition
        for index in range(len(values)):
            partition.set(index, values[index])
        builder = (iceberg.DataFiles.builder(spec).withPath(file.file_path).withFormat("PARQUET")
                   .withFileSizeInBytes(file.file_size_in_bytes).withRecordCount(file.record_count)
                   .withPartition(partition))
        if with_metrics:
            metrics = iceberg.parquet.ParquetUtil.fileMetrics(self.table.io().newInputFile(file.file_path),
                                                              iceberg.MetricsConfig.forTable(self.table))
            builder = builder.withMetrics(metrics)
        return builder.build()
