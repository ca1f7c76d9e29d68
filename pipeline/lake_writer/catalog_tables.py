"""Tables through PyIceberg's public API: declared, read for the position a writer recorded, committed again.

Creating a table idempotently with its declared properties, reading a property the newest
snapshot of the current lineage recorded, and the retry of a commit that lost a race with
another writer (maintenance rewriting the table).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterator

from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    TableAlreadyExistsError,
    ValidationException,
)
from pyiceberg.schema import Schema
from pyiceberg.table import TableProperties
from pyiceberg.table.snapshots import ancestors_of
from tenacity import AttemptManager, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from pipeline.lake_writer.pyiceberg_internals import CachedTransaction

log = logging.getLogger(__name__)

# A batch of inserts deletes keys no file holds yet, an overwrite empties an empty table: the normal case, not news.
warnings.filterwarnings("ignore", message="Delete operation did not match any records")

#: attempts of a commit that lost a race with another writer (maintenance rewriting the table)
COMMIT_ATTEMPTS = 6


def ensure_table(catalog, name: str, schema: Schema, properties: dict[str, str], **layout) -> None:
    """Create ``name`` if missing; give an existing one the properties declared since it was made.

    ``layout``: PyIceberg's ``partition_spec`` and ``sort_order``, for a new table.
    """
    try:
        catalog.create_namespace(name.split(".")[0])
    except NamespaceAlreadyExistsError:
        pass
    try:
        catalog.create_table(name, schema, properties=properties, **layout)
        log.info("created %s", name)
        return
    except TableAlreadyExistsError:
        pass
    table = catalog.load_table(name)
    missing = {k: v for k, v in properties.items() if k != TableProperties.FORMAT_VERSION and table.properties.get(k) != v}
    if missing:
        with table.transaction() as tx:
            tx.set_properties(missing)


def newest_summary_with(table, key: str) -> dict[str, str]:
    """The summary of the newest snapshot in the current lineage that recorded ``key``; {} if none.

    Maintenance's commits (compaction, manifest rewrites) record no writer properties, so the
    newest snapshot is not always the one to read.
    """
    current = table.current_snapshot()
    for snapshot in ancestors_of(current, table.metadata) if current else ():
        summary = snapshot.summary.additional_properties if snapshot.summary else {}
        if key in summary:
            return summary
    return {}


def commit_attempts() -> Iterator[AttemptManager]:
    """``for attempt in commit_attempts(): with attempt: ...`` retries a commit another writer beat.

    Also PyIceberg's ``ValidationException``: its own retry raises it when the snapshot the commit
    started from was expired meanwhile (maintenance), which a fresh start from the new head fixes.
    """
    return iter(Retrying(retry=retry_if_exception_type((CommitFailedException, ValidationException)), reraise=True,
                         stop=stop_after_attempt(COMMIT_ATTEMPTS), wait=wait_exponential(multiplier=0.2, max=5)))


def commit_once(catalog, table, stage: Callable, landed: Callable, what: str):
    """Commit what ``stage(tx)`` puts in a transaction on ``table``, exactly once; returns the table as committed.

    A try that lost a race with another writer is retried (``commit_attempts``) from the table loaded again,
    and only if the try before did not land after all (``landed(table)``: the writer's position is the
    table's): a commit whose answer was lost must not be made twice.
    """
    for attempt in commit_attempts():
        with attempt:
            if attempt.retry_state.attempt_number > 1:
                table = catalog.load_table(table.name())
                if landed(table):
                    log.warning("%s: the commit that failed had landed (its position is the table's)", what)
                    return table
            with CachedTransaction(table) as tx:
                stage(tx)
    return table
