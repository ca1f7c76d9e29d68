"""Settings handed to another process as ``LAKEHOUSE_*`` variables.

A child process (the soak's maintenance service, the chaos fleet, a test's second stack)
or a pod (the generated ConfigMap) reads the same typed ``Settings``; these functions say
which variables make it resolve what the parent means.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lakehouse.settings import GENERATED_SECRETS, Settings


class _Declared(Settings):
    """Settings that ignore the environment: see :func:`declared_settings`."""

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, **other_sources):
        return (init_settings,)


def declared_settings(data: dict[str, Any] | None = None) -> Settings:
    """The declared defaults overlaid with ``data``, whatever LAKEHOUSE_* variables this process has.

    (``Settings.model_validate`` reads the environment too.) For what must not depend on the
    shell it is computed in: the Kubernetes settings, the defaults :func:`settings_env` diffs against.
    """
    return _Declared.model_validate(data or {})


def settings_env(settings: Settings, with_secrets: bool = False) -> dict[str, str]:
    """The ``LAKEHOUSE_*`` variables that turn the defaults into ``settings``.

    How a process hands its settings to another one (a subprocess, a pod): only what differs
    from the defaults. Credentials only ``with_secrets`` (a local child process); a pod gets
    them from the Kubernetes Secret.
    """
    def as_env(s: Settings) -> dict[str, str]:
        return {f"LAKEHOUSE_{k.upper()}": json.dumps(v) if isinstance(v, list | dict) else str(v)
                for k, v in flatten(s.model_dump(mode="json"), "__").items() if v is not None}

    defaults = as_env(declared_settings())
    secrets = {f"LAKEHOUSE_{section.upper()}__{field.upper()}" for section, field in GENERATED_SECRETS}
    env = {k: v for k, v in sorted(as_env(settings).items()) if defaults.get(k) != v and k not in secrets}
    if with_secrets:
        for section, field in GENERATED_SECRETS:
            value = getattr(getattr(settings, section), field)
            if value is not None:
                env[f"LAKEHOUSE_{section.upper()}__{field.upper()}"] = value.get_secret_value()
    return env


def side_by_side_env(run_dir: Path, shift: int) -> dict[str, str]:
    """LAKEHOUSE_* variables for a second local stack beside the first: its own run dir, every port +shift.

    The test suite and the chaos suite run their stacks this way, never touching the
    developer's stack on the default ports.
    """
    defaults = Settings()
    env = {"LAKEHOUSE_RUN_DIR": str(run_dir)}
    for section in type(defaults).model_fields:  # every section with a port: a new service is shifted too
        model = getattr(defaults, section)
        for field in getattr(type(model), "model_fields", {}):
            if field == "port" or field.endswith("_port"):
                env[f"LAKEHOUSE_{section.upper()}__{field.upper()}"] = str(getattr(model, field) + shift)
    return env


def flatten(data: dict[str, Any], sep: str = ".", prefix: str = "") -> dict[str, Any]:
    """Nested settings data as one level: ``{"kafka": {"port": 1}}`` -> ``{"kafka.port": 1}``."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, sep, name + sep))
        else:
            out[name] = value
    return out
