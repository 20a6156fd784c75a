"""The cluster page's node rows as HTML, built here rather than in a template: 500 nodes with ~13 jobs
each are ~10,000 template nodes, which Django's template engine renders in ~0.3 s; the same rows
joined from escaped strings take a few milliseconds (bench/cluster_page.py, docs/benchmarks.md). What
each cell says is the template's rule of the page (``templates/ops/_cluster_body.html`` includes the
result); every value from Slurm is escaped (the standard library's :func:`html.escape`, quotes included:
what Django's ``escape`` calls, without its wrapper per call)."""

from __future__ import annotations

from html import escape

from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from portal.formats import unix_time

from .cluster import ClusterPage, NodeRow

#: Jobs listed per node; the rest are counted ("and 5 more").
JOBS_SHOWN = 8


def node_rows(cluster: str, rows: list[NodeRow], *, drained_by: dict, service_user: str, csrf_token: str) -> SafeString:
    """The ``<tr>`` of every node of ``rows`` (:func:`ops.cluster.node_rows_of`) of ``cluster``: name,
    state exactly as Slurm writes it (and in words, and "(unavailable)"), the reason with who and when
    (``drained_by``: node -> its newest ``node.drain`` audit row), GPUs by type, CPUs, memory, its
    jobs (linked to their portal pages), and Resume (a POST form with ``csrf_token``) or a Drain link."""
    job_url = reverse("job_detail", args=[_UUID]).replace(_UUID, "{}")
    resume_url = reverse("node_resume", args=[cluster, "NODE"]).replace("NODE", "{}")
    token = escape(csrf_token)
    out = []
    for row in rows:
        node = row.node
        name = escape(node.name)
        gpus = (
            "<br>".join(f"{escape(t or 'gpu')} {used} / {total}" for t, used, total in row.gpus)
            or '<span class="muted">none</span>'
        )
        if row.resumable:
            action = (
                f'<form method="post" action="{escape(resume_url.format(node.name))}" class="inline">'
                f'<input type="hidden" name="csrfmiddlewaretoken" value="{token}">'
                f'<button type="submit" data-testid="resume-{name}" aria-label="Resume {name}">Resume</button></form>'
            )
        else:
            action = f'<a href="?node={name}#drain" aria-label="Drain {name}">Drain…</a>'
        css = ' class="unavailable"' if not node.available else ""
        out.append(
            f'<tr data-node="{name}" data-state="{escape(row.state_text)}"{css}>'
            f'<th scope="row">{name}</th><td>{_state_cell(row)}</td><td>{_reason_cell(node, drained_by, service_user)}</td>'
            f'<td class="num">{gpus}</td><td class="num">{node.alloc_cpus} / {node.cpus}</td>'
            f'<td class="num">{node.alloc_memory} / {node.real_memory} MiB</td>'
            f"<td>{_jobs_cell(row, job_url)}</td><td>{action}</td></tr>"
        )
    return mark_safe("\n".join(out))  # noqa: S308 - every value above is escaped


_UUID = "00000000-0000-0000-0000-000000000000"


def _state_cell(row: NodeRow) -> str:
    """The state as Slurm writes it, sinfo's ``*`` form, "(unavailable)" and the flags in words."""
    state = f'<code data-testid="node-state">{escape(row.state_text)}</code>'
    if row.short.endswith("*"):  # sinfo's mark of a node that does not respond: down*, idle*
        state += f' <span class="small" data-testid="node-short">(sinfo: {escape(row.short)})</span>'
    if not row.node.available:
        state += ' <span class="small">(unavailable)</span>'
    if row.words:
        state += f'<br><span class="muted small">{escape("; ".join(row.words))}</span>'
    return state


def _reason_cell(node, drained_by: dict, service_user: str) -> str:
    """The reason, who set it ("(the portal)" and the admin when the service user did) and when."""
    if not node.reason:
        return ""
    who = escape(node.reason_set_by or "?")
    if node.reason_set_by and node.reason_set_by == service_user:
        who += " (the portal)"
    event = drained_by.get(node.name)
    if event is not None:
        who += f", drained through the portal by {escape(event.actor.username if event.actor else '?')}"
    if node.reason_changed_at:
        who += f", {escape(unix_time(node.reason_changed_at))}"
    return f'<span data-testid="node-reason">{escape(node.reason)}</span><br><span class="muted small">by {who}</span>'


def _jobs_cell(row: NodeRow, job_url: str) -> str:
    """The first :data:`JOBS_SHOWN` jobs (linked where the portal has the row), the rest counted."""
    jobs = []
    for job in row.jobs[:JOBS_SHOWN]:
        shown = escape(job.shown)
        link = f'<a href="{job_url.format(job.key)}">{shown}</a>' if job.key else shown
        jobs.append(f'{link} <span class="muted small">{escape(job.user)}</span>')
    html = ", ".join(jobs) or '<span class="muted">none</span>'
    if len(row.jobs) > JOBS_SHOWN:
        html += f' <span class="muted small">and {len(row.jobs) - JOBS_SHOWN} more</span>'
    return html


def node_options(page: ClusterPage, selected: str) -> SafeString:
    """The drain form's ``<option>`` of every node (``selected`` chosen), as :func:`node_rows` builds
    rows; from ``page.options_html`` (kept with the snapshot, :mod:`ops.cluster_cache`) when set."""
    options = page.options_html or node_options_of(page.node_names)
    if selected:
        mark = f'<option value="{escape(selected)}">'
        options = options.replace(mark, mark[:-1] + " selected>", 1)
    return mark_safe(options)  # noqa: S308 - escaped


def node_options_of(names: list[str]) -> str:
    """An ``<option>`` per node name, none selected (escaped HTML)."""
    return "".join(f'<option value="{escape(n)}">{escape(n)}</option>' for n in names)
