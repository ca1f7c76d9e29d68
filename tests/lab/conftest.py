"""The pipeline tests' isolated-tables fixture, shared with the observability tests."""

from tests.pipeline.conftest import click_settings  # noqa: F401 - a fixture, used by name
