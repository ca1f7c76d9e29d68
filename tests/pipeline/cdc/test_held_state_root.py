"""Where an executor keeps the apply's key state (no Spark needed)."""

from __future__ import annotations

from pipeline.cdc import held_state


def test_an_executor_keeps_its_state_in_sparks_local_directory_when_spark_names_one(monkeypatch, tmp_path):
    """Found by running the cluster: the executors' working directory is the image's (/opt/lakehouse, root's),
    so the state's folder could not be made there; on Kubernetes Spark names a local directory (an emptyDir)."""
    monkeypatch.setenv("SPARK_LOCAL_DIRS", f"{tmp_path / 'a'},{tmp_path / 'b'}")
    assert held_state._state_root() == tmp_path / "a"
    state = held_state.scratch("g1", 0)
    assert state == tmp_path / "a" / "cdc-state" / "g1-0" and state.is_dir()
