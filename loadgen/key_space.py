"""Where a click's ``uid`` and ``productId`` come from: the seed's few keys, or the loaded dimensions.

By default events draw from the seed's world (5 members, product ids 0-19 of which 1-9 exist),
so the demo and the seed-size benchmarks see what they always saw. Against dimensions loaded
with ``lakehouse load dims`` (``loadgen.dimensions``) a ``KeySpace`` draws from the loaded keys
instead, keeping the seed's share of unknown members (10 %) — and the same share of unknown
products — and, with ``product_skew``, a few hot products as real traffic has: product i is
drawn with weight 1 / (i + 1) ** skew (Zipf; 0 is uniform, about 1 puts a tenth of the traffic
on the hottest product of a million).

Written ``members=10000000,products=1000000,skew=1.1[,unknown=0.1]`` on command lines.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import random
from dataclasses import dataclass

SEED_MEMBER_IDS = ("513248", "10952", "555655", "795098", "603670")
#: the generated rows' keys: numeric strings like the seed's, in ranges the seed does not use
MEMBER_BASE = 10_000_000
PRODUCT_BASE = 100_000


def member_key(i: int) -> str:
    """The i-th generated member's ``userid`` (0-based; ``lakehouse load dims`` loads them)."""
    return str(MEMBER_BASE + i)


def product_key(i: int) -> str:
    """The i-th generated product's ``productId`` (0-based)."""
    return str(PRODUCT_BASE + i)


@functools.lru_cache(maxsize=4)
def _zipf_cdf(n: int, skew: float) -> list[float]:
    """Cumulative weights 1 / (i + 1) ** skew for i < n (a million floats: built once per process)."""
    return list(itertools.accumulate(1.0 / (i + 1) ** skew for i in range(n)))


@dataclass(frozen=True)
class KeySpace:
    members: int = 0  # generated members to draw from (0: the seed's five)
    products: int = 0  # generated products to draw from (0: the seed's ids 0-19)
    unknown_share: float = 0.1  # share of keys drawn outside what the dimension holds
    product_skew: float = 0.0  # Zipf exponent over the products (0: uniform)

    def __post_init__(self) -> None:
        if self.members < 0 or self.products < 0:
            raise ValueError("members and products are counts: 0 or more")
        if not 0 <= self.unknown_share <= 1:
            raise ValueError(f"unknown={self.unknown_share}: a share between 0 and 1")
        if not 0 <= self.product_skew <= 5:
            raise ValueError(f"skew={self.product_skew}: a Zipf exponent between 0 (uniform) and 5")

    @classmethod
    def parse(cls, text: str) -> KeySpace:
        """``members=N,products=M,skew=S,unknown=U`` (any subset; empty: the seed's keys)."""
        names = {"members": "members", "products": "products", "skew": "product_skew", "unknown": "unknown_share"}
        values: dict[str, float] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, _, value = part.partition("=")
            if name not in names or not value:
                raise ValueError(f"{part!r}: expected one of {', '.join(f'{n}=…' for n in names)}")
            try:
                values[names[name]] = float(value)
            except ValueError:
                raise ValueError(f"{part!r}: {value!r} is not a number") from None
        return cls(members=int(values.get("members", 0)), products=int(values.get("products", 0)),
                   unknown_share=values.get("unknown_share", 0.1), product_skew=values.get("product_skew", 0.0))

    def member(self, rng: random.Random) -> str:
        if rng.random() < self.unknown_share:
            return str(rng.randint(100000, 999999))  # never a loaded key (those start at 10,000,000)
        return member_key(rng.randrange(self.members)) if self.members else rng.choice(SEED_MEMBER_IDS)

    def product(self, rng: random.Random) -> str:
        if not self.products:
            return str(rng.randint(0, 19))
        if rng.random() < self.unknown_share:
            return product_key(self.products + rng.randrange(self.products))  # past the loaded range
        if not self.product_skew:
            return product_key(rng.randrange(self.products))
        cdf = _zipf_cdf(self.products, self.product_skew)
        return product_key(min(bisect.bisect(cdf, rng.random() * cdf[-1]), self.products - 1))


SEED = KeySpace()
