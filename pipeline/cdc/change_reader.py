"""The CDC apply's reader process: change records read and parsed ahead, beside the apply.

``pipeline.kafka_source.reader_process`` with ``parse_changes`` as the transform: the child
fetches the change topics and decodes each batch's envelopes (op, key, binlog position; the
record's text kept) while the apply writes the batch before, and hands over rows of
``CHANGE_SCHEMA``. Opt-in (``pipeline.cdc_read_ahead_mb``): decoding was a fifth of the
apply's main thread in a 10 M-row snapshot (py-spy), yet with it done here the snapshot was
no faster on two cores (docs/cdc.md, "A reader process, measured"). A record the apply
cannot interpret fails the request that holds it, with the same ``EnvelopeError`` message.
"""

from __future__ import annotations

import functools
import json

from pipeline.cdc.changes import CHANGE_SCHEMA, parse_changes
from pipeline.kafka_source.reader_process import ReaderProcess, child_arguments, run_child


def change_reader(bootstrap: str, keys: dict[str, str], fetch_wait_ms: int, ahead_mb: int) -> ReaderProcess:
    """A reader process for the change topics of ``keys`` (topic -> the key column its envelopes name)."""
    return ReaderProcess(bootstrap, fetch_wait_ms, ahead_mb, module=__name__, extra=["--keys", json.dumps(keys)])


def main(argv: list[str] | None = None) -> None:
    parser = child_arguments("Read and decode change topics for the CDC apply (pipeline/cdc/change_reader.py).")
    parser.add_argument("--keys", required=True, help="JSON: topic -> the key column its envelopes name")
    args = parser.parse_args(argv)
    run_child(args, CHANGE_SCHEMA, functools.partial(parse_changes, keys=json.loads(args.keys)))


if __name__ == "__main__":
    main()
