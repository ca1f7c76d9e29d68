"""An ``AheadReader`` in a child process: Kafka records read beside the work done on them.

Why a process: reading records is Python work under the interpreter lock (taking them from
librdkafka, building Arrow columns), and so is much of what the CDC apply does with them;
in one process the two take turns. The child reads the next batch while the parent writes
this one, and hands the records over as Arrow IPC through a pipe: no pickling, the bytes
copied once. Opt-in (``pipeline.cdc_read_ahead_mb``): on two cores shared with the capture,
MariaDB and Kafka it did not make the apply faster and cost ~170 MB (docs/cdc.md).

The exchange, one request at a time: the parent writes a JSON line (the ranges); the child
answers with an Arrow IPC stream of their records (``RAW_SCHEMA``, or the rows its
transform makes of them: ``pipeline.cdc.change_reader``) and a JSON status line
(``{"ok": true}``, or ``{"error": "...", "fatal": ...}``: a ``FatalError`` in the child, such as
a record the apply cannot interpret, is one in the parent too). The child stops when its input closes, so a parent
killed with -9 takes it along. A parent that stops reading mid-answer, or a child that dies,
ends the exchange: the child is stopped, and the next read starts a new one.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import select
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import BinaryIO

import pyarrow as pa

from lakehouse.errors import FatalError
from pipeline.kafka_source.ahead_reader import AheadReader
from pipeline.kafka_source.fetch import RAW_SCHEMA, RangeReadError
from pipeline.kafka_source.ranges import OffsetRange
from pipeline.native_memory import give_back_freed, keep_resident_small

log = logging.getLogger(__name__)


class ReadFailed(FatalError):
    """The reader process met what no retry fixes (its message says what and where)."""


class ReaderProcess:
    """The parent's handle on a child reading Kafka ranges ahead (module docstring); one caller at a time.

    ``module``: the child's program, this module's ``main`` (raw records) or another built on ``serve``;
    ``extra``: its further arguments.
    """

    def __init__(self, bootstrap: str, fetch_wait_ms: int = 100, ahead_mb: int = 32, timeout_s: float = 60.0,
                 module: str = __name__, extra: Sequence[str] = ()):
        self.args = [module, "--bootstrap", bootstrap, "--fetch-wait-ms", str(fetch_wait_ms), "--ahead-mb",
                     str(ahead_mb), "--timeout-s", str(timeout_s), *extra]
        self._proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def read(self, ranges: Sequence[OffsetRange]) -> Iterator[pa.RecordBatch]:
        """The records at each range's offsets [start, end), as ``fetch.read_range`` gives them (key and timestamp
        null: the apply reads values only)."""
        request = [[r.topic, r.partition, r.start, r.end] for r in ranges if r.end > r.start]
        if not request:
            return
        proc = self._proc or self._start()
        assert proc.stdin is not None and proc.stdout is not None
        answered = False
        try:
            proc.stdin.write(json.dumps(request).encode() + b"\n")
            proc.stdin.flush()
            yield from pa.ipc.open_stream(proc.stdout)
            status = json.loads(proc.stdout.readline() or b"null")
            if not isinstance(status, dict):
                raise ValueError("no status after the records")
            answered = True
        except (OSError, ValueError, pa.ArrowException) as exc:  # ArrowInvalid is a ValueError too
            raise RangeReadError(f"the Kafka reader process (pid {proc.pid}) stopped answering ({exc}); "
                                 f"exit status {proc.poll()}, its log is above. A new one is started for the next "
                                 "batch") from None
        finally:
            if not answered:  # an answer read in part leaves the rest in the pipe: start afresh next time
                self.close()
        if "error" in status:
            raise (ReadFailed if status.get("fatal") else RangeReadError)(status["error"])

    def _start(self) -> subprocess.Popen:
        self._proc = subprocess.Popen([sys.executable, "-m", *self.args], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE)
        return self._proc

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def serve(reader: AheadReader, requests: int, answers: BinaryIO, schema: pa.Schema = RAW_SCHEMA) -> None:
    """The child's loop: answer each request line; read ahead while none waits; return when the input closes."""
    pending = b""
    while True:
        ready, _, _ = select.select([requests], [], [], 0 if reader.can_read_ahead() else None)
        if not ready:
            reader.read_ahead()
            continue
        chunk = os.read(requests, 1 << 16)
        if not chunk:
            return
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            answer(reader, [OffsetRange(t, p, s, e) for t, p, s, e in json.loads(line)], answers, schema)


def answer(reader: AheadReader, ranges: list[OffsetRange], out: BinaryIO, schema: pa.Schema = RAW_SCHEMA) -> None:
    """One request's records as an IPC stream, then its status line."""
    status: dict = {"ok": True}
    with pa.ipc.new_stream(out, schema) as stream:
        try:
            for batch in reader.read(ranges):
                stream.write_batch(batch)
        except Exception as exc:  # noqa: BLE001 - said to the parent, which raises it; the reader starts afresh
            said = str(exc) if isinstance(exc, (RangeReadError, FatalError)) else f"{type(exc).__name__}: {exc}"
            status = {"error": said, "fatal": isinstance(exc, FatalError)}
            reader.reset()
    out.write(json.dumps(status).encode() + b"\n")
    out.flush()
    give_back_freed()  # what the request's batches held, handed back before the next is read ahead


def child_arguments(description: str) -> argparse.ArgumentParser:
    """The arguments every reader process takes (``ReaderProcess`` passes them)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--fetch-wait-ms", type=int, default=100)
    parser.add_argument("--ahead-mb", type=int, default=32)
    parser.add_argument("--timeout-s", type=float, default=60.0)
    return parser


def run_child(args: argparse.Namespace, schema: pa.Schema = RAW_SCHEMA,
              transform: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None) -> None:
    """A reader process's life: serve its parent until the parent's end of the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches the parent, which closes our input
    keep_resident_small()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s reader: %(message)s")
    reader = AheadReader(args.bootstrap, args.fetch_wait_ms, args.ahead_mb << 20, timeout_s=args.timeout_s,
                         transform=transform)
    try:
        serve(reader, sys.stdin.fileno(), sys.stdout.buffer, schema)
    except BrokenPipeError:  # the parent went away mid-answer
        pass
    finally:
        reader.close()


def main(argv: list[str] | None = None) -> None:
    run_child(child_arguments("Read Kafka ranges for a parent process (reader_process.py).").parse_args(argv))


if __name__ == "__main__":
    main()
