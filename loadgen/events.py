"""ClickEvents as the seed's generator makes them, plus deliberately bad ones.

Good events: webpageId 10-99, uid and productId from a ``KeySpace`` (by default the seed's
members with a share of unknown ids, and productId 0-19 so some miss the product dimension), cookieId one of a few thousand
browser sessions of 15 random letters, expendTime 0-19, updateTime now, and a unique eventId
(a random UUID v4). Bad events cover each way a payload can be wrong, so the dead-letter path
is exercised on purpose.

Making and encoding an event is most of a load generator's CPU, which shares the machine
with what it loads: an event costs about 3 µs here (it was 11 µs with a UUID object, a
15-letter draw per event and the standard library's JSON encoder).
"""

from __future__ import annotations

import json
import random
import string
import time

import msgspec

from loadgen.key_space import SEED, KeySpace

BAD_KINDS = ("malformed_json", "wrong_type", "missing_field", "oversize", "event_time")
#: the browser sessions events come from: drawn once, so an event picks one instead of drawing 15 letters
_SESSIONS = random.Random(7)
COOKIES = tuple("".join(_SESSIONS.choices(string.ascii_letters, k=15)) for _ in range(4096))
#: UUID version 4: the version nibble 4 and the variant bits 10
_V4_CLEAR, _V4_SET = ~((0xF << 76) | (0x3 << 62)), (0x4 << 76) | (0x2 << 62)
_ENCODER = msgspec.json.Encoder()


def click_event(rng: random.Random, now_ms: int | None = None, keys: KeySpace = SEED) -> dict:
    """One valid event; ``keys``: where ``uid`` and ``productId`` come from (``loadgen.key_space``)."""
    return {
        "eventId": f"{(rng.getrandbits(128) & _V4_CLEAR) | _V4_SET:032x}",
        "webpageId": rng.randint(10, 99),
        "uid": keys.member(rng),
        "productId": keys.product(rng),
        "cookieId": rng.choice(COOKIES),
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
    """Compact JSON (msgspec: a tenth of the standard library's time for an event)."""
    return _ENCODER.encode(event)
