"""Shared fixtures: one real local stack per test session, on ports of its own.

The suite never touches a developer's running stack: it uses its own run directory
and every port shifted by PORT_SHIFT, exported as LAKEHOUSE_* variables so that CLI
subprocesses started by tests resolve the same settings.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from lakehouse.settings import REPO_ROOT, Settings, load_settings
from lakehouse.settings_env import side_by_side_env

# Another shift (LAKEHOUSE_TEST_PORT_SHIFT) lets a second checkout's suite run beside this one.
PORT_SHIFT = int(os.environ.get("LAKEHOUSE_TEST_PORT_SHIFT", "100"))



@pytest.fixture(scope="session")
def stack_env() -> Iterator[dict[str, str]]:
    env = side_by_side_env(REPO_ROOT / ".run-test", PORT_SHIFT)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield env
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def stack(stack_env):
    """The running local stack (started once; stopped and purged at the end)."""
    from deploy.local.stack import LocalStack

    local = LocalStack(load_settings())
    local.down(purge=True)
    local.up()
    yield local
    local.down(purge=True)


@pytest.fixture(scope="session")
def settings(stack) -> Settings:
    return load_settings()


@pytest.fixture(scope="session")
def spark(settings):
    from pipeline.spark_session import build_session
    from tests.support.java_helpers import helper_jar

    session = build_session(settings, "lakehouse-tests",
                            extra_jars=(helper_jar(settings.tools_dir, settings.run_dir / "test-jars"),))
    yield session
    session.stop()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that reaches the stack through its fixtures is a stack test, marked or not (`make test-unit`
    selects by the mark). The Kubernetes node's tests run only when asked for by their mark (`make test-node`):
    they build the node (a quarter of an hour the first time) and are too long for `make test`."""
    asked_for_node = "node" in (config.getoption("markexpr") or "")
    for item in items:
        if "stack" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.stack)
        if item.get_closest_marker("node") and not asked_for_node:
            item.add_marker(pytest.mark.skip(reason="a Kubernetes node test: run `make test-node`"))


@pytest.fixture(scope="session")
def trino(stack, settings):
    """The stack's Trino 476 (an on-demand service: started here once for the session), as a query engine."""
    from queries.trino_engine import TrinoEngine

    stack.ensure("trino")
    return TrinoEngine(settings)
