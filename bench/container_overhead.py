"""Containers: what running a trivial job's command in the demo image costs next to the bare node, in one run.

Needs (as root): the local cluster (cluster/up.sh) and the demo image (scripts/build_image.sh). One batch job is
submitted as alice (``sudo -u alice sbatch --wait``) to the ``train`` partition; on the node it runs each trivial
command --reps times bare and --reps times in the image with the exact argv the portal builds
(``runtimes.runtime_get("charliecloud").exec_argv`` with ``default_binds``), alternating which goes first, and
times each with ``time.perf_counter`` around ``subprocess.run``. Same job, same node, same moment: the ratio
and the difference of the medians are the runtime's cost, not Slurm's.

    .venv/bin/python bench/container_overhead.py --reps 20

Figures, per command (``/bin/true``; ``python3 -c "import sklearn"``, the example training job's import):
the median wall time bare and in the image (seconds), their difference (goal: at most 0.5 s) and ratio.

And the session's server (goal: session start in the image / bare at most 1.2): in the same job, --server-reps
starts of JupyterLab bare (the hub's venv, PORTAL_JUPYTER_VENV, /opt/gpuportal/jupyter) and in the image (its
/opt/jupyter, same versions), each timed from the start until ``GET /api/status`` with the server's token answers
200; the medians and their ratio. What the hub, the spawner and Slurm add to a session start is the same either
way and is left out here (bench/session_start.py measures the whole start through the hub), so this ratio is the
larger, stricter one.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runtimes import default_binds, runtime_get  # noqa: E402

COMMANDS = {
    "/bin/true": ["/bin/true"],
    "python3 -c 'import sklearn'": ["python3", "-c", "import sklearn"],
}

HARNESS = r"""
import json, statistics, subprocess, sys, time, urllib.request
plan = json.loads(sys.argv[1])
out = {}
for label, pair in plan["commands"].items():
    times = {"bare": [], "image": []}
    for i in range(plan["reps"]):
        order = ("bare", "image") if i % 2 == 0 else ("image", "bare")
        for kind in order:
            t0 = time.perf_counter()
            done = subprocess.run(pair[kind], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            times[kind].append(time.perf_counter() - t0)
            if done.returncode != 0:
                sys.exit(f"{kind} {pair[kind]} failed: {done.stderr.decode()}")
    out[label] = {k: statistics.median(v) for k, v in times.items()} | {"n": plan["reps"]}


def server_start(argv, port, token):
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/api/status"
    try:
        while True:
            if proc.poll() is not None:
                sys.exit(f"{argv[0]} ended with {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
            try:
                req = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
                if urllib.request.urlopen(req, timeout=2).status == 200:
                    return time.perf_counter() - t0
            except OSError:
                pass
            if time.perf_counter() - t0 > 120:
                sys.exit(f"{argv} did not answer {url} within 120 s")
            time.sleep(0.05)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


for label, pair in plan.get("servers", {}).items():
    times = {"bare": [], "image": []}
    for i in range(plan["server_reps"]):
        order = ("bare", "image") if i % 2 == 0 else ("image", "bare")
        for kind in order:
            port = plan["port"] + len(times["bare"]) * 2 + len(times["image"]) * 2 + (kind == "image")
            argv = [a.replace("{port}", str(port)) for a in pair[kind]]
            times[kind].append(server_start(argv, port, plan["token"]))
    out[label] = {k: statistics.median(v) for k, v in times.items()} | {"n": plan["server_reps"], "all": times}
print("RESULT " + json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--image", default=os.environ.get("PORTAL_IMAGES_DIR", "/srv/gpuportal/images") + "/debian12-sklearn")
    parser.add_argument("--user", default="alice")
    parser.add_argument("--partition", default="train")
    parser.add_argument("--server-reps", type=int, default=5, help="JupyterLab starts of each kind (0: none)")
    parser.add_argument("--bare-venv", default=os.environ.get("PORTAL_JUPYTER_VENV", "/opt/gpuportal/jupyter"))
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="container-bench-", dir="/tmp"))
    shutil.chown(work, args.user)
    home = os.path.expanduser(f"~{args.user}")
    rt = runtime_get("charliecloud")
    binds = default_binds(job_dir=str(work), home=home, env_cache="/srv/gpuportal/envs")
    plan = {
        "reps": args.reps,
        "commands": {
            label: {"bare": argv, "image": rt.exec_argv(args.image, argv, binds=binds, workdir=str(work))}
            for label, argv in COMMANDS.items()
        },
    }
    token = secrets.token_hex(16)
    lab = [
        "--no-browser",
        "--ip=127.0.0.1",
        "--port={port}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={work}",
        "--ServerApp.port_retries=0",
    ]
    if args.server_reps:
        plan |= {
            "server_reps": args.server_reps,
            "token": token,
            "port": 18800 + secrets.randbelow(1000) * 20,
            "servers": {
                "jupyter-lab start -> /api/status 200": {
                    "bare": [f"{args.bare_venv}/bin/jupyter-lab", *lab],
                    "image": rt.exec_argv(args.image, ["/opt/jupyter/bin/jupyter-lab", *lab], binds=binds, workdir=str(work)),
                }
            },
        }
    (work / "harness.py").write_text(HARNESS)
    script = '#!/bin/bash\nexec python3 harness.py "$1"\n'
    (work / "job.sh").write_text(script)
    out = work / "out.txt"
    print(f"# bench/container_overhead.py --reps {args.reps}   {datetime.datetime.now():%Y-%m-%d %H:%M}")
    print(f"# image {args.image}; one job as {args.user} on partition {args.partition}; argv in the image e.g.:")
    print("#   " + " ".join(plan["commands"]["/bin/true"]["image"]))
    try:
        subprocess.run(
            [
                "sudo",
                "-u",
                args.user,
                "sbatch",
                "--wait",
                "--parsable",
                f"--chdir={work}",
                f"--output={out}",
                "-p",
                args.partition,
                "-t",
                "10",
                "-J",
                "container-bench",
                str(work / "job.sh"),
                json.dumps(plan),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        text = out.read_text()
        line = next((x for x in text.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            sys.exit(f"the job printed no result:\n{text}")
        result = json.loads(line[len("RESULT ") :])
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print("| command | runs | median bare | median in image | difference (goal <= 0.5 s) | ratio |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, r in result.items():
        if "all" in r:
            continue
        diff = r["image"] - r["bare"]
        print(
            f"| `{label}` | {r['n']} | {r['bare']:.3f} s | {r['image']:.3f} s | **{diff:.3f} s** "
            f"({'met' if diff <= 0.5 else 'missed'}) | {r['image'] / r['bare']:.2f} |"
        )
    for label, r in result.items():
        if "all" not in r:
            continue
        print()
        print("| server | runs | bare (median) | in image (median) | ratio (goal <= 1.2) |")
        print("| --- | --- | --- | --- | --- |")
        ratio = r["image"] / r["bare"]
        print(
            f"| `{label}` | {r['n']} | {_runs(r['all']['bare'])} s ({r['bare']:.2f} s) | {_runs(r['all']['image'])} s ({r['image']:.2f} s) "
            f"| **{ratio:.2f}** ({'met' if ratio <= 1.2 else 'missed'}) |"
        )
    print("The whole session start through the hub (Start -> /user/.../api/status) is bench/session_start.py's figure.")


def _runs(times: list[float]) -> str:
    return ", ".join(f"{t:.2f}" for t in times)


if __name__ == "__main__":
    main()
