package lakehouse;

import java.util.Map;
import org.apache.iceberg.spark.CommitMetadata;
import org.apache.spark.sql.SparkSession;

/**
 * Run one Spark SQL statement (e.g. MERGE INTO) so that the Iceberg snapshot it commits
 * carries the given summary properties.
 *
 * DataFrame writes take "snapshot-property.*" options, but SQL statements have no
 * options; Iceberg reads commit properties from a thread-local that this class sets
 * around the statement. The lakehouse uses it to put Kafka offsets into the same
 * commit as a MERGE. Called from PySpark through py4j.
 */
public final class CommitWithProperties {
  private CommitWithProperties() {}

  public static long sql(SparkSession spark, String statement, Map<String, String> properties) {
    return CommitMetadata.withCommitProperties(
        properties, () -> spark.sql(statement).count(), RuntimeException.class);
  }
}
