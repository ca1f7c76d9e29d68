"""Where clicks' uid and productId come from (loadgen/key_space.py): the seed's keys by default, the
loaded dimensions' key spaces on request, with the seed's share of unknown keys and hot products."""

from __future__ import annotations

import collections
import random

import pytest

from loadgen.events import click_event
from loadgen.key_space import SEED_MEMBER_IDS, KeySpace, member_key, product_key


def test_by_default_events_name_the_seeds_members_and_products():
    events = [click_event(random.Random(i)) for i in range(2000)]
    known = sum(e["uid"] in SEED_MEMBER_IDS for e in events) / len(events)
    assert 0.85 < known < 0.95  # 10 % unknown members, as the seed's generator
    assert {e["productId"] for e in events} == {str(i) for i in range(20)}


def test_loaded_key_spaces_are_drawn_with_a_tenth_unknown():
    keys = KeySpace.parse("members=1000,products=50")
    rng = random.Random(3)
    events = [click_event(rng, keys=keys) for _ in range(5000)]
    members = {member_key(i) for i in range(1000)}
    products = {product_key(i) for i in range(50)}
    assert 0.87 < sum(e["uid"] in members for e in events) / 5000 < 0.93
    assert 0.87 < sum(e["productId"] in products for e in events) / 5000 < 0.93
    assert len({e["productId"] for e in events} & products) == 50  # uniform: every product drawn


def test_skew_puts_the_traffic_on_a_few_hot_products():
    rng = random.Random(5)
    keys = KeySpace(products=10_000, product_skew=1.1, unknown_share=0.0)
    counts = collections.Counter(keys.product(rng) for _ in range(20_000))
    top10 = sum(n for _, n in counts.most_common(10)) / 20_000
    assert counts.most_common(1)[0][0] == product_key(0) and top10 > 0.35
    flat = collections.Counter(KeySpace(products=10_000, unknown_share=0.0).product(rng) for _ in range(20_000))
    assert sum(n for _, n in flat.most_common(10)) / 20_000 < 0.01


@pytest.mark.parametrize("text", ["members=x", "colour=3", "skew=9", "unknown=2", "members"])
def test_a_wrong_key_space_says_what_is_wrong(text):
    with pytest.raises(ValueError):
        KeySpace.parse(text)
