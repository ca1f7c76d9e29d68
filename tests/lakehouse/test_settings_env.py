"""Handing settings to another process: `lakehouse.settings_env` must reproduce them exactly.

The soak starts its maintenance service this way, the Kubernetes ConfigMap is generated
this way; a field lost on the way would run a child against the wrong table or port.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from pydantic import SecretStr

from lakehouse.settings import Settings
from lakehouse.settings_env import declared_settings, settings_env

CHILD = ("import json; from lakehouse.settings import Settings; s = Settings(); "
         "print(json.dumps({'dump': s.model_dump(mode='json'), "
         "'secret': s.s3.secret_key and s.s3.secret_key.get_secret_value()}))")


def _child_settings(env: dict[str, str]) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    out = subprocess.run([sys.executable, "-c", CHILD], env=clean | env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_a_child_process_resolves_the_same_settings():
    s = declared_settings()
    s.catalog.clicks_table = "soak.clickevent_1"
    s.kafka.port, s.kafka.heap_mb = 23456, 768
    s.maintenance.interval_seconds, s.maintenance.nice = 30.0, 5
    s.metrics.maintenance_port = 23457
    s.s3.secret_key = SecretStr("not-a-default")
    env = settings_env(s, with_secrets=True)
    assert "LAKEHOUSE_S3__PORT" not in env  # only what differs from the defaults
    child = _child_settings(env)
    assert child["dump"] == s.model_dump(mode="json")
    assert child["secret"] == "not-a-default"


def test_the_parent_environment_does_not_hide_a_difference(monkeypatch):
    """A port the parent has from its own environment still reaches a child started without it
    (the soak's maintenance service on the test suite's shifted ports)."""
    monkeypatch.setenv("LAKEHOUSE_METASTORE__PORT", "23458")
    s = Settings()
    assert s.metastore.port == 23458
    assert settings_env(s)["LAKEHOUSE_METASTORE__PORT"] == "23458"
    assert _child_settings(settings_env(s, with_secrets=True))["dump"] == s.model_dump(mode="json")


def test_secrets_stay_out_unless_asked_for():
    s = declared_settings()
    s.s3.secret_key = SecretStr("not-a-default")
    assert not any("SECRET" in k for k in settings_env(s))
