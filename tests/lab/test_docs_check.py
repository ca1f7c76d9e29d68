"""`make lint`'s docs check (lab/docs_check.py): a path a doc quotes, or a doc the code cites, must exist."""

from __future__ import annotations

from lab.docs_check import problems

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
