"""The local broker's cluster id: one the Kafka format tool accepts, every time."""

from __future__ import annotations

import base64
import uuid

from deploy.local.services import broker


def test_an_id_that_would_start_with_a_dash_is_drawn_again(monkeypatch):
    dashed = uuid.UUID(bytes=b"\xf8" + bytes(15))  # base64url of 0xf8... starts with "-": read as an option
    plain = uuid.UUID(bytes=b"\x10" * 16)
    draws = iter([dashed, plain])
    monkeypatch.setattr(broker.uuid, "uuid4", lambda: next(draws))
    assert base64.urlsafe_b64encode(dashed.bytes).decode().startswith("-")
    cluster_id = broker.new_cluster_id()
    assert cluster_id == base64.urlsafe_b64encode(plain.bytes).decode().rstrip("=")


def test_ids_are_22_characters_of_16_random_bytes():
    ids = {broker.new_cluster_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
    assert all(len(base64.urlsafe_b64decode(i + "==")) == 16 for i in ids)
