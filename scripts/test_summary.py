"""The end of a `make test` run: each tier's count and wall time, then, if anything failed, which tests
and their first error line, and where the run's logs are.

    python3 scripts/test_summary.py test-artifacts

Reads the JUnit XML files pytest wrote for each tier (``junit-<tier>.xml``, with ``<tier>.seconds``
beside it: the tier's wall time, written by scripts/test.sh) and lists the logs collected into
``test-artifacts/logs/``. Where scripts/test.sh also wrote ``<tier>.start`` (the tier's start, Unix
seconds) and ``cpu.log`` (a sample of the machine's ``/proc/stat`` every 5 s), each tier's line says how
busy the machine's CPUs were meanwhile: a tier that waits on Slurm with the CPUs mostly idle can gain
from running beside another; one that keeps them busy cannot. Standard library only: it runs with any
Python 3.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

#: How many failed tests are listed (the rest are counted).
SHOWN = 30
#: How many of each tier's slowest tests are listed, with their seconds (where a tier's time goes).
SLOWEST = 5


def _tests(path: Path) -> list[tuple[str, str, str, float]]:
    """(test id, outcome, first line of its message, seconds) per test case; outcome: passed, failed, error,
    skipped; seconds: JUnit's ``time``, set-up, call and teardown together (pytest's default)."""
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        file = case.get("file") or case.get("classname", "").replace(".", "/") + ".py"
        test_id = f"{file}::{case.get('name')}"
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            found = case.find(tag)
            if found is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
                text = found.get("message") or found.text or ""
                message = next((line.strip() for line in text.splitlines() if line.strip()), "")
                break
        cases.append((test_id, outcome, message, float(case.get("time") or 0)))
    return cases


def cpu_busy(cpu_log: Path, start: float, end: float) -> float | None:
    """The share (0 to 1) of all CPUs' time that was busy between ``start`` and ``end`` (Unix
    seconds), from ``cpu_log``'s samples (``<unix seconds> cpu <user> <nice> <system> <idle> <iowait>
    ...``: the ``cpu`` line of ``/proc/stat``, in clock ticks): busy is everything but idle and iowait,
    between the first sample at or after ``start`` and the last at or before ``end``. ``None``
    without two such samples or with a log that cannot be read."""
    try:
        samples = []
        for line in cpu_log.read_text().splitlines():
            words = line.split()
            if len(words) >= 6 and words[1] == "cpu":
                at, ticks = float(words[0]), [int(w) for w in words[2:]]
                if start <= at <= end:
                    samples.append((sum(ticks), ticks[3] + (ticks[4] if len(ticks) > 4 else 0)))
    except (OSError, ValueError):
        return None
    if len(samples) < 2 or samples[-1][0] <= samples[0][0]:
        return None
    total = samples[-1][0] - samples[0][0]
    return 1 - (samples[-1][1] - samples[0][1]) / total


def main(artifacts: Path) -> int:
    failed: list[tuple[str, str, str, float]] = []
    totals: dict[str, int] = {}
    slowest: list[str] = []
    print("== test summary ==")
    for xml in sorted(artifacts.glob("junit-*.xml")):
        tier = xml.stem.removeprefix("junit-")
        try:
            cases = _tests(xml)
        except ET.ParseError as exc:
            print(f"{tier:>10}: {xml} could not be read ({exc}): the run stopped inside this tier")
            continue
        counts: dict[str, int] = {}
        for _, outcome, _, _ in cases:
            counts[outcome] = counts.get(outcome, 0) + 1
            totals[outcome] = totals.get(outcome, 0) + 1
        seconds, start = artifacts / f"{tier}.seconds", artifacts / f"{tier}.start"
        wall = f" in {int(seconds.read_text())} s" if seconds.exists() else ""
        if wall and start.exists():
            t0 = int(start.read_text())
            busy = cpu_busy(artifacts / "cpu.log", t0, t0 + int(seconds.read_text()))
            wall += f", CPUs {busy:.0%} busy" if busy is not None else ""
        print(f"{tier:>10}: " + ", ".join(f"{n} {o}" for o, n in sorted(counts.items())) + wall)
        failed += [c for c in cases if c[1] in ("failed", "error")]
        top = sorted(cases, key=lambda c: -c[3])[:SLOWEST]
        slowest.append(f"{tier:>10}: " + "; ".join(f"{c[0].rsplit('/', 1)[-1]} {c[3]:.0f} s" for c in top))
    if slowest:
        print(f"== the {SLOWEST} slowest tests of each tier ==")
        print("\n".join(slowest))
    if failed:
        print(f"== {len(failed)} failed ==")
        for test_id, outcome, message, _ in failed[:SHOWN]:
            print(f"{outcome.upper()} {test_id}\n    {message[:300]}")
        if len(failed) > SHOWN:
            print(f"... and {len(failed) - SHOWN} more (the JUnit files above list them all)")
        print(f"Each failed test's output and log lines are in its tier's {artifacts}/junit-<tier>.xml.")
    logs = artifacts / "logs"
    if logs.is_dir():
        names = sorted(p.name for p in logs.iterdir())
        print(
            f"Logs of this run (Slurm, sshd, exporters, hub, IdP, portal): {logs}/ ({len(names)} files: {', '.join(names[:8])}{' ...' if len(names) > 8 else ''})"
        )
    bad = totals.get("failed", 0) + totals.get("error", 0)
    print(f"total: {totals.get('passed', 0)} passed, {bad} failed, {totals.get('skipped', 0)} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "test-artifacts")))
