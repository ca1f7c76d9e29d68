"""`make lint`'s docs check (lab/docs_check.py): a path a doc quotes, or a doc the code cites, must exist."""

from __future__ import annotations

from lab.docs_check import figures_in_code, problems

DOCS = "docs" + "/"  # spelled apart: this file is checked too, and names docs that exist only in tmp_path


def test_the_repository_passes_and_a_missing_path_or_cited_doc_is_named(tmp_path):
    assert problems() == []
    (tmp_path / "docs").mkdir()
    (tmp_path / "pipeline").mkdir()
    (tmp_path / "pipeline" / "real.py").write_text(f'"""see {DOCS}real.md and {DOCS}gone.md"""\n')
    (tmp_path / "docs" / "real.md").write_text(
        "`pipeline/real.py` `pipeline/real.thing` `pipeline/ghost.py` [a](real.md) [b](../pipeline/none.py) "
        "`results/bench-*` [web](https://example.org/x.md)\n")
    (tmp_path / "README.md").write_text(f"[doc]({DOCS}real.md)\n")
    assert sorted(problems(tmp_path)) == [f"{DOCS}real.md: ../pipeline/none.py", f"{DOCS}real.md: pipeline/ghost.py",
                                          f"pipeline/real.py: {DOCS}gone.md"]


def test_a_docstring_or_help_text_quoting_a_measurement_is_flagged_and_the_product_has_none(tmp_path):
    assert figures_in_code() == []
    (tmp_path / "pipeline").mkdir()
    (tmp_path / "pipeline" / "job.py").write_text(
        '"""Reads the batch once: one read fewer."""\n\n'
        'def fast():\n    """Cut the commit from 0.9 -> 0.4 s."""\n\n'
        'def rate():\n    """Keeps up at 10,000 events/s."""\n\n'
        'def plain():\n    """Waits 2 s between batches (the trigger)."""\n\n'
        'X = Field(1, description="measured on 2026-11-28")\n'
        'Y = option(help="the interval, in seconds")\n')
    flagged = figures_in_code(tmp_path)
    assert [line.split(":")[1] for line in flagged] == ["3", "6", "12"], flagged  # one line each
