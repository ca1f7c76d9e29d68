"""Near-real-time lakehouse: shared settings and the `lakehouse` command line."""
