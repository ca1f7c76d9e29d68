"""A failure at the demo's Trino step (its ending) still prints the measured summary, then the error and the fix.

The measured part of the demo (``run_demo``: minutes of Spark and Locust, covered by test_demo.py) is replaced
by its result here; the failure is real: the stack's Trino refused to start on a JDK older than 24.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from lab.bench.freshness import Freshness
from lab.demo import DemoSummary

JDK17 = Path("/usr/lib/jvm/java-17-openjdk-amd64")


@pytest.mark.skipif(not (JDK17 / "release").exists(), reason="needs Debian's OpenJDK 17 as the too-old JDK")
def test_the_summary_is_printed_before_the_trino_error(stack, monkeypatch, tmp_path):
    from cli.main import app

    monkeypatch.setenv("LAKEHOUSE_TRINO__JAVA_HOME", str(JDK17))
    measured = DemoSummary(1000, 1000, 990, 10, [Freshness("clicks", "the click table", 1.2, 2.3, 3.4, 990)],
                           tmp_path, [])
    monkeypatch.setattr("lab.demo.run_demo", lambda *args, **kwargs: measured)
    stack.stop_service("trino")  # the demo starts it on first use: here, on a JDK it refuses
    try:
        result = CliRunner().invoke(app, ["demo"], terminal_width=200)
    finally:
        stack.ensure("trino")  # as the suite had it (the stack's own settings: its JDK 24+)
    text = result.output
    assert result.exit_code == 1, text
    assert "Traceback" not in text
    summary_at, error_at = text.find("demo summary"), text.find("error at the demo's Trino step")
    assert 0 <= summary_at < error_at, text
    assert "p95 2.3 s over 990 rows, goal <= 5 s: met" in text, "the freshness verdicts come first"
    assert "Trino 476 needs Java 24 or newer" in text[error_at:], "what went wrong"
    assert "LAKEHOUSE_TRINO__JAVA_HOME" in text[error_at:] and "make demo KEEP=1" in text[error_at:], "what to do"
