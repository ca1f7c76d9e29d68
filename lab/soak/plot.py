"""soak.png: the soak's samples as six panels, read top to bottom.

The table's shape (files, snapshots), what a reader pays for it (query time), what the
writer delivers (freshness, with maintenance's seconds as bars behind it) and who had the
two cores meanwhile (writer, maintenance, broker in cores per window; the click batch
time and its phases): a freshness change is meant to be traced to its cause on the same page.

``lakehouse bench soak-plot results/soak-…/soak.csv`` redraws a run's plot from its
samples (after a change here, or for docs/).
"""

from __future__ import annotations

from pathlib import Path

from lab.soak.samples import MAX_FILES_PER_PARTITION, Sample


def _window_cores(samples: list[Sample], attribute: str) -> list[float]:
    """CPU seconds per window divided by the window's length: cores in use on average."""
    cores, previous = [], 0.0
    for x in samples:
        length = x.elapsed_s - previous
        cores.append(getattr(x, attribute) / length if length > 0 else 0.0)
        previous = x.elapsed_s
    return cores


def plot_soak(samples: list[Sample], maintenance: bool, path: Path) -> None:
    # deferred: matplotlib (~0.5 s) only when a plot is drawn
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [x.elapsed_s / 60 for x in samples]
    panels = [
        ("Live data files, fullest day-partition", "files", {"": [x.data_files_max_partition for x in samples]}),
        ("Snapshots retained, and the metadata file listing them", "snapshots / KiB",
         {"snapshots": [x.snapshots for x in samples],
          "metadata file (KiB)": [round(x.metadata_bytes / 1024) for x in samples]}),
        ("Soak queries on DuckDB (median of the three)", "ms",
         {"wall": [x.query_ms for x in samples], "reader CPU (the goal)": [x.query_cpu_ms for x in samples]}),
        ("Freshness p95 per window", "seconds", {"": [x.freshness_p95_s for x in samples]}),
        ("CPU per window (2 cores on the reference machine)", "cores",
         {"writer (Spark JVM)": _window_cores(samples, "writer_cpu_s"),
          "maintenance": _window_cores(samples, "maintenance_cpu_s"),
          "broker": _window_cores(samples, "broker_cpu_s")}),
        ("Click micro-batch and its phases, mean per window", "seconds",
         {"batch": [x.batch_s_mean for x in samples], "plan": [x.plan_s_mean for x in samples],
          "write (fetch, parse, enrich, files, commit)": [x.write_s_mean for x in samples],
          "dead letters": [x.dead_letters_s_mean for x in samples]}),
    ]
    fig, axes = plt.subplots(3, 2, figsize=(12, 10), constrained_layout=True)
    for ax, (title, unit, lines) in zip(axes.flat, panels, strict=True):
        for label, values in lines.items():
            if label and not any(values):
                continue  # not measured (a CSV from before the column existed)
            ax.plot(minutes, values, marker="o", label=label or None)
        if len(lines) > 1 and ax.get_legend_handles_labels()[0]:
            ax.legend()
        ax.set_title(title)
        ax.set_xlabel("minutes into the soak")
        ax.set_ylabel(unit)
        ax.grid(alpha=0.3)
    axes.flat[0].axhline(MAX_FILES_PER_PARTITION, color="red", linestyle="--", label="goal")
    axes.flat[0].legend()
    if maintenance:
        _maintenance_bars(axes.flat[3].twinx(), minutes, samples)
    fig.suptitle("Soak under steady load, maintenance on" if maintenance
                 else "Soak under steady load, no maintenance (the baseline)")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _maintenance_bars(ax, minutes: list[float], samples: list[Sample]) -> None:
    """What maintenance took in each window, behind the freshness it may cost."""
    width = (minutes[1] - minutes[0]) * 0.6 if len(minutes) > 1 else 0.5
    compact, expire = [x.compact_s for x in samples], [x.expire_s for x in samples]
    ax.bar(minutes, compact, width=width, alpha=0.25, color="tab:orange", label="compact")
    ax.bar(minutes, expire, width=width, bottom=compact, alpha=0.25, color="tab:red", label="expire")
    ax.bar(minutes, [x.other_maintenance_s for x in samples], width=width,
           bottom=[c + e for c, e in zip(compact, expire, strict=True)], alpha=0.25, color="tab:gray", label="other")
    ax.set_ylabel("maintenance seconds in the window")
    ax.legend(loc="upper right")
