"""The apply's key state between batches: each state partition's buckets in files on its executor's local disk.

A batch changes a few thousand of a table's millions of keys. So a partition's buckets stay
where the executor that built them keeps them, and a batch touches only what it changes:

- each key index's four arrays (``KeyIndex``: two hashes, file number, position; 24 bytes a
  key) are ``.npy`` files, memory-mapped by the task that applies a batch. Lookups read the
  pages the batch's keys fall in and updates write them in place; the kernel's page cache
  keeps the pages between batches for whichever Python worker of the executor runs the next
  task. An array that grows (new keys merged in) goes to a new file;
- the rest (live files, fold counts, fresh keys) is one small pickle, ``state.pkl``, written
  once a batch.

What Spark caches for the partition is only a ``Held`` (the directory and a version). Its
block keeps the next batch's task on this executor (Spark schedules a task where its cached
partition is), and says which version of the files the task must find. ``claim`` takes the
state for a batch and removes ``state.pkl`` while the arrays change in place; ``keep`` writes
the new version. So a task that finds no state, or another version — the executor restarted,
a batch failed after its tasks ran, a task died half-way — raises ``StateNotHere``, and the
apply builds the state again from the tables (``pipeline.cdc.apply``), as after any failed
batch. The files live in the application's per-executor scratch directory (Spark's
``SparkFiles`` root), which Spark removes when the executor ends.
"""

from __future__ import annotations

import os
import pickle
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.cdc.buckets import Bucket

#: the key index's arrays, by attribute name
ARRAYS = ("a", "b", "file", "pos")

State = dict[int, dict[str, Bucket]]  # one partition of the state: its buckets, each with one Bucket per table


class StateNotHere(RuntimeError):
    """A task did not find its partition's state, in the version its batch starts from, on this executor."""


@dataclass(frozen=True)
class Held:
    """What Spark caches for a state partition: where its files are, and which version they must be."""

    directory: str
    version: int
    buckets: tuple[int, ...]  # the bucket numbers the partition holds


def _state_root() -> Path:
    """Where an executor keeps files of its own: the first of the local folders Spark gives its Python workers
    (``SPARK_LOCAL_DIRS``, the block manager's scratch folder; on Kubernetes inside an emptyDir volume the pod's
    user can write, where the working directory is the image's), else the worker's SparkFiles root."""
    if local_dirs := os.environ.get("SPARK_LOCAL_DIRS"):
        return Path(local_dirs.split(",")[0])
    # deferred: a Python worker's own SparkFiles root (set by Spark when the worker starts)
    from pyspark import SparkFiles

    return Path(SparkFiles.getRootDirectory())


def scratch(generation: str, partition: int) -> Path:
    """Partition ``partition``'s directory on this executor, for the state built as ``generation``; the
    directories of earlier generations here are removed (their state was dropped)."""
    root = _state_root() / "cdc-state"
    root.mkdir(parents=True, exist_ok=True)
    for old in root.iterdir():
        if not old.name.startswith(f"{generation}-"):
            shutil.rmtree(old, ignore_errors=True)
    directory = root / f"{generation}-{partition}"
    directory.mkdir(exist_ok=True)
    return directory


def keep(state: State, directory: Path, version: int) -> Held:
    """Write ``state`` as ``version`` into ``directory``: arrays that are not yet files there become files, the rest
    one pickle; files of earlier versions no longer used go."""
    paths: dict[tuple[int, str, str], str] = {}
    detached: dict[tuple[int, str, str], np.ndarray] = {}
    for number, tables in state.items():
        for topic, bucket in tables.items():
            for name in ARRAYS:
                array = getattr(bucket.index, name)
                key = (number, topic, name)
                path = getattr(array, "filename", None)  # set only on a memory map of a file
                if path is None or Path(path).parent != directory.resolve():
                    path = str(directory / f"{number}-{len(paths)}-{name}-v{version}.npy")
                    np.save(path, array)
                paths[key] = path
                detached[key] = array
                setattr(bucket.index, name, None)
    try:
        blob = pickle.dumps((version, state, paths), protocol=pickle.HIGHEST_PROTOCOL)
    finally:
        for (number, topic, name), array in detached.items():
            setattr(state[number][topic].index, name, array)
    meta = directory / "state.pkl"
    (directory / "state.pkl.new").write_bytes(blob)
    (directory / "state.pkl.new").replace(meta)
    used = {Path(p).name for p in paths.values()}
    for file in directory.glob("*.npy"):
        if file.name not in used:
            file.unlink(missing_ok=True)  # a map still open on it keeps its pages until the map goes
    return Held(str(directory.resolve()), version, tuple(sorted(state)))


def claim(held: Held) -> State:
    """The partition's state as ``held`` says, its arrays memory-mapped for change in place. Until ``keep`` writes
    the next version no other task finds it (``StateNotHere``)."""
    meta = Path(held.directory) / "state.pkl"
    try:
        version, state, paths = pickle.loads(meta.read_bytes())
    except FileNotFoundError:
        raise StateNotHere(f"no key state at {held.directory} on this executor (it restarted, or a task died "
                           "while changing the state)") from None
    if version != held.version:
        raise StateNotHere(f"the key state at {held.directory} is version {version}, not {held.version} (a batch "
                           "failed after its tasks ran)")
    meta.unlink()
    for (number, topic, name), path in paths.items():
        setattr(state[number][topic].index, name, np.load(path, mmap_mode="r+"))
    return state
