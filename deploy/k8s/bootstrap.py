"""The bucket-creation Job of the Kubernetes runtime: ``python -m deploy.k8s.bootstrap``.

Creates the Iceberg warehouse bucket in MinIO with the same client code the local stack
uses, retrying while MinIO starts (the Job runs alongside it). Idempotent.
"""

from __future__ import annotations

import sys

from tenacity import retry, stop_after_delay, wait_exponential

from deploy.local.services.object_store import s3_client
from lakehouse.settings import load_settings


@retry(wait=wait_exponential(max=10), stop=stop_after_delay(300), reraise=True)
def ensure_bucket(bucket: str) -> bool:
    """True when the bucket was created, False when it already existed."""
    client = s3_client(load_settings())
    existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
    if bucket in existing:
        return False
    client.create_bucket(Bucket=bucket)
    return True


def main() -> None:
    settings = load_settings()
    bucket = settings.s3.warehouse_bucket
    try:
        created = ensure_bucket(bucket)
    except Exception as exc:  # noqa: BLE001 - report any failure in one line for `kubectl logs`
        sys.exit(f"could not reach {settings.s3.endpoint} to create bucket {bucket!r}: {exc}")
    print(f"bucket {bucket!r} {'created' if created else 'already exists'} at {settings.s3.endpoint}")


if __name__ == "__main__":
    main()
