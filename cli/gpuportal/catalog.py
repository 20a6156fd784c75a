"""``gpuportal clusters`` and ``gpuportal images``: what the portal offers to run on and in."""

from __future__ import annotations

from .base import Commands, Context, list_out, out


def add_commands(commands: Commands) -> None:
    """Register ``clusters`` and ``images``."""
    commands.add("clusters", cmd_clusters, "list the clusters the portal serves (the default first)")
    p = commands.add("images", cmd_images, "list the container images you may run jobs and sessions in")
    p.add_argument("--cluster", metavar="NAME", help="only this cluster's images")
    p.add_argument("--partition", metavar="NAME", help="only images this partition may use")
    p.add_argument("--kind", metavar="KIND", help="only images holding this session kind's server (e.g. jupyterlab)")


def cmd_clusters(ctx: Context) -> int:
    """``clusters``: ``GET /clusters`` as a table (NAME, SLURM, PARTITIONS, GPU TYPES, SESSIONS, NOTE)."""
    return list_out(
        ctx,
        ctx.client().list_clusters(),
        empty="No clusters.",
        headers=["NAME", "SLURM", "PARTITIONS", "GPU TYPES", "SESSIONS", "NOTE"],
        row=lambda c: (
            c.get("name", "") + (" (default)" if c.get("default") else ""),
            c.get("slurm_version") or "-",
            ",".join(c.get("partitions") or []) or "-",
            ",".join(c.get("gpu_types") or []) or "-",
            "yes" if c.get("sessions") else "no",
            (c.get("freshness") or {}).get("message", ""),
        ),
    )


def _image_where(image: dict) -> str:
    """Each cluster's last check of ``image``: ``cluster1 ok``, ``cluster2 not checked yet``, ``c3 NOT USABLE: why``."""
    parts = []
    for state in image.get("states") or []:
        said = (
            "ok"
            if state.get("available")
            else f"NOT USABLE: {state.get('reason', '')}"
            if state.get("checked")
            else "not checked yet"
        )
        parts.append(f"{state.get('cluster', '?')} {said}")
    return "; ".join(parts) or "-"


def cmd_images(ctx: Context) -> int:
    """``images [--cluster C] [--partition P] [--kind K]``: ``GET /images`` as a table (NAME, OS,
    PYTHON, CUDA, PARTITIONS, SESSIONS, ON THE CLUSTERS), then where none may be chosen (:func:`_none_said`)."""
    doc = ctx.client().list_images(ctx.args.cluster or "", ctx.args.partition or "", ctx.args.kind or "")
    code = list_out(
        ctx,
        doc,
        empty="No image you may use here.",
        headers=["NAME", "OS", "PYTHON", "CUDA", "PARTITIONS", "SESSIONS", "ON THE CLUSTERS"],
        row=lambda i: (
            i.get("name", ""),
            i.get("os") or "-",
            i.get("python_version") or "-",
            i.get("cuda_version") or "-",
            ",".join(i.get("partitions") or []) or "all",
            ",".join(i.get("offers") or []) or "-",
            _image_where(i),
        ),
    )
    if not ctx.json:
        out("Run in one: gpuportal submit FILE.yaml --image NAME" + _none_said(doc))
    return code


def _none_said(doc: dict) -> str:
    """Where ``--image none`` (the node's own system) may be chosen, from ``GET /images``: every batch
    job when ``none_allowed``; a session only on the clusters whose ``session_none_allowed`` is true
    (their nodes hold the site's Jupyter venv). An older portal's answer has no ``clusters``: none
    is then said as the site allows it, for every cluster."""
    if not doc.get("none_allowed"):
        return ""
    said = " (--image none: the node's own system"
    session_ones = [c for c in doc.get("clusters") or [] if c.get("sessions")]
    own = [c.get("cluster", "?") for c in session_ones if c.get("session_none_allowed")]
    if len(own) == len(session_ones):  # every session cluster too, no session cluster, or an older portal
        return said + ")"
    if own:
        return said + f"; for sessions, on {', '.join(own)} only)"
    lacking = ", ".join(c.get("cluster", "?") for c in session_ones)
    return said + f", for batch jobs only: a session on {lacking} needs an image)"
