"""SeaweedFS in 'mini' mode: the S3-compatible object store of the local stack."""

from __future__ import annotations

import json
import os

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from deploy.local.binaries import tool
from deploy.local.services.base import Service
from lakehouse.settings import Settings, secret


def s3_client(settings: Settings, timeout: float = 5.0):
    """A boto3 S3 client for the stack's object store (path-style, per-stack keys)."""
    return boto3.client(
        "s3",
        endpoint_url=settings.s3.endpoint,
        aws_access_key_id=secret(settings.s3.access_key, "s3.access_key"),
        aws_secret_access_key=secret(settings.s3.secret_key, "s3.secret_key"),
        region_name=settings.s3.region,
        config=Config(
            s3={"addressing_style": "path"},
            connect_timeout=timeout,
            read_timeout=timeout,
            retries={"max_attempts": 5, "mode": "standard"},
        ),
    )


class ObjectStore(Service):
    name = "s3"
    startup_timeout = 60.0

    def ports(self) -> dict[str, int]:
        s3 = self.settings.s3
        return {
            "s3": s3.port,
            "s3-master": s3.master_port,
            "s3-volume": s3.volume_port,
            "s3-filer": s3.filer_port,
            "s3-metrics": s3.metrics_port,
            "s3-admin": s3.admin_port,
            # SeaweedFS also opens gRPC ports at +10000 of each named one
            **{f"s3-grpc-{p}": p + 10000 for p in (s3.port, s3.master_port, s3.volume_port, s3.filer_port, s3.admin_port)},
        }

    @property
    def identity_file(self):
        return self.config_dir / "s3.json"

    def prepare(self, user: str | None) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_dir.mkdir(parents=True, exist_ok=True)
        identity = {
            "identities": [
                {
                    "name": "lakehouse",
                    "credentials": [
                        {
                            "accessKey": secret(self.settings.s3.access_key, "s3.access_key"),
                            "secretKey": secret(self.settings.s3.secret_key, "s3.secret_key"),
                        }
                    ],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                }
            ]
        }
        fd = os.open(self.identity_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(identity, fh)

    def command(self) -> list[str]:
        s3 = self.settings.s3
        return [
            str(tool(self.settings.tools_dir, "weed")),
            "mini",
            f"-dir={self.data_dir}",
            f"-ip={s3.host}",
            f"-ip.bind={s3.host}",
            f"-s3.port={s3.port}",
            f"-s3.config={self.identity_file}",
            f"-master.port={s3.master_port}",
            f"-volume.port={s3.volume_port}",
            f"-filer.port={s3.filer_port}",
            f"-admin.port={s3.admin_port}",
            f"-metricsPort={s3.metrics_port}",
            f"-volume.max={s3.max_volumes}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-webdav=false",
            "-admin.ui=false",
            "-master.telemetry=false",
        ]

    def ready(self) -> bool:
        """ListBuckets answers; once the warehouse bucket exists, an object also round-trips.

        SeaweedFS answers ListBuckets before its volume server serves reads, so after a
        restart the first GetObject could fail without the second check.
        """
        try:
            client = s3_client(self.settings, timeout=2.0)
            buckets = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
            bucket = self.settings.s3.warehouse_bucket
            if bucket in buckets:
                client.put_object(Bucket=bucket, Key="_lakehouse/ready", Body=b"ok")
                return client.get_object(Bucket=bucket, Key="_lakehouse/ready")["Body"].read() == b"ok"
            return True
        except (BotoCoreError, ClientError):
            return False

    def bootstrap(self) -> None:
        client = s3_client(self.settings)
        existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
        if self.settings.s3.warehouse_bucket not in existing:
            client.create_bucket(Bucket=self.settings.s3.warehouse_bucket)
