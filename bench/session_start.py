"""Sessions: time from Start to JupyterLab answering, and the slurmctld RPCs one pending session costs
per minute, for the portal's spawner next to stock batchspawner with its default settings, in one run.

Needs (as root): `make dev` running (the portal on :8000 with its snapshot poller, and the project's
hub on :8001 with PortalSlurmSpawner); the Jupyter venv from scripts/hub_setup.sh; the local cluster.
The script starts a second hub itself for stock batchspawner (`batchspawner.MultiSlurmSpawner`,
batchspawner's defaults: `sudo -E -u {username}` through a shell, `squeue` every 0.5 s while starting
and at each poll, `srun` inside the job; only the partition and the node-name map are set, which it
needs to work here, and the venv's two commands by full path, as sudo's secure_path drops the venv from
PATH inside the job). That hub runs as root, because its default `sudo -E` needs root or a SETENV rule.

    .venv/bin/python bench/session_start.py --runs 5 --seconds 60
    .venv/bin/python bench/session_start.py --runs 5 --no-pending   # start times only

Figures:
- start to JupyterLab answering: POST /hub/api/users/alice/servers/<name> until
  GET /user/alice/<name>/api/status through the proxy answers 200 (alice's own token); median of runs.
  Mode: every session starts on demand (a new Slurm job per Start; no server is kept warm).
- where each start's time goes, per run, from the logs' own clocks (all on this machine):
  the hub's POST until slurmctld took the submission (``_slurm_rpc_submit_batch_job``), its
  scheduling pass (``sched: Allocate``), slurmd launching the batch job (``Launching batch job``),
  the batch script starting and exec'ing the server (the portal's script prints ``gpuportal-t``
  stamps; stock's script has none), the server listening (its ``is running at`` line), the spawner
  returning (the hub's log), the proxy route (``Adding user ... to proxy``) and the first 200.
- RPCs per pending minute: node1 (the interactive partition) is filled by a blocker job, one session
  is started and stays pending; slurmctld's RPCs (`sdiag` by message type, sdiag's own left out) over
  --seconds, minus the same window with no session pending (the portal's poller runs in both).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("PORTAL_JUPYTER_VENV", "/opt/gpuportal/jupyter"))
_spec = importlib.util.spec_from_file_location("sdiag_users", REPO / "bench" / "sdiag_users.py")
sdiag_users = importlib.util.module_from_spec(_spec)
sys.modules["sdiag_users"] = sdiag_users  # dataclasses need the module registered
_spec.loader.exec_module(sdiag_users)

STOCK_CONFIG = """
import batchspawner  # registers /hub/api/batchspawner
c = get_config()
c.JupyterHub.bind_url = "http://127.0.0.1:{port}"
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.JupyterHub.hub_connect_ip = "127.0.0.1"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"
c.ConfigurableHTTPProxy.command = ["{chp}"]
c.JupyterHub.db_url = "sqlite:///{state}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{state}/cookie_secret"
c.JupyterHub.allow_named_servers = True
c.JupyterHub.authenticator_class = "dummy"
c.JupyterHub.services = [{{"name": "bench", "api_token": "{token}"}}]
c.JupyterHub.load_roles = [{{"name": "bench", "scopes": ["admin:users", "servers", "tokens"], "services": ["bench"]}}]
c.JupyterHub.spawner_class = "batchspawner.MultiSlurmSpawner"
c.MultiSlurmSpawner.daemon_resolver = {{"node1": "127.0.0.1", "node2": "127.0.0.1", "node3": "127.0.0.1"}}
c.MultiSlurmSpawner.req_partition = "interactive"
# sudo's secure_path drops the venv from PATH inside the job: name the two commands by full path.
c.MultiSlurmSpawner.batchspawner_singleuser_cmd = "{venv}/bin/batchspawner-singleuser"
c.Spawner.cmd = ["{venv}/bin/jupyterhub-singleuser"]
"""


class Hub:
    def __init__(self, name: str, public: str, api: str, token: str):
        self.name, self.public, self.api, self.token = name, public, api, token

    def call(self, method: str, path: str, **kw) -> requests.Response:
        return requests.request(method, self.api + path, headers={"Authorization": f"token {self.token}"}, timeout=60, **kw)

    def user_token(self, user: str) -> str:
        self.call("POST", f"/users/{user}")
        r = self.call("POST", f"/users/{user}/tokens", json={"note": "bench", "expires_in": 3600})
        if r.status_code == 201:
            return r.json()["token"]
        raise SystemExit(f"{self.name}: could not make a token for {user}: {r.status_code} {r.text}")


def start_stock_hub(state: Path) -> tuple[Hub, subprocess.Popen]:
    from socket import socket

    def free() -> int:
        with socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    port, hub_port, proxy_api_port = free(), free(), free()
    token = "bench-stock-token"
    (state / "jupyterhub_config.py").write_text(
        STOCK_CONFIG.format(
            port=port,
            hub_port=hub_port,
            proxy_api_port=proxy_api_port,
            state=state,
            token=token,
            venv=VENV,
            chp=REPO / "hub" / "node_modules" / ".bin" / "configurable-http-proxy",
        )
    )
    env = {**os.environ, "PATH": f"{VENV / 'bin'}:{os.environ['PATH']}"}
    log = open(state / "hub.log", "w")
    proc = subprocess.Popen(
        [str(VENV / "bin" / "jupyterhub"), "-f", str(state / "jupyterhub_config.py")],
        cwd=state,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    hub = Hub("stock batchspawner", f"http://127.0.0.1:{port}", f"http://127.0.0.1:{hub_port}/hub/api", token)
    hub.log_file = state / "hub.log"
    for _ in range(120):
        try:
            if requests.get(hub.api + "/", timeout=2).ok:
                return hub, proc
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise SystemExit("the stock hub did not start:\n" + (state / "hub.log").read_text()[-3000:])


def sdiag_total() -> dict[str, int]:
    out = subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout
    by_type = sdiag_users.parse_stats(out).by_type
    by_type.pop("REQUEST_STATS_INFO", None)
    return by_type


def rpcs_during(seconds: float) -> tuple[int, dict[str, int]]:
    before = sdiag_total()
    time.sleep(seconds)
    after = sdiag_total()
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    delta = {k: v for k, v in delta.items() if v}
    return sum(delta.values()), delta


def wait_answering(hub: Hub, user: str, server: str, token: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            r = requests.get(
                f"{hub.public}/user/{user}/{server}/api/status",
                headers={"Authorization": f"token {token}"},
                timeout=5,
                allow_redirects=False,
            )
            if r.status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{hub.name}: {server} did not answer within {timeout} s")


def stop(hub: Hub, user: str, server: str) -> None:
    hub.call("DELETE", f"/users/{user}/servers/{server}", json={"remove": True})
    for _ in range(60):
        if server not in hub.call("GET", f"/users/{user}").json().get("servers", {}):
            return
        time.sleep(0.5)


_LOG_STAMP = re.compile(r"\[(?:[A-Z] )?(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d\.\d+)")


def _stamp(line: str) -> float | None:
    """A log line's own time (Slurm's ``[2026-12-01T18:51:38.037]``, Jupyter's ``[I 2026-12-01
    18:52:27.123 ...]``; this machine's local time) as Unix seconds, or None."""
    m = _LOG_STAMP.search(line)
    if not m:
        return None
    whole, frac = m.group(2).split(".")
    return time.mktime(time.strptime(f"{m.group(1)} {whole}", "%Y-%m-%d %H:%M:%S")) + float("0." + frac)


def _first(path: Path | str, needle: str, after: float, pattern: re.Pattern | None = None) -> float | None:
    """The time of the first line of ``path`` holding ``needle`` (and matching ``pattern``) at or
    after ``after`` (Unix seconds), from the line's own stamp or a ``gpuportal-t`` stamp in it."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if needle not in line or (pattern and not pattern.search(line)):
            continue
        t = _stamp(line)
        if t is not None and t >= after - 0.001:
            return t
    return None


def _gpuportal_t(path: str, key: str) -> float | None:
    try:
        m = re.search(rf"gpuportal-t {key}=(\d+\.\d+)", Path(path).read_text(errors="replace"))
    except OSError:
        return None
    return float(m.group(1)) if m else None


def job_of(user: str, after: float) -> tuple[str, str]:
    """(job id, its output file) of the user's newest running job."""
    out = subprocess.run(["squeue", "-h", "-u", user, "-t", "RUNNING", "-o", "%i"], capture_output=True, text=True).stdout
    ids = sorted((int(x) for x in out.split() if x.isdigit()), reverse=True)
    if not ids:
        return "", ""
    show = subprocess.run(["scontrol", "show", "job", str(ids[0])], capture_output=True, text=True).stdout
    m = re.search(r"StdOut=(\S+)", show)
    return str(ids[0]), (m.group(1) if m else "")


#: The steps of a start, in order: (label, where the time at its end comes from).
STEPS = (
    ("submit", "hub's POST -> slurmctld has the job"),
    ("sched", "Slurm's scheduling pass (submitted -> allocated)"),
    ("launch", "allocated -> slurmd launches the batch job"),
    ("script", "slurmd -> batch script starts (prolog, job environment)"),
    ("exec", "batch script -> exec of the server"),
    ("server", "server process -> listening"),
    ("spawner", "listening -> spawner returns"),
    ("route", "spawner returns -> the hub's HTTP check -> proxy route"),
    ("answer", "proxy route -> JupyterLab answers 200"),
)


def breakdown(hub: Hub, user: str, server: str, t0: float, t_end: float, job: str, out: str) -> dict[str, float | None]:
    """Unix times at the end of each step of :data:`STEPS` (None where no log says)."""
    ctld, node_log = Path("/var/log/slurm/slurmctld.log"), Path("/var/log/slurm/slurmd-node1.log")
    job_re = re.compile(rf"JobId={job}\b|batch job {job}\b")
    times: dict[str, float | None] = {
        "submit": _first(ctld, "_slurm_rpc_submit_batch_job", t0, job_re),
        "sched": _first(ctld, "sched: Allocate", t0, job_re) or _first(ctld, "backfill: Started", t0, job_re),
        "launch": _first(node_log, "Launching batch job", t0, job_re),
        "script": _gpuportal_t(out, "script"),
        "exec": _gpuportal_t(out, "exec"),
        "server": _first(out, "is running at", t0),
    }
    hub_log = getattr(hub, "log_file", None)
    server_re = re.compile(rf"/user/{user}/{server}/|{user}:{server}\b")
    if hub_log:
        times["spawner"] = _first(hub_log, f"job {job} ", t0) if job else None
        times["route"] = _first(hub_log, "to proxy", t0, server_re)
    times["answer"] = t_end
    return times


def start_times(hub: Hub, options: dict, runs: int, user: str) -> tuple[list[float], list[dict]]:
    token = hub.user_token(user)
    times, steps = [], []
    for i in range(runs):
        server = f"bench{i}-{int(time.time())}"
        t0, m0 = time.time(), time.monotonic()
        r = hub.call("POST", f"/users/{user}/servers/{server}", json={"user_options": options})
        if r.status_code not in (201, 202):
            log = Path(hub.log_file).read_text()[-3000:] if getattr(hub, "log_file", None) else ""
            raise SystemExit(f"{hub.name}: start refused: {r.status_code} {r.text}\n{log}")
        wait_answering(hub, user, server, token)
        times.append(time.monotonic() - m0)
        t_end = t0 + times[-1]
        job, out = job_of(user, t0)
        time.sleep(0.3)  # the logs' last lines reach the disk
        steps.append({"t0": t0, **breakdown(hub, user, server, t0, t_end, job, out)})
        print(f"  run {i + 1}: {times[-1]:.2f} s  job {job}  " + format_steps(t0, steps[-1]), flush=True)
        stop(hub, user, server)
        time.sleep(2)
    return times, steps


def median_steps(steps: list[dict]) -> str:
    """Each step's median duration over the runs (from each run's marks, as format_steps)."""
    durations: dict[str, list[float]] = {name: [] for name, _ in STEPS}
    for marks in steps:
        last = marks["t0"]
        for name, _ in STEPS:
            t = marks.get(name)
            if t is not None:
                durations[name].append(t - last)
                last = max(last, t)
    return " | ".join(
        (f"{n} {statistics.median(d):.2f}" + ("*" if statistics.median(d) < 0 else "")) if d else f"{n} -"
        for n, d in durations.items()
    )


def format_steps(t0: float, marks: dict[str, float | None]) -> str:
    """``submit 0.08 | sched 1.52 | ...``: seconds each step took (``-`` where a log did not say;
    the next step then counts from the last known mark). A mark earlier than the one before it is
    shown with ``*`` (stock's spawner returns once the wrapper reported a port, before the server
    listens; the hub's HTTP check then waits), and the next step counts from the later mark."""
    parts, last = [], t0
    for name, _ in STEPS:
        t = marks.get(name)
        if t is None:
            parts.append(f"{name} -")
        elif t < last:
            parts.append(f"{name} {t - last:.2f}*")
        else:
            parts.append(f"{name} {t - last:.2f}")
            last = t
    return " | ".join(parts)


def pending_cost(hub: Hub, options: dict, seconds: float, user: str) -> tuple[int, int, dict]:
    """(RPCs with one session pending, RPCs with none, the pending window's message types)."""
    blocker = (
        subprocess.run(
            [
                "sudo",
                "-u",
                "bob",
                "sbatch",
                "--parsable",
                "--chdir=/tmp",
                "--partition=interactive",
                "--cpus-per-task=8",
                "--time=10",
                "--job-name=bench-blocker",
                "--wrap",
                "sleep 600",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .split(";")[0]
    )
    try:
        time.sleep(3)
        idle, _ = rpcs_during(seconds)
        server = f"benchpend-{int(time.time())}"
        r = hub.call("POST", f"/users/{user}/servers/{server}", json={"user_options": options})
        if r.status_code not in (201, 202):
            raise SystemExit(f"{hub.name}: start refused: {r.status_code} {r.text}")
        time.sleep(3)
        busy, types = rpcs_during(seconds)
        stop(hub, user, server)
    finally:
        subprocess.run(["scancel", blocker], check=False)
    return busy, idle, types


def ensure_portal_user(user: str, team: str) -> None:
    """The portal's spawn check wants a user who signed in; make the row as a sign-in through the dev
    IdP would (its issuer and the user's ``sub`` from idp/users.json, so a later real sign-in is the
    same account; with their team, so the portal's Slurm sync keeps their association)."""
    import json

    users = json.loads((REPO / "idp" / "users.json").read_text())["users"]
    sub = next((u["claims"].get("sub", u["username"]) for u in users if u["username"] == user), user)
    code = (
        "from django.conf import settings; from accounts.models import User; from teams.models import Membership, Team\n"
        f"u, _ = User.objects.get_or_create(username={user!r}, defaults={{'oidc_issuer': settings.PORTAL_OIDC['issuer'], 'oidc_sub': {sub!r}}})\n"
        f"t = Team.objects.get(name={team!r}); Membership.objects.get_or_create(team=t, user=u)\n"
        f"u.slurm_accounts = sorted(set(u.slurm_accounts or []) | {{{team!r}}}); u.save()\n"
    )
    subprocess.run(
        [str(REPO / ".venv" / "bin" / "python"), str(REPO / "manage.py"), "shell", "-c", code],
        check=True,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "portal.settings.dev")},
        capture_output=True,
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3, help="starts per spawner for the start time (default 3)")
    p.add_argument("--seconds", type=float, default=60, help="length of each RPC window (default 60)")
    p.add_argument("--no-pending", action="store_true", help="start times only: no pending-session RPC windows")
    p.add_argument("--user", default="alice")
    p.add_argument("--team", default="vision", help="the user's team (Slurm account) in the portal")
    p.add_argument("--portal-hub-api", default="http://127.0.0.1:8081/hub/api")
    p.add_argument("--portal-hub-url", default="http://127.0.0.1:8001")
    p.add_argument("--portal-hub-token", default=os.environ.get("PORTAL_HUB_TOKEN", "dev-hub-token-not-secret"))
    args = p.parse_args(argv)

    ensure_portal_user(args.user, args.team)
    ours = Hub("portal spawner", args.portal_hub_url, args.portal_hub_api, args.portal_hub_token)
    ours.log_file = REPO / "var" / "log" / "hub.log"
    try:
        ours.call("GET", "/")
    except requests.RequestException:
        raise SystemExit("the project's hub is not running: start `make dev` first") from None
    ours.call("POST", f"/users/{args.user}")  # a fresh hub has no such user yet (201, or 409: it has)
    # The portal's service may not make tokens (it has no 'tokens' scope); alice's own token comes
    # from `jupyterhub token`, as the hub's own admin would make it.
    user_token = (
        subprocess.run(
            [
                "bash",
                "-c",
                f"cd {REPO}/var/hub && runuser -u portal -- env PORTAL_HUB_STATE_DIR={REPO}/var/hub PORTAL_HUB_TOKEN=x "
                f"PORTAL_HUB_OIDC_CLIENT_SECRET=x {VENV}/bin/jupyterhub token {args.user} -f {REPO}/hub/jupyterhub_config.py",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    ours.user_token = lambda user: user_token  # type: ignore[method-assign]
    our_options = {"ide": "lab", "gpu_count": 0, "cpus": 1, "memory_mb": 1024, "hours": 1}

    results, all_steps = {}, {}
    print("mode: on demand (every Start submits a new Slurm job; no server is pre-started or kept warm)")
    print("steps (seconds each; '-' where no log says, the next step then counts from the last mark;")
    print("       '*' a mark before the one above it: stock's spawner returns once a port is reported, before the")
    print("       server listens, and the hub's HTTP check waits for the server):")
    for name, what in STEPS:
        print(f"  {name:<8} {what}")
    with tempfile.TemporaryDirectory(prefix="bench-stock-hub-") as tmp:
        stock, proc = start_stock_hub(Path(tmp))
        try:
            for hub, options in ((ours, our_options), (stock, {})):
                print(f"[{hub.name}] {args.runs} starts...", flush=True)
                times, steps = start_times(hub, options, args.runs, args.user)
                all_steps[hub.name] = steps
                busy = idle = 0
                types: dict = {}
                if not args.no_pending:
                    print(f"[{hub.name}] pending session, {args.seconds:.0f} s windows...", flush=True)
                    busy, idle, types = pending_cost(hub, options, args.seconds, args.user)
                results[hub.name] = (times, busy, idle, types)
        finally:
            os.killpg(proc.pid, 15)
            proc.wait(20)
            # Only the bench's own leftovers (the two hubs' session jobs): other work may run as this user too.
            for name in ("session-lab", "spawner-jupyterhub"):
                subprocess.run(["scancel", "-u", args.user, f"--name={name}"], check=False)

    per_min = 60.0 / args.seconds
    print()
    print(
        f"{'spawner':<22} {'start -> JupyterLab answers (s)':<36} {'RPCs/min, 1 pending session':<30} {'(window RPCs: pending / none)'}"
    )
    for name, (times, busy, idle, _) in results.items():
        runs = ", ".join(f"{t:.1f}" for t in times)
        print(
            f"{name:<22} median {statistics.median(times):5.1f}  ({runs}){'':<6} {(busy - idle) * per_min:8.0f}{'':<22} {busy} / {idle}"
        )
    (o_t, o_b, o_i, _), (s_t, s_b, s_i, s_types) = results["portal spawner"], results["stock batchspawner"]
    print()
    print("median seconds per step (runs where the logs said):")
    for name, steps in all_steps.items():
        print(f"  {name:<22} " + median_steps(steps))
    print()
    print(f"start time ratio (portal / stock): {statistics.median(o_t) / statistics.median(s_t):.2f}")
    if args.no_pending:
        return 0
    stock_cost, our_cost = (s_b - s_i) * per_min, (o_b - o_i) * per_min
    print(
        f"pending RPCs per minute: portal {our_cost:.0f}, stock {stock_cost:.0f}"
        + (
            f" (stock costs {stock_cost / our_cost:.0f}x as many)"
            if our_cost > 0
            else " (the portal's spawner adds none: it reads the shared snapshot)"
        )
    )
    print(
        "stock's pending window by message type: "
        + ", ".join(f"{k} {v}" for k, v in sorted(s_types.items(), key=lambda kv: -kv[1])[:4])
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
