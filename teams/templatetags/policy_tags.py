"""``{% site_policy_lines as lines %}``: the site policy's sentences for the pages where people choose
resources (job form, session form, profile editor; :func:`teams.site_policy.policy_lines`, from settings
and the stored snapshots' partitions: no Slurm call)."""

from django import template

from slurm.clusters import cluster_names
from slurm.snapshot import snapshot_load
from teams.site_policy import policy_lines, site_policy

register = template.Library()


def pool_nodes(partition: str) -> str:
    """The pool partition's nodes on each cluster whose stored snapshot has it: "node3" on a site of
    one cluster, "node3 on cluster1, g2 on cluster2" on several; "" when none is known yet."""
    names = cluster_names()
    found = []
    for name in names:
        snapshot = snapshot_load(with_jobs=False, cluster=name)
        part = next((p for p in (snapshot.partitions if snapshot else ()) if p.name == partition), None)
        if part is not None and part.nodes:
            found.append(", ".join(part.nodes) + (f" on {name}" if len(names) > 1 else ""))
    return "; ".join(found)


@register.simple_tag
def site_policy_lines() -> list[str]:
    """The caps and the small-job pool as sentences ([] when the site manages none)."""
    try:
        pool = site_policy().pool
    except ValueError:
        return []
    return policy_lines(pool_nodes=pool_nodes(pool.partition) if pool.managed else "")
