"""ClickEvents as the seed's generator makes them, plus deliberately bad ones.

Good events: webpageId 10-99, uid from the seed members with a share of unknown ids,
productId 0-19 (so some miss the product dimension), cookieId 15 random letters,
expendTime 0-19, updateTime now, and a unique eventId. Bad events cover each way a
payload can be wrong, so the dead-letter path is exercised on purpose.
"""

from __future__ import annotations

import json
import random
import string
import time
import uuid

SEED_MEMBER_IDS = ("513248", "10952", "555655", "795098", "603670")
BAD_KINDS = ("malformed_json", "wrong_type", "missing_field", "oversize", "event_time")


def click_event(rng: random.Random, unknown_member_share: float = 0.1, now_ms: int | None = None) -> dict:
    uid = str(rng.randint(100000, 999999)) if rng.random() < unknown_member_share else rng.choice(SEED_MEMBER_IDS)
    return {
        "eventId": uuid.UUID(int=rng.getrandbits(128), version=4).hex,
        "webpageId": rng.randint(10, 99),
        "uid": uid,
        "productId": str(rng.randint(0, 19)),
        "cookieId": "".join(rng.choices(string.ascii_letters, k=15)),
        "expendTime": rng.randint(0, 19),
        "updateTime": now_ms if now_ms is not None else int(time.time() * 1000),
    }


def bad_payload(rng: random.Random, kind: str | None = None, max_bytes: int = 16_384) -> tuple[str, bytes]:
    """(kind, payload) for one deliberately invalid event."""
    kind = kind or rng.choice(BAD_KINDS)
    event = click_event(rng)
    if kind == "malformed_json":
        return kind, json.dumps(event).encode()[:-7]
    if kind == "wrong_type":
        event["webpageId"] = "page-" + str(event["webpageId"])
    elif kind == "missing_field":
        del event[rng.choice(["uid", "productId", "cookieId", "expendTime", "updateTime", "webpageId"])]
    elif kind == "oversize":
        event["padding"] = "x" * (max_bytes + 1)
    elif kind == "event_time":
        event["updateTime"] = int(time.time() * 1000) + 30 * 86_400_000  # a month in the future
    else:
        raise ValueError(f"unknown bad event kind {kind!r}; kinds: {', '.join(BAD_KINDS)}")
    return kind, json.dumps(event).encode()


def encode(event: dict) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode()
