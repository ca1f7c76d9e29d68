package lakehouse;

import java.util.List;
import java.util.UUID;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Table;
import org.apache.iceberg.data.GenericFileWriterFactory;
import org.apache.iceberg.data.GenericRecord;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.deletes.EqualityDeleteWriter;
import org.apache.iceberg.encryption.EncryptedFiles;
import org.apache.iceberg.io.OutputFile;
import org.apache.iceberg.spark.Spark3Util;
import org.apache.spark.sql.SparkSession;

/**
 * Delete rows by key with an Iceberg equality-delete file, the way streaming upserts
 * (Flink, Debezium sinks) write them. Spark's MERGE writes position deletes only, so the
 * lakehouse uses this to produce equality deletes where a reader must handle them
 * (the cross-engine query checks). Unpartitioned tables, string key columns.
 */
public final class EqualityDeletes {
  private EqualityDeletes() {}

  public static long deleteKeys(SparkSession spark, String tableName, String column, List<String> keys)
      throws Exception {
    Table table = Spark3Util.loadIcebergTable(spark, tableName);
    if (table.spec().isPartitioned()) {
      throw new IllegalArgumentException(tableName + " is partitioned; only unpartitioned tables are supported");
    }
    int fieldId = table.schema().findField(column).fieldId();
    Schema deleteSchema = table.schema().select(column);
    GenericFileWriterFactory factory = new GenericFileWriterFactory.Builder(table)
        .deleteFileFormat(FileFormat.PARQUET)
        .equalityFieldIds(new int[] {fieldId})
        .equalityDeleteRowSchema(deleteSchema)
        .build();
    OutputFile out = table.io().newOutputFile(
        table.locationProvider().newDataLocation("eq-delete-" + UUID.randomUUID() + ".parquet"));
    EqualityDeleteWriter<Record> writer =
        factory.newEqualityDeleteWriter(EncryptedFiles.plainAsEncryptedOutput(out), table.spec(), null);
    try (EqualityDeleteWriter<Record> w = writer) {
      for (String key : keys) {
        Record record = GenericRecord.create(deleteSchema);
        record.setField(column, key);
        w.write(record);
      }
    }
    DeleteFile deletes = writer.toDeleteFile();
    table.newRowDelta().addDeletes(deletes).commit();
    return table.currentSnapshot().snapshotId();
  }
}
