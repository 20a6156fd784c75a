#!/usr/bin/env python3
"""Benchmark: does the scheduler's load grow with the number of people looking at the portal?

Simulated logged-in users refresh the "My jobs" page (the full page, then its HTMX fragment) while this
script counts the RPCs that slurmctld served, from `sdiag` before and after each phase. It runs a phase
with 1 user, then one with N users, for the same time each, and prints both counts and their ratio.
Pages read the poller's snapshot and never call Slurm, so the ratio should stay close to 1 (goal: at
most 1.2); everything slurmctld serves comes from the one poller, slurmd and whatever else uses the
cluster meanwhile.

This is a benchmark script, not a test: it prints numbers measured in one run and asserts nothing.

Needs, on this machine:
  - `make dev` running: the portal on http://127.0.0.1:8000 with a Celery worker and beat polling Slurm
    every PORTAL_SNAPSHOT_INTERVAL (5) seconds, and the local cluster (cluster/up.sh);
  - root (or any user allowed to run `sdiag`; `sacctmgr show stats` for the slurmdbd column), and write
    access to the portal's database (the same DATABASE_URL as the running portal).

Run from the repository root with the venv:

    .venv/bin/python bench/sdiag_users.py --users 1,100 --seconds 60 --base-url http://127.0.0.1:8000

Several clusters: the host's Slurm is read with plain `sdiag` (named --host-cluster, default
cluster1); each --chroot-cluster NAME=ROOT adds a cluster whose commands run inside a root on this
machine (`chroot ROOT sdiag`, `chroot ROOT sacctmgr show stats`), e.g. make dev's second cluster:

    .venv/bin/python bench/sdiag_users.py --users 1,200 --seconds 60 --chroot-cluster cluster2=/srv/cluster2

Each phase then reads every cluster before and after, and the report gives each cluster's counts and its
own ratio RPCs(N) / RPCs(1) (goal: at most 1.2 on each).

Users: it creates (or reuses) portal users benchuser000, benchuser001, ... (Slurm account "vision"; they
need not exist on the cluster, since pages never ask it) and one logged-in database session for each,
made directly with Django's SessionStore, not through the IdP. The sessions are deleted at the end; the
users stay (--delete-users removes them).

Counting: the "Remote Procedure Call statistics by message type" section of `sdiag` (Slurm 22.05 has no
JSON for sdiag) is summed before and after each phase; REQUEST_STATS_INFO (sdiag's own RPC) is left out.
The "by user" section gives the RPCs made as the portal's service user (--portal-user). sdiag counts
everything slurmctld served, so other work on the cluster during a phase (someone's tests, jobs
starting and ending) shows up too: look at the per-type and per-user columns before trusting a ratio.
Other users of the cluster, including a test run that goes through the service user, inflate even the
"as portal" column: run it when the cluster is quiet. The bench users do not exist on the cluster, so a
page that ran Slurm as the signed-in user would be refused by sudo before reaching slurmctld: that shows
as errors or slow pages here, not as RPCs (see bench/README.md).
The poller's RPCs come in bursts every interval, so a phase of S seconds holds S/interval +- 1 polls:
use --seconds 60 or more for a ratio that is not dominated by that rounding.

--etag: each user loads the page once, then polls only the fragment every --think
seconds with the ``If-None-Match`` of the last tag it was given, as a browser revalidating HTMX's poll
does; 304s are counted as answers beside the 200s, and anything else is listed as "other":

    .venv/bin/python bench/sdiag_users.py --users 1,1000 --seconds 60 --think 5 --etag
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import pwd
import random
import re
import shlex
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import requests

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STATS_OWN_RPCS = {"REQUEST_STATS_INFO", "DBD_GET_STATS"}  # the stats commands' own RPCs, left out of the counts
RPC_LINE = re.compile(r"^\s*(\S+)\s+\(\s*(\d+)\)\s+count:(\d+)")
DATA_SINCE = re.compile(r"^Data since\s+(.*?)\s*$", re.MULTILINE)


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Count slurmctld RPCs (sdiag) while 1 and then N simulated users refresh the My jobs page."
    )
    p.add_argument(
        "--users",
        default="1,100",
        help="comma-separated user counts, one phase each, in this order (default: 1,100); the ratio is against the first phase",
    )
    p.add_argument("--seconds", type=float, default=60.0, help="length of each phase (default: 60)")
    p.add_argument(
        "--think", type=float, default=1.0, help="seconds each user waits between rounds of page + fragment (default: 1.0)"
    )
    p.add_argument("--base-url", default="http://127.0.0.1:8000", help="the running portal (default: %(default)s)")
    p.add_argument("--path-page", default="/jobs/", help="full page to GET (default: %(default)s)")
    p.add_argument(
        "--path-fragment", default="/jobs/table/", help="HTMX fragment to GET with 'HX-Request: true' (default: %(default)s)"
    )
    p.add_argument("--timeout", type=float, default=30.0, help="per-request timeout in seconds (default: 30)")
    p.add_argument("--user-prefix", default="benchuser", help="bench user names: PREFIX000, PREFIX001, ...")
    p.add_argument("--account", default="vision", help="Slurm account given to the bench users (default: vision)")
    p.add_argument(
        "--portal-user",
        default="portal",
        help="the portal's service user, whose RPCs sdiag's 'by user' section shows (default: portal)",
    )
    p.add_argument(
        "--host-cluster",
        default="cluster1",
        help="the name to report the host's Slurm under (read with plain sdiag; default: %(default)s)",
    )
    p.add_argument(
        "--chroot-cluster",
        action="append",
        default=[],
        metavar="NAME=ROOT",
        help="also read the cluster whose commands run in ROOT (chroot ROOT sdiag); repeatable, e.g. cluster2=/srv/cluster2",
    )
    p.add_argument("--pause", type=float, default=2.0, help="seconds between phases (default: 2)")
    p.add_argument("--top", type=int, default=5, help="message types to show per phase (default: 5)")
    p.add_argument(
        "--settings",
        default="portal.settings.dev",
        help="DJANGO_SETTINGS_MODULE, unless already set in the environment (default: %(default)s)",
    )
    p.add_argument("--delete-users", action="store_true", help="delete the bench users at the end")
    p.add_argument(
        "--etag",
        action="store_true",
        help="load the page once, then poll only the fragment with If-None-Match (answers 200 or 304)",
    )
    args = p.parse_args(argv)
    try:
        args.user_counts = [int(n) for n in args.users.split(",") if n.strip()]
    except ValueError:
        p.error("--users takes comma-separated integers, e.g. 1,100")
    if not args.user_counts or min(args.user_counts) < 0:
        p.error("--users needs at least one count, none negative")
    if args.seconds <= 0 or args.think < 0:
        p.error("--seconds must be positive and --think not negative")
    args.clusters = [StatsSource(args.host_cluster, ())]
    for spec in args.chroot_cluster:
        name, sep, root = spec.partition("=")
        if not sep or not name or not root.startswith("/") or root == "/":
            p.error(
                f"--chroot-cluster takes NAME=ROOT with ROOT an absolute path other than /, e.g. cluster2=/srv/cluster2; got {spec!r}"
            )
        if not os.path.isdir(root):
            p.error(f"--chroot-cluster {spec}: {root} is not a directory")
        if name in {c.name for c in args.clusters}:
            p.error(f"--chroot-cluster {spec}: the name {name!r} is taken (each cluster needs its own name)")
        args.clusters.append(StatsSource(name, ("chroot", root)))
    return args


# --------------------------------------------------------------------------------------------------------
# Slurm statistics
# --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StatsSource:
    """One cluster whose statistics a phase reads: ``prefix`` goes before each command (``()`` for
    the host's Slurm, ``("chroot", ROOT)`` for a cluster whose commands run inside ROOT)."""

    name: str
    prefix: tuple[str, ...]

    def argv(self, *command: str) -> list[str]:
        return [*self.prefix, *command]


@dataclass
class RpcStats:
    """One reading of sdiag (or sacctmgr show stats): RPC counts by message type and by user."""

    by_type: dict[str, int] = field(default_factory=dict)
    by_user: dict[str, int] = field(default_factory=dict)
    data_since: str = ""
    error: str = ""

    @property
    def total(self) -> int:
        return sum(n for name, n in self.by_type.items() if name not in STATS_OWN_RPCS)


def parse_stats(text: str) -> RpcStats:
    stats = RpcStats()
    m = DATA_SINCE.search(text)
    stats.data_since = m.group(1) if m else ""
    section = None
    for line in text.splitlines():
        if line.startswith("Remote Procedure Call statistics by message type"):
            section = stats.by_type
            continue
        if line.startswith("Remote Procedure Call statistics by user"):
            section = stats.by_user
            continue
        if section is None:
            continue
        if not line.strip() or not line[0].isspace():  # a blank line or the next heading ends the section
            section = None
            continue
        m = RPC_LINE.match(line)
        if m:
            section[m.group(1)] = section.get(m.group(1), 0) + int(m.group(3))
    return stats


def read_stats(argv: list[str]) -> RpcStats:
    try:
        out = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return RpcStats(error=f"{shlex.join(argv)}: {exc}")
    if out.returncode != 0:
        return RpcStats(error=f"{shlex.join(argv)}: exit {out.returncode}: {out.stderr.strip()[:200]}")
    stats = parse_stats(out.stdout)
    if not stats.by_type:
        stats.error = f"{shlex.join(argv)}: no 'Remote Procedure Call statistics by message type' section"
    return stats


def delta(before: dict[str, int], after: dict[str, int]) -> Counter:
    return Counter(
        {
            k: after.get(k, 0) - before.get(k, 0)
            for k in set(before) | set(after)
            if after.get(k, 0) != before.get(k, 0) and k not in STATS_OWN_RPCS
        }
    )


# --------------------------------------------------------------------------------------------------------
# Portal users and sessions
# --------------------------------------------------------------------------------------------------------
def django_setup(settings: str):
    sys.path.insert(0, REPO_DIR)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", settings)
    import django

    django.setup()


def make_sessions(n: int, prefix: str, account: str) -> list[tuple[str, str]]:
    """get_or_create n bench users and a logged-in DB session for each; returns [(username, session_key)]."""
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    from accounts.models import User

    out = []
    for i in range(n):
        username = f"{prefix}{i:03d}"
        user, created = User.objects.get_or_create(
            username=username, defaults={"display_name": f"Bench user {i}", "slurm_accounts": [account]}
        )
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        elif user.slurm_accounts != [account] or not user.is_active:
            user.slurm_accounts = [account]
            user.is_active = True
            user.save(update_fields=["slurm_accounts", "is_active"])
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "allauth.account.auth_backends.AuthenticationBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        out.append((username, session.session_key))
    return out


def delete_sessions(keys: list[str]) -> None:
    from django.contrib.sessions.models import Session

    Session.objects.filter(session_key__in=keys).delete()


def delete_users(prefix: str) -> int:
    from accounts.models import User

    return User.objects.filter(username__regex=rf"^{re.escape(prefix)}[0-9]{{3,}}$").delete()[0]


# --------------------------------------------------------------------------------------------------------
# Load
# --------------------------------------------------------------------------------------------------------
@dataclass
class Result:
    status: Counter = field(default_factory=Counter)  # "200", "302", "404", "500", "error:ReadTimeout", ...
    latency: list[float] = field(default_factory=list)  # seconds, every answered request
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, status: str, seconds: float | None) -> None:
        with self.lock:
            self.status[status] += 1
            if seconds is not None:
                self.latency.append(seconds)


def status_of(response: requests.Response) -> str:
    # An HTMX request whose session is gone gets 200 + HX-Redirect (portal.middleware): not a page served.
    if response.status_code == 200 and "HX-Redirect" in response.headers:
        return "200+HX-Redirect"
    return str(response.status_code)


def user_loop(args, cookie_name: str, session_key: str, deadline: float, result: Result, seed: int) -> None:
    rng = random.Random(seed)
    http = requests.Session()
    http.cookies.set(cookie_name, session_key)
    page = args.base_url.rstrip("/") + args.path_page
    fragment = args.base_url.rstrip("/") + args.path_fragment
    tag = ""  # --etag: the fragment's last ETag, sent back as If-None-Match
    # Start spread over one think time, as real people do not all press F5 at the same instant.
    time.sleep(min(rng.uniform(0, args.think), max(0.0, deadline - time.monotonic())))
    try:
        first = True
        while time.monotonic() < deadline:
            gets = ((page, {}), (fragment, {"HX-Request": "true"}))
            if args.etag and not first:  # the page stays open; only its fragment polls
                gets = ((fragment, {"HX-Request": "true", **({"If-None-Match": tag} if tag else {})}),)
            first = False
            for url, headers in gets:
                if time.monotonic() >= deadline:
                    break
                t0 = time.perf_counter()
                try:
                    r = http.get(url, headers=headers, timeout=args.timeout, allow_redirects=False)
                    _ = r.content  # read the whole body
                    result.add(status_of(r), time.perf_counter() - t0)
                    if url == fragment and r.status_code in (200, 304):
                        tag = r.headers.get("ETag", tag)
                except requests.RequestException as exc:
                    result.add(f"error:{type(exc).__name__}", None)
            remaining = deadline - time.monotonic()
            if remaining > 0:
                time.sleep(min(args.think, remaining))
    finally:
        http.close()


@dataclass
class ClusterCounts:
    """What one cluster's slurmctld (and slurmdbd: ``dbd``, None when not readable) served during a phase."""

    ctld: Counter
    ctld_by_user: Counter
    dbd: Counter | None
    notes: list[str]

    @property
    def total(self) -> int:
        return sum(self.ctld.values())


@dataclass
class Phase:
    users: int
    seconds: float
    result: Result
    counts: dict[str, ClusterCounts]  # cluster name -> its counts, in the order of args.clusters
    notes: list[str]

    @property
    def served(self) -> int:
        """Answers with the page's figures: 200s and (``--etag``) 304s."""
        return self.result.status.get("200", 0) + self.result.status.get("304", 0)


def read_cluster(source: StatsSource) -> tuple[RpcStats, RpcStats]:
    """(slurmctld's sdiag, slurmdbd's sacctmgr show stats) of one cluster; exits when sdiag fails."""
    ctld = read_stats(source.argv("sdiag"))
    if ctld.error:
        sys.exit(f"cannot read {source.name}'s slurmctld statistics: {ctld.error}")
    return ctld, read_stats(source.argv("sacctmgr", "show", "stats"))


def cluster_counts(before: tuple[RpcStats, RpcStats], after: tuple[RpcStats, RpcStats]) -> ClusterCounts:
    (ctld0, dbd0), (ctld1, dbd1) = before, after
    notes = []
    if ctld1.data_since != ctld0.data_since:
        notes.append(
            f"sdiag statistics were reset during the phase (data since {ctld0.data_since!r} -> "
            f"{ctld1.data_since!r}; slurmctld restarted?): its counts are wrong"
        )
    dbd = None
    if not dbd0.error and not dbd1.error:
        dbd = delta(dbd0.by_type, dbd1.by_type)
        if dbd1.data_since != dbd0.data_since:
            notes.append("slurmdbd statistics were reset during the phase")
    by_user = delta(ctld0.by_user, ctld1.by_user)
    me = pwd.getpwuid(os.getuid()).pw_name  # sdiag's own REQUEST_STATS_INFO is counted under whoever ran it
    own = sum(ctld1.by_type.get(k, 0) - ctld0.by_type.get(k, 0) for k in STATS_OWN_RPCS)
    by_user[me] -= own
    by_user = Counter({k: v for k, v in by_user.items() if v})
    return ClusterCounts(delta(ctld0.by_type, ctld1.by_type), by_user, dbd, notes)


def run_phase(args, n: int, sessions, cookie_name: str) -> Phase:
    notes = []
    result = Result()
    before = {c.name: read_cluster(c) for c in args.clusters}
    t0 = time.monotonic()
    deadline = t0 + args.seconds
    threads = [
        threading.Thread(
            target=user_loop, name=f"bench-{i}", daemon=True, args=(args, cookie_name, sessions[i][1], deadline, result, i)
        )
        for i in range(n)
    ]
    for t in threads:
        t.start()
    if not threads:
        time.sleep(args.seconds)
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()) + args.timeout + 5)
    stuck = sum(t.is_alive() for t in threads)
    if stuck:
        notes.append(f"{stuck} user thread(s) still in a request after the deadline (abandoned)")
    elapsed = time.monotonic() - t0
    after = {c.name: read_cluster(c) for c in args.clusters}
    counts = {c.name: cluster_counts(before[c.name], after[c.name]) for c in args.clusters}
    return Phase(n, elapsed, result, counts, notes)


# --------------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.0f} ms"


def ratio(a: float, b: float) -> str:
    return "n/a" if b == 0 else f"{a / b:.2f}"


def report(args, phases: list[Phase]) -> None:
    base = next((p for p in phases if p.users > 0), phases[0])
    names = [c.name for c in args.clusters]
    width = max(7, *(len(n) for n in names))
    print()
    header = (
        f"{'phase':>5} {'users':>5} {'secs':>5} {'200/304':>9} {'other':>6} {'median':>8} {'p95':>8} "
        f"{'cluster':<{width}} {'ctld RPCs':>9} {'/min':>6} {'as ' + args.portal_user:>9} {'dbd RPCs':>8} {'ratio':>5}"
    )
    print(header)
    print("-" * len(header))
    for i, p in enumerate(phases, 1):
        other = sum(n for s, n in p.result.status.items() if s not in ("200", "304"))
        median = statistics.median(p.result.latency) if p.result.latency else None
        page = (
            f"{i:>5} {p.users:>5} {p.seconds:>5.0f} {p.served:>9} {other:>6} {ms(median):>8} {ms(pct(p.result.latency, 0.95)):>8}"
        )
        for k, name in enumerate(names):
            c = p.counts[name]
            dbd = "n/a" if c.dbd is None else str(sum(c.dbd.values()))
            print(
                f"{page if k == 0 else ' ' * len(page)} {name:<{width}} {c.total:>9} {c.total * 60 / p.seconds:>6.1f} "
                f"{c.ctld_by_user.get(args.portal_user, 0):>9} {dbd:>8} {ratio(c.total, base.counts[name].total):>5}"
            )
    print()
    for i, p in enumerate(phases, 1):
        print(f"phase {i} ({p.users} user{'' if p.users == 1 else 's'}):")
        statuses = ", ".join(f"{s}: {n}" for s, n in sorted(p.result.status.items())) or "no requests"
        print(f"  responses        {statuses}")
        for name in names:
            c = p.counts[name]
            label = f" ({name})" if len(names) > 1 else ""
            top = ", ".join(f"{k} {v}" for k, v in c.ctld.most_common(args.top)) or "none"
            print(f"  slurmctld top{label}    {top}")
            users = ", ".join(f"{k} {v}" for k, v in c.ctld_by_user.most_common()) or "none"
            print(f"  slurmctld users{label}  {users}")
            if c.dbd is not None:
                print(f"  slurmdbd top{label}     {', '.join(f'{k} {v}' for k, v in c.dbd.most_common(args.top)) or 'none'}")
            for note in c.notes:
                print(f"  NOTE{label}: {note}")
        for note in p.notes:
            print(f"  NOTE: {note}")
    last = phases[-1]
    if last is not base:
        print()
        rows = []
        for name in names:
            c_last, c_base = last.counts[name], base.counts[name]
            on = f" on {name}" if len(names) > 1 else ""
            label = f"slurmctld RPCs({last.users} users) / RPCs({base.users} user{'' if base.users == 1 else 's'}){on}"
            rows.append((label, c_last.total, c_base.total, "   (goal: at most 1.2)"))
            if round(last.seconds) != round(base.seconds):  # a phase that overran its deadline: compare rates
                rows.append(
                    (
                        f"the same per minute{on} ({last.seconds:.0f} s / {base.seconds:.0f} s phases)",
                        round(c_last.total * 60 / last.seconds, 1),
                        round(c_base.total * 60 / base.seconds, 1),
                        "",
                    )
                )
            rows.append(
                (
                    f"the same, only RPCs as '{args.portal_user}'{on}",
                    c_last.ctld_by_user.get(args.portal_user, 0),
                    c_base.ctld_by_user.get(args.portal_user, 0),
                    "",
                )
            )
        rows.append(("answers with the figures (200, 304)", last.served, base.served, ""))
        width = max(len(r[0]) for r in rows)
        for i, (name, a, b, goal) in enumerate(rows):
            print(f"{'ratio' if i == 0 else '':<5} {name:<{width}} = {a} / {b} = {ratio(a, b)}{goal}")


def main(argv=None) -> int:
    args = parse_args(argv)
    print(
        f"$ {shlex.join([os.path.relpath(sys.executable) if sys.executable.startswith(REPO_DIR) else sys.executable] + sys.argv)}"
    )
    print(
        f"# {dt.datetime.now().astimezone().isoformat(timespec='seconds')} on {os.uname().nodename}; "
        f"phases: {', '.join(map(str, args.user_counts))} users x {args.seconds:g} s, think {args.think:g} s, "
        f"GET {args.path_page} + {args.path_fragment} (HX-Request)"
        + (", then only the fragment with If-None-Match" if args.etag else "")
    )
    versions = []
    for c in args.clusters:
        out = subprocess.run(c.argv("sinfo", "--version"), check=False, capture_output=True, text=True).stdout.strip()
        where = f"chroot {c.prefix[1]}" if c.prefix else "host"
        versions.append(f"{c.name}: {out or 'sinfo --version failed'} ({where})")
    print(f"# {'; '.join(versions)}; portal {args.base_url}")
    sys.stdout.flush()

    django_setup(args.settings)
    from django.conf import settings

    try:
        requests.get(args.base_url, timeout=10, allow_redirects=False)
    except requests.RequestException as exc:
        print(f"the portal does not answer at {args.base_url} ({exc}); start it with `make dev`", file=sys.stderr)
        return 2

    n_max = max(args.user_counts)
    sessions = make_sessions(n_max, args.user_prefix, args.account)
    try:
        if sessions:  # one request first, so a session that does not work is said plainly, not just counted
            probe = requests.get(
                args.base_url.rstrip("/") + args.path_page,
                cookies={settings.SESSION_COOKIE_NAME: sessions[0][1]},
                timeout=args.timeout,
                allow_redirects=False,
            )
            if probe.status_code != 200:
                where = probe.headers.get("Location", "")
                print(
                    f"# warning: GET {args.path_page} as {sessions[0][0]} answered {probe.status_code}"
                    f"{' -> ' + where if where else ''}; such answers are counted, not served",
                    flush=True,
                )
        phases = []
        for i, n in enumerate(args.user_counts):
            if i:
                time.sleep(args.pause)
            print(f"# phase {i + 1}: {n} user{'' if n == 1 else 's'} for {args.seconds:g} s ...", flush=True)
            phases.append(run_phase(args, n, sessions, settings.SESSION_COOKIE_NAME))
    finally:
        delete_sessions([key for _, key in sessions])
        if args.delete_users:
            print(f"# deleted {delete_users(args.user_prefix)} bench user rows")
    report(args, phases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
