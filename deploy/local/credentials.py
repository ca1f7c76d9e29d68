"""Per-stack credentials: generated once, kept in the run directory with mode 0600.

No password of the local stack is a default that could be guessed from the source:
the first `lakehouse stack up` creates them; later runs reuse them so data written with
them stays readable. `lakehouse config show` prints them masked.
"""

from __future__ import annotations

import json
import os
import secrets

from lakehouse.settings import GENERATED_SECRETS, Settings, load_settings


def new_value(field: str) -> str:
    """A fresh random credential: S3 access keys look like keys, everything else is a long token."""
    if field == "access_key":
        return "LH" + secrets.token_hex(9).upper()
    return secrets.token_urlsafe(24)


def ensure_credentials(settings: Settings) -> Settings:
    """Create missing credentials in the run dir (0600) and return settings that carry them."""
    path = settings.credentials_path
    path.parent.mkdir(parents=True, exist_ok=True)
    stored: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
    changed = False
    for section, field in GENERATED_SECRETS:
        key = f"{section}.{field}"
        if key not in stored:
            stored[key] = new_value(field)
            changed = True
    if changed or not path.exists():
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(stored, fh, indent=2)
        os.replace(tmp, path)
    os.chmod(path, 0o600)
    return load_settings(run_dir=settings.run_dir, tools_dir=settings.tools_dir)
