"""Session pages. Thin: parse input, call one service, render."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone as djtz
from django.views.decorators.http import require_http_methods, require_POST

from jobs.reads.selectors import cluster_status
from jobs.submit.fields import SESSION_FORM
from jobs.support.bundle import bundle_zip
from jobs.support.gather import may_download
from jobs.support.session import session_gathered
from jobs.web import fragment_etags
from jobs.web.bundle_views import zip_response
from jobs.web.forms import reload_initial, reloaded
from jobs.web.fragment_etags import clusters_version, polled_fragment, rows_version, weak_etag
from portal.refusals import Refused, refusal_to_form
from slurm.clusters import session_clusters, session_partitions

from . import hub
from .forms import SessionForm
from .gpu_idle import gpu_rule_text, sessions_low_use
from .hub_check import hub_state_version
from .kinds import kinds_all
from .models import ACTIVE_SESSION_STATES, Session, SessionState
from .options import session_caps_now, session_cluster_choice, session_maintenance
from .services import cards_cluster, current_policy, session_cards, session_rows, session_start, session_stop
from .starts import no_team_problem


def _context(request: HttpRequest, form: SessionForm, cluster: str) -> dict:
    """The Sessions page's context for ``form`` of a new session on ``cluster``."""
    cards, warning = session_cards(user=request.user)
    kinds = kinds_all()
    offered = [k for k in kinds if k.available()]
    refused = {e for errors in form.errors.values() for e in errors} if form.is_bound else set()
    team = no_team_problem(request.user)
    caps = ([team.message] if team else []) + session_caps_now(user=request.user, cluster=cluster)  # why a start is refused now
    return {
        "caps": [s for s in caps if s not in refused],  # said once after a refusal
        "form": form,
        "cards": cards,
        "hub_warning": warning,
        "kinds": offered,
        "missing_kinds": [k for k in kinds if k not in offered],
        "idle_minutes": settings.PORTAL_SESSION_IDLE_MINUTES,
        "gpu_rule": gpu_rule_text(),
        "max_gpus": settings.PORTAL_SESSION_MAX_GPUS,
        "status": cluster_status(cards_cluster(cards, default=cluster)),
        "low_use": sessions_low_use(cards),
        "several_clusters": len(session_clusters()) > 1,  # each card then names its cluster
        "session_cluster": cluster,  # the site policy above the form speaks of it
        **_maintenance_ahead(form.data if form.is_bound else _shown(form), cluster=cluster),
    }


def _shown(form: SessionForm) -> dict:
    """The partition and hours an unbound ``form`` shows: its initial hours (they fit that partition), and
    its initial partition when the form offers it, else the first it offers (a reload after a change of
    cluster carries the old cluster's partition)."""
    offered = [value for value, _ in form.fields["partition"].widget.choices]
    partition = form["partition"].value()
    return {"partition": partition if partition in offered or not offered else offered[0], "hours": form["hours"].value()}


def _maintenance_ahead(data, *, cluster: str) -> dict:
    """Before a start on ``cluster``, from the form's ``partition`` and ``hours`` (the first session partition and
    the form's 2 h when not given): ``maintenance``, the clash of that session with a maintenance
    reservation on every node of the partition, and ``maintenance_longest``, that of the longest
    session the site allows (``PORTAL_SESSION_MAX_HOURS``); each ``None`` when there is none."""
    partition = str(data.get("partition") or next(iter(session_partitions(cluster)), ""))
    raw = str(data.get("hours") or "2").strip()
    hours = int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 4 else 0
    return {
        "maintenance": session_maintenance(cluster=cluster, partition=partition, hours=hours) if hours else None,
        "maintenance_longest": session_maintenance(cluster=cluster, partition=partition, hours=settings.PORTAL_SESSION_MAX_HOURS),
    }


@login_required
def session_maintenance_view(request: HttpRequest) -> HttpResponse:
    """HTMX fragment under the session form, before anything is sent: whether the session asked for
    (``partition``, ``hours``; POSTed by the form as the job form's estimate is, or GET) would run into maintenance (:mod:`jobs.reads.maintenance`, from the
    snapshot), and how long one may be to start now. Empty when there is nothing to say."""
    data = request.POST if request.method == "POST" else request.GET
    cluster, _refused = session_cluster_choice({"cluster": data.get("cluster", "")})  # a refused one: the default's
    return render(request, "interactive/_session_maintenance.html", _maintenance_ahead(data, cluster=cluster))


@login_required
@require_http_methods(["GET", "POST"])
def session_list(request: HttpRequest) -> HttpResponse:
    """Sessions: the launch form and one card per session. POST starts one; a refusal keeps the
    form as typed and says what to change. The cluster select's reload (a POST with
    ``form_reload=cluster``, :func:`jobs.web.forms.offer_clusters`) and ``?cluster=`` show that cluster's
    partitions, GPU types and images, keeping what was typed, and start nothing; the cluster a start
    names is checked by :func:`interactive.services.session_start`."""
    data = request.POST or request.GET
    cluster, _refused = session_cluster_choice({"cluster": data.get("cluster", "")})  # a refused one: said at the start
    initial = reload_initial(request, SessionForm)
    choices = [(c.name, c.label) for c in session_clusters()]
    form = SessionForm(
        request.POST if initial is None else None,
        initial=initial,
        policy=current_policy(cluster),
        accounts=request.user.slurm_accounts,
        clusters=choices,
    )
    if initial is None:
        if form.is_valid():
            try:
                session = session_start(user=request.user, raw_options=form.user_options())
            except Refused as refused:
                refusal_to_form(form, refused.renamed(SESSION_FORM))
            except hub.HubUnavailable as exc:
                form.add_error(None, str(exc))
            else:
                say_how_it_started(request, session)
                say_maintenance(request, session)
                return redirect("session_list")
        return render(request, "interactive/session_list.html", _context(request, form, cluster), status=400)
    response = render(request, "interactive/session_list.html", _context(request, form, cluster))
    return reloaded(response, request, reverse("session_list"), cluster)


def say_how_it_started(request: HttpRequest, session: Session) -> None:
    """The message after a start: "starting" only while it is; a start whose job already ended
    says so (its card shows the exit code and the last lines of the job's log)."""
    if session.failed:
        why = session.message.splitlines()[0] + " " if session.message else ""
        messages.error(request, f"The {session.ide_label} session did not start. {why}Its card below has the details.")
    elif session.state == SessionState.RUNNING:
        messages.success(request, f"{session.ide_label} session is running: open it from its card.")
    else:
        messages.success(request, f"{session.ide_label} session is starting.")


def say_maintenance(request: HttpRequest, session: Session) -> None:
    """The warning after a start whose hours run into a maintenance reservation on every node of its
    partition (:func:`interactive.options.session_maintenance`, from the snapshot): Slurm holds it
    until the window is over. Nothing when it does not."""
    clash = session_maintenance(cluster=session.on_cluster, partition=session.partition, hours=session.time_limit_min // 60)
    if clash:
        messages.warning(request, clash.html)


def session_cards_etag(request: HttpRequest) -> str | None:
    """The Sessions fragment's weak ETag (:mod:`jobs.web.fragment_etags`): the sessions cluster's snapshot
    head, accounting and GPU usage read times, the user's rows the cards show (their count and a
    digest), while one of them is active what the periodic check stored of JupyterHub for them
    (:func:`interactive.hub_check.hub_state_version`: a check that finds a server ready, gone or
    with a new progress message changes it), and the clock bucket (the cards print relative times)."""
    rows = rows_version(session_rows(user=request.user), columns=("state",))
    active = any(state in ACTIVE_SESSION_STATES for (state,) in rows[2])
    hub_version = hub_state_version(request.user.username) if active else None
    clusters = sorted({s.on_cluster for s in session_rows(user=request.user)} or {session_clusters()[0].name})
    return weak_etag(request, clusters_version(clusters), rows, hub_version, fragment_etags.clock_bucket())


@login_required
@polled_fragment(session_cards_etag)
def session_cards_view(request: HttpRequest) -> HttpResponse:
    """HTMX fragment: the cards, refreshed every few seconds; ``304 Not Modified`` when its ETag
    (:func:`session_cards_etag`) matches the browser's ``If-None-Match``. A read: no hub call, no write."""
    cards, warning = session_cards(user=request.user)
    status = cluster_status(cards_cluster(cards))
    return render(
        request,
        "interactive/_cards.html",
        {
            "cards": cards,
            "hub_warning": warning,
            "status": status,
            "low_use": sessions_low_use(cards),
            "several_clusters": len(session_clusters()) > 1,
        },
    )


@login_required
@require_POST
def session_stop_view(request: HttpRequest, key) -> HttpResponse:
    """Stop (running) or cancel (pending) one of the user's sessions."""
    session = Session.objects.filter(key=key).select_related("user").first()
    if session is None or (session.user_id != request.user.pk and not request.user.is_staff):
        raise Http404("No such session.")
    if not session.is_active and session.user_id == request.user.pk:
        messages.info(request, f"This {session.ide_label} session had already ended.")
        return redirect("session_list")
    try:
        session_stop(session=session, by=request.user)
    except PermissionDenied:
        raise
    except hub.HubError as exc:
        messages.error(request, f"The session could not be stopped: {exc}")
    else:
        messages.success(request, f"{session.ide_label} session stopped.")
    return redirect("session_list")


@login_required
def session_support_bundle(request: HttpRequest, key) -> HttpResponse:
    """The session's support bundle (:mod:`jobs.support.session`),
    ``support-<cluster>-session-<Slurm job id or key>.zip``: for its owner, the leads of its team and
    portal admins; 404 for anyone else. Slurm being unreachable leaves parts out, never a 500."""
    session = Session.objects.filter(key=key).select_related("user").first()
    if session is None or not may_download(request.user, owner_id=session.user_id, account=session.account):
        raise Http404("No such session, or it is not yours.")
    cluster = session.on_cluster  # where the portal sent its job
    gathered = session_gathered(session, cluster=cluster)
    name = gathered.settings.get("slurm_job_id") or session.key
    return zip_response(bundle_zip(gathered, made_at=djtz.now()), f"support-{cluster}-session-{name}.zip")
