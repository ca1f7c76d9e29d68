"""Grafana dashboards as code (grafana-foundation-sdk), generated to JSON for provisioning."""
