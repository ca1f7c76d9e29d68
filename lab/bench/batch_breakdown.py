"""Where a click micro-batch's time goes, read from Spark's own event log of a benchmark run.

`lakehouse bench ingest --profile` runs the click job with Spark's event log on (plain JSON lines,
one event each: SQL executions, jobs, stages and every task's metrics). A batch is one SQL execution
appending to the click table; from its events this takes, per batch:

- ``query planning``: the execution's start to its job's submission (the driver analyses and plans
  the write: Catalyst, Iceberg's write set-up);
- ``waiting for a core``: the job's submission to its first task's launch (the FAIR scheduler, the
  slots other jobs hold);
- ``tasks``: the first task's launch to the last task's end, and per task its deserialisation, run
  and result-serialisation times, CPU and garbage collection;
- ``job end``: the last task's end to the job's end (results back on the driver);
- ``commit``: the job's end to the execution's end (Iceberg's commit of the files, in the driver);

and the Python share of each task's run from the job's own counters
(``lakehouse_pipeline_task_phase_seconds``: fetch, parse, enrich, hand-over to the JVM), so what is
left of a task's run is the JVM's (rows from Arrow, Parquet, the upload).
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Execution:
    """One SQL execution and what its jobs and tasks reported (times in epoch ms)."""

    started: int
    ended: int = 0
    plan: str = ""
    jobs: dict[int, list[int]] = field(default_factory=dict)  # job id -> [submitted, completed]
    stages: set[int] = field(default_factory=set)
    tasks: list[dict] = field(default_factory=list)  # the TaskEnd events of its stages


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def executions(log: Path) -> dict[int, Execution]:
    """Every SQL execution of the event log with its jobs and tasks."""
    found: dict[int, Execution] = {}
    stage_execution: dict[int, int] = {}
    job_execution: dict[int, int] = {}
    tasks: list[dict] = []
    with log.open() as lines:
        for line in lines:
            event = json.loads(line)
            kind = _short(event.get("Event", ""))
            if kind == "SparkListenerSQLExecutionStart":
                found[event["executionId"]] = Execution(event["time"], plan=event.get("physicalPlanDescription", ""))
            elif kind == "SparkListenerSQLExecutionEnd" and event["executionId"] in found:
                found[event["executionId"]].ended = event["time"]
            elif kind == "SparkListenerJobStart":
                sql = (event.get("Properties") or {}).get("spark.sql.execution.id")
                if sql is not None and int(sql) in found:
                    execution = found[int(sql)]
                    execution.jobs[event["Job ID"]] = [event["Submission Time"], 0]
                    job_execution[event["Job ID"]] = int(sql)
                    for stage in event.get("Stage IDs", []):
                        stage_execution[stage] = int(sql)
                        execution.stages.add(stage)
            elif kind == "SparkListenerJobEnd" and event["Job ID"] in job_execution:
                found[job_execution[event["Job ID"]]].jobs[event["Job ID"]][1] = event["Completion Time"]
            elif kind == "SparkListenerTaskEnd":
                tasks.append(event)
    for task in tasks:
        execution_id = stage_execution.get(task["Stage ID"])
        if execution_id is not None:
            found[execution_id].tasks.append(task)
    return found


@dataclass
class BatchPhases:
    """One batch's phases in seconds (``PHASES`` order) and its tasks' totals."""

    phases: dict[str, float]
    tasks: int
    task_run_s: float  # summed over the tasks
    task_cpu_s: float
    task_gc_s: float
    task_deserialize_s: float
    records: int


PHASES = ("query planning", "waiting for a core", "tasks (first launch to last end)", "job end", "commit",
          "whole execution")


def batch_phases(execution: Execution) -> BatchPhases | None:
    """The phases of one append execution, or None if it ran no task (or never ended)."""
    if not execution.tasks or not execution.jobs or not execution.ended:
        return None
    submitted = min(j[0] for j in execution.jobs.values())
    completed = max(j[1] for j in execution.jobs.values())
    infos = [t["Task Info"] for t in execution.tasks]
    metrics = [t.get("Task Metrics") or {} for t in execution.tasks]
    launched = min(i["Launch Time"] for i in infos)
    finished = max(i["Finish Time"] for i in infos)
    phases = {
        "query planning": submitted - execution.started,
        "waiting for a core": launched - submitted,
        "tasks (first launch to last end)": finished - launched,
        "job end": completed - finished,
        "commit": execution.ended - completed,
        "whole execution": execution.ended - execution.started,
    }
    return BatchPhases(
        {k: v / 1000 for k, v in phases.items()}, len(infos),
        sum(m.get("Executor Run Time", 0) for m in metrics) / 1000,
        sum(m.get("Executor CPU Time", 0) for m in metrics) / 1e9,
        sum(m.get("JVM GC Time", 0) for m in metrics) / 1000,
        sum(m.get("Executor Deserialize Time", 0) for m in metrics) / 1000,
        sum((m.get("Output Metrics") or {}).get("Records Written", 0) for m in metrics))


def appends_to(log: Path, table: str, since_ms: int) -> list[BatchPhases]:
    """The phases of every execution that appended to ``table`` and began at or after ``since_ms``, in order."""
    out = []
    for _, execution in sorted(executions(log).items()):
        if execution.started >= since_ms and "AppendData" in execution.plan and table in execution.plan:
            phases = batch_phases(execution)
            if phases is not None:
                out.append(phases)
    return out


def event_log_conf(folder: Path) -> dict[str, str]:
    """Spark settings that write the application's event log into ``folder`` as one plain JSON-lines file
    (Spark 4 rolls it into a folder of compressed parts by default)."""
    return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": folder.as_uri(),
            "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false"}


def event_log_file(folder: Path) -> Path:
    """The one application's event log Spark wrote into ``folder``."""
    logs = [p for p in folder.iterdir() if p.is_file() and not p.name.endswith(".inprogress")]
    if len(logs) != 1:
        raise FileNotFoundError(f"expected one finished Spark event log in {folder}, found {[p.name for p in logs]}")
    return logs[0]


@dataclass
class Breakdown:
    """Median and p95 of each phase over the batches, the tasks' totals per batch, the Python phases' mean."""

    batches: int
    phases: dict[str, tuple[float, float]]  # phase -> (median s, p95 s)
    per_batch: dict[str, float]  # medians of the tasks' totals per batch
    python_per_batch: dict[str, float]  # mean seconds per batch of each Python phase, summed over its tasks


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1] if len(values) > 1 else values[0]


def breakdown(batches: list[BatchPhases], python_seconds: dict[str, float], batch_count: int) -> Breakdown:
    """``python_seconds``: the job's task-phase counters over the run; ``batch_count``: its committed batches."""
    if not batches:
        raise ValueError("no append to the click table in the event log's measured window")
    by_phase: dict[str, list[float]] = defaultdict(list)
    for batch in batches:
        for phase, seconds in batch.phases.items():
            by_phase[phase].append(seconds)
    phases = {phase: (statistics.median(by_phase[phase]), _p95(by_phase[phase])) for phase in PHASES}
    per_batch = {
        "tasks": statistics.median(b.tasks for b in batches),
        "task run, summed (s)": statistics.median(b.task_run_s for b in batches),
        "task JVM CPU, summed (s)": statistics.median(b.task_cpu_s for b in batches),
        "task deserialisation, summed (s)": statistics.median(b.task_deserialize_s for b in batches),
        "task GC, summed (s)": statistics.median(b.task_gc_s for b in batches),
        "rows written": statistics.median(b.records for b in batches),
    }
    python = {phase: seconds / batch_count for phase, seconds in python_seconds.items()} if batch_count else {}
    return Breakdown(len(batches), phases, per_batch, python)
