"""Ad-hoc SQL over the lakehouse tables (Trino in Kubernetes, DuckDB locally)."""
