"""The thin side of the local SQL service (``queries.server``): statements over loopback HTTP.

It imports no SQL engine, parser or catalog library, which is what makes a one-shot
`lakehouse query` cost the query and not the start-up. Same interface as
``queries.session.SqlSession``: ``execute(statement) -> Outcome``, ``schema``, ``engine_name``.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from collections.abc import Callable

from queries.errors import EngineGap, Outcome
from queries.output import Rendered

ARROW_STREAM = "application/vnd.apache.arrow.stream"


def service_answers(host: str, port: int, timeout_s: float = 0.2) -> bool:
    """True if something accepts connections on the service's port (a refused connect is cheap)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


class RemoteSession:
    engine_name = "duckdb"

    def __init__(self, host: str, port: int, schema: str | None = None, timeout_s: float = 600.0,
                 render_placeholders: Callable[[str], str] = lambda sql: sql):
        """``render_placeholders``: the library's ``{role}`` names, rendered here with this process's
        settings (the service's settings may name other tables)."""
        self.url, self.schema, self.timeout_s = f"http://{host}:{port}/v1/statement", schema, timeout_s
        self.render_placeholders = render_placeholders

    def execute(self, statement: str) -> Outcome:
        """The statement's rows as Arrow (for the shell and for code)."""
        # deferred: pyarrow only for answers that arrive as Arrow: the shell starts without it
        import pyarrow as pa

        payload, headers = self._post({"sql": self.render_placeholders(statement), "schema": self.schema})
        table = pa.ipc.open_stream(payload).read_all() if payload else None
        return self._outcome(statement, table, headers)

    def execute_rendered(self, statement: str, fmt: str) -> tuple[Rendered | None, Outcome]:
        """The statement's rows rendered as ``fmt`` by the service (a one-shot command prints them as they are)."""
        payload, headers = self._post({"sql": self.render_placeholders(statement), "schema": self.schema,
                                       "render": fmt})
        if payload and headers.get("Content-Type") != "application/json":
            raise EngineGap(f"the SQL service at {self.url} did not render the result: it runs older code than this "
                            "command; restart it with `lakehouse stack down` and `lakehouse stack up`")
        rendered = Rendered.from_dict(json.loads(payload)) if payload else None
        return rendered, self._outcome(statement, None, headers)

    def _post(self, request_body: dict):
        body = json.dumps(request_body).encode()
        request = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return response.read(), response.headers
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read())["error"]
            except (ValueError, KeyError):
                message = f"the SQL service answered {exc.code}"
            raise EngineGap(message) from None
        except OSError as exc:
            raise EngineGap(f"the local SQL service at {self.url} stopped answering ({exc}); `lakehouse stack "
                            "status` shows it, `lakehouse stack up` starts it") from None

    def _outcome(self, statement: str, table, headers) -> Outcome:
        self.schema = headers.get("X-Lakehouse-Schema") or None
        return Outcome(statement, table, headers.get("X-Lakehouse-Message", ""),
                       float(headers.get("X-Lakehouse-Seconds", "0")), self.schema)
