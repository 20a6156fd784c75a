"""How ``gpuportal show`` prints a job's values that are not plain text: an array's task groups, a
het job's components, the GPU figures, and any other object or list (:func:`~gpuportal.output.readable`).
A long list of task ids or of GPUs is cut short, saying how many there are and where to see them all."""

from __future__ import annotations

from typing import Any

from .args import local_time
from .output import one_line, readable

#: The most characters of one task group's ids ``show`` prints (a sweep's scattered ids run to kilobytes).
IDS_SHOWN = 60
#: The most GPUs ``show`` prints a line for.
GPUS_SHOWN = 16


def shown(key: str, value: Any, ref: str) -> Any:
    """A value of job ``ref``'s document (``key``), readable for :func:`~gpuportal.output.key_values`
    (``lines=True``): a string, or a list of lines."""
    if key == "tasks" and isinstance(value, list):
        return task_groups(value, ref)
    if key == "components" and isinstance(value, list):
        return [_component(c) if isinstance(c, dict) else one_line(c) for c in value] or None
    if key == "gpu_usage" and isinstance(value, dict):
        return gpu_usage(value, ref)
    return readable(value)


def task_groups(tasks: list, ref: str) -> str:
    """An array's tasks by state on one line, ``running 20 (3002-3021); completed 1480 (1-1480)``;
    ids longer than :data:`IDS_SHOWN` characters are cut at a comma, saying how many there are."""
    groups = []
    for t in tasks:
        if not isinstance(t, dict):
            groups.append(one_line(t))
            continue
        ids, count = str(t.get("ids") or ""), t.get("count")
        if len(ids) > IDS_SHOWN:
            head = ids[: IDS_SHOWN + 1].rsplit(",", 1)[0] if "," in ids[: IDS_SHOWN + 1] else ids[:IDS_SHOWN]
            number = f"{count:,} ids" if isinstance(count, int) else "more"
            ids = f"{head},… {number}; gpuportal show --json {ref} for all"
        groups.append(f"{t.get('group')} {count}" + (f" ({ids})" if ids else ""))
    return "; ".join(groups) or "-"


def _component(part: dict) -> str:
    """One component of a het job: ``+0: 4243 RUNNING, partition gpu, nodes node1``."""
    text = f"+{part.get('offset')}: {part.get('job_id')} {part.get('state') or '?'}"
    text += f", partition {part['partition']}" if part.get("partition") else ""
    return text + (f", nodes {part['nodes']}" if part.get("nodes") else "")


def gpu_usage(usage: dict, ref: str) -> list[str]:
    """The GPU figures: ``measured, read 2025-01-01 11:00 CET`` (when Prometheus stopped answering,
    the low-use flag), then one line a GPU (at most :data:`GPUS_SHOWN`)."""
    head = [str(usage.get("state") or "?")]
    if usage.get("read_at"):
        head.append(f"read {local_time(usage['read_at'], zone=True)}")
    line = ", ".join(head)
    if usage.get("unavailable_since"):
        line += f"; Prometheus not answering since {local_time(usage['unavailable_since'], zone=True)}"
    if usage.get("low_use"):
        line += f"; low use: {usage['low_use']}"
    gpus = [g for g in usage.get("gpus") or [] if isinstance(g, dict)]
    lines = [line, *(_gpu(g) for g in gpus[:GPUS_SHOWN])]
    if len(gpus) > GPUS_SHOWN:
        lines.append(f"… {len(gpus) - GPUS_SHOWN} more GPUs; gpuportal show --json {ref} for all")
    return lines


def _gpu(g: dict) -> str:
    """One GPU: ``node1 GPU 0 (a100): SM 45 %, DRAM 10 %, util 90 %, memory 1000/40960 MiB, 250 W``."""
    figures = [
        f"{label} {_number(g.get(key))}{unit}"
        for label, key, unit in (
            ("SM", "sm_active_percent", " %"),
            ("DRAM", "dram_active_percent", " %"),
            ("util", "util_percent", " %"),
        )
        if g.get(key) is not None
    ]
    if g.get("memory_used_mib") is not None:
        total = f"/{_number(g['memory_total_mib'])}" if g.get("memory_total_mib") is not None else ""
        figures.append(f"memory {_number(g['memory_used_mib'])}{total} MiB")
    if g.get("power_w") is not None:
        figures.append(f"{_number(g['power_w'])} W")
    model = f" ({g['model']})" if g.get("model") else ""
    return f"{g.get('node')} GPU {g.get('gpu')}{model}: " + (", ".join(figures) or "no figures")


def _number(value: float) -> str:
    """``45.0`` -> ``45``, ``45.25`` -> ``45.2``."""
    return f"{value:.1f}".removesuffix(".0") if isinstance(value, float) else str(value)
