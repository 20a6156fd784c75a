"""``{% site_policy_lines as lines %}``: the site policy's sentences for the pages where people choose
resources (job form, session form, profile editor; :func:`teams.site_policy.policy_lines`, from settings
and the stored snapshots' partitions: no Slurm call)."""

from dataclasses import replace

from django import template

from slurm.clusters import cluster_names, default_sessions_cluster, session_clusters
from slurm.snapshot import snapshot_load
from teams.site_policy import policy_lines, site_policy

register = template.Library()


def pool_nodes(partition: str, among: list[str] | None = None) -> str:
    """The pool partition's nodes on each cluster whose stored snapshot has it: "node3" on a site of
    one cluster, "node3 on cluster1, g2 on cluster2" on several; "" when none is known yet.
    ``among``: only these clusters (default: every configured one)."""
    names = cluster_names()
    found = []
    for name in names if among is None else [n for n in names if n in among]:
        snapshot = snapshot_load(with_jobs=False, cluster=name)
        part = next((p for p in (snapshot.partitions if snapshot else ()) if p.name == partition), None)
        if part is not None and part.nodes:
            found.append(", ".join(part.nodes) + (f" on {name}" if len(names) > 1 else ""))
    return "; ".join(found)


@register.simple_tag
def site_policy_lines(sessions: bool = False, cluster: str = "") -> list[str]:
    """The caps and the small-job pool as sentences ([] when the site manages none). ``sessions``: for
    the session form of ``cluster`` (the selected one; "": the default session cluster), where the pool is
    named, as one sessions may use, only when that cluster's ``session_partitions`` include it (a session
    there could never use it otherwise)."""
    try:
        policy = site_policy()
    except ValueError:
        return []
    pool = policy.pool
    if not pool.managed:
        return policy_lines(policy)
    if not sessions:
        return policy_lines(policy, pool_nodes=pool_nodes(pool.partition))
    chosen = next((c for c in session_clusters() if c.name == cluster), default_sessions_cluster())
    if pool.partition not in chosen.session_partitions:
        return policy_lines(replace(policy, pool=replace(pool, partition="")))
    return policy_lines(policy, pool_nodes=pool_nodes(pool.partition, [chosen.name]), what="Sessions")
