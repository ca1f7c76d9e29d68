"""The pipeline tests' isolated-tables and producer fixtures, shared with the observability and peer tests."""

from tests.pipeline.conftest import click_settings, producer  # noqa: F401 - fixtures, used by name
