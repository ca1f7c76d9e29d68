"""Independent commits of one micro-batch, side by side.

A batch that commits to two tables (the dimension apply: products and members; the live
aggregates: two result tables) spent the sum of two MERGEs, each mostly waiting on the
metastore, the object store and Spark's job start-up (5 s each with the whole system on
two cores, `lakehouse bench system`). Run side by side it spends the longer of the two.
Each call runs in a thread of its own that inherits the caller's FAIR pool.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


def in_parallel(spark, calls: list[Callable[[], object]]) -> list[object]:
    """Run ``calls`` at once; their results in order, or the first error after all have finished."""
    if len(calls) <= 1:
        return [call() for call in calls]
    pool = spark.sparkContext.getLocalProperty("spark.scheduler.pool")
    results: list[object] = [None] * len(calls)
    errors: list[BaseException] = []

    def run(i: int, call: Callable[[], object]) -> None:
        if pool is not None:
            spark.sparkContext.setLocalProperty("spark.scheduler.pool", pool)
        try:
            results[i] = call()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i, call), daemon=True) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results
