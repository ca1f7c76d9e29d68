"""Continuous table maintenance: the project decides when and on what; Iceberg's procedures do the work."""
