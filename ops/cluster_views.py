"""The cluster page (admins): one configured cluster's nodes, partitions and reservations from the
snapshot (:mod:`ops.cluster`), its HTMX body refreshed every snapshot interval, and the forms that
drain or resume a node and plan or delete a maintenance reservation (:mod:`ops.nodes`,
:mod:`ops.reservations`). The body answers ``304 Not Modified`` while what it shows has not changed
(:func:`cluster_body_etag`), as My jobs' table does. A GET never calls Slurm; each POST runs one
bounded ``scontrol`` as the service user. A refusal shows on the page (400) in its own words or
Slurm's; anyone but a portal admin gets 403, a cluster that is not configured 404."""

from __future__ import annotations

import time
from functools import wraps

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.shortcuts import redirect, render
from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_POST

from jobs.web.fragment_etags import polled_fragment, weak_etag
from portal.refusals import Refused, refusal_to_form

from .cluster import ClusterPage
from .cluster_cache import CSRF_MARK, body_version, cluster_page_kept
from .cluster_forms import DrainForm, ReservationForm
from .cluster_html import node_options
from .nodes import node_drain, node_resume
from .reservations import reservation_create, reservation_delete

FORBIDDEN = "The cluster page is for portal admins."


def _forbidden(request: HttpRequest, message: str = FORBIDDEN) -> HttpResponse:
    return render(request, "teams/forbidden.html", {"message": message}, status=403)


def _page(name: str | None) -> ClusterPage:
    page = cluster_page_kept(name)
    if page is None:
        raise Http404("No such cluster is configured.")
    return page


def _body_context(request: HttpRequest, page: ClusterPage) -> dict:
    return {
        "page": page,
        "service_user": page.cluster.gateway.get("ssh_user", ""),
        # every value in the kept rows was escaped where they were built (ops/cluster_html.py)
        "node_rows": mark_safe(page.rows_html.replace(CSRF_MARK, escape(get_token(request)))),  # noqa: S308
        "refresh_seconds": max(2, int(settings.PORTAL_SNAPSHOT_INTERVAL)),
        "checked_at": time.time(),
    }


def _render(request, page: ClusterPage, *, drain: DrainForm | None = None, reserve: ReservationForm | None = None, status=200):
    context = _body_context(request, page)
    context["drain_form"] = drain = drain or DrainForm(initial={"node": request.GET.get("node", "")})
    context["node_options"] = node_options(page, str(drain["node"].value() or ""))
    context["reservation_form"] = reserve or ReservationForm()
    context["action_error"] = getattr(request, "_ops_error", "")
    return render(request, "ops/cluster.html", context, status=status)


@login_required
@require_GET
def cluster_view(request: HttpRequest, name: str | None = None) -> HttpResponse:
    """GET: the page of cluster ``name`` (default: the first configured)."""
    if not request.user.is_staff:
        return _forbidden(request)
    return _render(request, _page(name))


def cluster_body_etag(request: HttpRequest) -> str | None:
    """The body's weak ETag (:mod:`jobs.web.fragment_etags`): a digest of
    :func:`ops.cluster_cache.body_version` (no clock in it: the body prints no relative time; the
    page's "Checked 3 s ago" is ticked by ``portal.js``) and of the request's CSRF secret, which the
    body's Resume and Delete forms carry (a 304 keeps the forms' masked tokens, valid while the
    secret is the same). ``None`` (render in full) for anyone but an admin and for a cluster that is
    not configured."""
    name = request.resolver_match.kwargs.get("name", "") if request.resolver_match else ""
    version = body_version(name) if request.user.is_staff else None
    if version is None:
        return None
    get_token(request)  # the secret is read (or made) here, as the body's forms would
    return weak_etag(request, version, request.META.get("CSRF_COOKIE", ""))


@login_required
@require_GET
@polled_fragment(cluster_body_etag)
def cluster_body(request: HttpRequest, name: str) -> HttpResponse:
    """HTMX fragment: the page's body (freshness, nodes, partitions, reservations); ``304`` when the
    browser's ``If-None-Match`` is the body's :func:`cluster_body_etag`."""
    if not request.user.is_staff:
        return _forbidden(request)
    return render(request, "ops/_cluster_body.html", _body_context(request, _page(name)))


def _refused(request, page: ClusterPage, refused: Refused, **forms) -> HttpResponse:
    form = next(iter(forms.values()), None)
    if form is not None:
        refusal_to_form(form, refused)
    else:
        request._ops_error = str(refused)
    return _render(request, page, status=400, **forms)


def _staff_post(view):
    """A POST action of the cluster page: signed in, POST only, a portal admin (else 403), a
    configured cluster (else 404); ``view`` gets the :class:`ClusterPage` in place of the name."""

    @login_required
    @require_POST
    @wraps(view)
    def wrapped(request: HttpRequest, name: str, *args, **kwargs) -> HttpResponse:
        if not request.user.is_staff:
            return _forbidden(request)
        return view(request, _page(name), *args, **kwargs)

    return wrapped


def _act(request: HttpRequest, page: ClusterPage, run, said, **forms) -> HttpResponse:
    """Run one action (``run()``, from :mod:`ops.nodes` / :mod:`ops.reservations`): on success the
    message ``said(done)`` and back to the page; a refusal is the page (400) with it on ``forms``'
    form (or above the page); an action the user may not take is 403."""
    try:
        done = run()
    except PermissionDenied as exc:
        return _forbidden(request, str(exc))
    except Refused as refused:
        return _refused(request, page, refused, **forms)
    messages.success(request, said(done))
    return redirect("cluster_named", name=page.cluster.name)


@_staff_post
def node_drain_view(request: HttpRequest, page: ClusterPage) -> HttpResponse:
    """POST ``node``, ``reason``: drain the node."""
    form = DrainForm(request.POST)
    if not form.is_valid():  # a reason over the service's limit: said once, in its words
        return _render(request, page, drain=form, status=400)
    data = form.cleaned_data
    return _act(
        request,
        page,
        lambda: node_drain(cluster=page.cluster.name, node=data.get("node", ""), reason=data.get("reason", ""), by=request.user),
        lambda done: f"{done.node} is draining: Slurm starts no new job there; running jobs finish. Reason: {done.new['reason']}",
        drain=form,
    )


@_staff_post
def node_resume_view(request: HttpRequest, page: ClusterPage, node: str) -> HttpResponse:
    """POST: resume ``node``."""
    return _act(
        request,
        page,
        lambda: node_resume(cluster=page.cluster.name, node=node, by=request.user),
        lambda done: f"{done.node} is resumed: Slurm may start jobs there again.",
    )


@_staff_post
def reservation_create_view(request: HttpRequest, page: ClusterPage) -> HttpResponse:
    """POST the :class:`ReservationForm`: create a maintenance reservation."""
    form = ReservationForm(request.POST)
    if not form.is_valid():
        return _render(request, page, reserve=form, status=400)
    return _act(
        request,
        page,
        lambda: reservation_create(cluster=page.cluster.name, by=request.user, **form.values()),
        lambda done: (
            f"Maintenance reservation {done.name} made on {done.new['nodes']} from {done.window()}; "
            "it shows below after the next poll."
        ),
        reserve=form,
    )


@_staff_post
def reservation_delete_view(request: HttpRequest, page: ClusterPage, reservation: str) -> HttpResponse:
    """POST: delete reservation ``reservation``."""
    return _act(
        request,
        page,
        lambda: reservation_delete(cluster=page.cluster.name, name=reservation, by=request.user),
        lambda done: f"Reservation {done.name} deleted.",
    )
