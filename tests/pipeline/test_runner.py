"""Batch-failure logs name the real cause in one line (``pipeline.runner._describe``)."""

from pipeline.runner import _describe


class PythonException(Exception):
    """Shaped like PySpark's: the text opens with a blank line and a banner, the cause comes last."""


def test_worker_error_is_named_by_the_traceback_last_line():
    exc = PythonException("\n  An exception was thrown from the Python worker. Please see the stack trace below.\n"
                          "Traceback (most recent call last):\n  File \"fetch.py\", line 82, in read_range\n"
                          "TimeoutError: no records from clickevents[0] in 60s\n")
    assert _describe(exc) == "PythonException: TimeoutError: no records from clickevents[0] in 60s"


def test_plain_error_keeps_its_first_line():
    assert _describe(ValueError("bad offset\nmore detail")) == "ValueError: bad offset"


def test_blank_message_still_names_the_type():
    assert _describe(RuntimeError("")) == "RuntimeError: "
