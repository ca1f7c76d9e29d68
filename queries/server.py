"""`python -m queries.server`: the local stack's SQL service, a warm DuckDB behind a loopback port.

In the cluster Trino is a server and its CLI a thin client, so a question costs what the
query costs. A `lakehouse query` of its own would be a new process that pays for its Python
imports, DuckDB's extensions and its catalog connections, many times what a count costs
(docs/sql.md). The stack runs this service the way the cluster runs Trino: the engine, its
extensions and its catalog connections stay warm, and `lakehouse query` / `lakehouse sql`
send statements to it when it answers (``queries.client``), or run them in-process when it
does not. Every statement still resolves its tables against the metastore when it runs,
so it sees the newest commit.

Protocol (HTTP on ``settings.query``): ``POST /v1/statement`` with ``{"sql", "schema"}``
answers the rows as an Arrow IPC stream, or with ``"render": "table" | "csv" | "json"`` as
``queries.output.Rendered`` JSON (what the one-shot CLI prints: it then needs no Arrow of
its own); the message, seconds and the session's schema after the statement come in
headers. A statement that cannot run answers 400 with ``{"error"}``. ``GET /v1/info`` is
the readiness probe.
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow as pa

from lakehouse.settings import Settings, load_settings
from queries.engines import open_session
from queries.errors import EngineGap
from queries.output import FORMATS, render

log = logging.getLogger(__name__)

ARROW_STREAM = "application/vnd.apache.arrow.stream"


class QueryService:
    """One warm DuckDB engine; statements run one at a time (a DuckDB connection is not shared)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.session = open_session("duckdb", settings, service=False)
        self.lock = threading.Lock()

    def execute(self, sql: str, schema: str | None):
        with self.lock:
            self.session.schema = schema
            return self.session.execute(sql)


def _handler(service: QueryService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format, *args):  # noqa: A002 - the base class's name
            log.debug("%s " + format, self.address_string(), *args)

        def _reply(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):  # noqa: N802 - http.server's name
            if self.path == "/v1/info":
                self._reply(200, json.dumps({"engine": "duckdb"}).encode(), "application/json")
            else:
                self._reply(404, b"{}", "application/json")

        def do_POST(self):  # noqa: N802 - http.server's name
            if self.path != "/v1/statement":
                self._reply(404, b"{}", "application/json")
                return
            try:
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                outcome = service.execute(str(request["sql"]), request.get("schema"))
            except (EngineGap, KeyError, ValueError) as exc:
                message = str(exc.args[0]) if exc.args else str(exc)
                self._reply(400, json.dumps({"error": message}).encode(), "application/json")
                return
            except Exception as exc:  # noqa: BLE001 - the service stays up; the client sees what failed
                log.exception("statement failed")
                self._reply(500, json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode(), "application/json")
                return
            body, content_type = b"", ARROW_STREAM
            if outcome.table is not None and request.get("render") in FORMATS:
                body = json.dumps(render(outcome.table, request["render"]).as_dict()).encode()
                content_type = "application/json"
            elif outcome.table is not None:
                sink = pa.BufferOutputStream()
                with pa.ipc.new_stream(sink, outcome.table.schema) as writer:
                    writer.write_table(outcome.table)
                body = sink.getvalue().to_pybytes()
            self._reply(200, body, content_type, {
                "X-Lakehouse-Message": outcome.message, "X-Lakehouse-Seconds": f"{outcome.seconds:.6f}",
                "X-Lakehouse-Schema": outcome.schema or ""})

    return Handler


def serve(settings: Settings) -> None:
    service = QueryService(settings)
    server = ThreadingHTTPServer((settings.query.host, settings.query.port), _handler(service))
    log.info("SQL service on %s", settings.query.address)
    server.serve_forever()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    serve(load_settings())
