"""Session pages. Thin: parse input, call one service, render."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from jobs.fields import SESSION_FORM
from jobs.selectors import cluster_status
from portal.refusals import Refused, refusal_to_form
from slurm.clusters import sessions_cluster

from . import hub
from .forms import SessionForm
from .gpu_flags import sessions_low_use
from .kinds import kinds_all
from .models import Session, SessionState
from .options import session_maintenance
from .services import current_policy, session_cards, session_start, session_stop


def _context(request: HttpRequest, form: SessionForm) -> dict:
    cards, warning = session_cards(user=request.user)
    kinds = kinds_all()
    offered = [k for k in kinds if k.available()]
    return {
        "form": form,
        "cards": cards,
        "hub_warning": warning,
        "kinds": offered,
        "missing_kinds": [k for k in kinds if k not in offered],
        "idle_minutes": settings.SESSION_IDLE_MINUTES,
        "max_gpus": settings.SESSION_MAX_GPUS,
        "status": cluster_status(sessions_cluster().name),
        "low_use": sessions_low_use(cards),
        "maintenance": _maintenance_ahead(form),
    }


def _maintenance_ahead(form: SessionForm):
    """Before a start: the clash of the longest session the form allows (``PORTAL_SESSION_MAX_HOURS``)
    with a maintenance reservation on the partition chosen (or the first session partition), or
    ``None``: the form says how long a session may be to start now."""
    partition = form.data.get("partition") if form.is_bound else None
    partition = partition or (settings.SESSION_PARTITIONS[0] if settings.SESSION_PARTITIONS else "")
    return session_maintenance(cluster=sessions_cluster().name, partition=str(partition), hours=settings.SESSION_MAX_HOURS)


@login_required
@require_http_methods(["GET", "POST"])
def session_list(request: HttpRequest) -> HttpResponse:
    """Sessions: the launch form and one card per session. POST starts one; a refusal keeps the
    form as typed and says what to change."""
    form = SessionForm(request.POST or None, policy=current_policy())
    if request.method == "POST":
        if form.is_valid():
            try:
                session = session_start(user=request.user, raw_options=form.user_options())
            except Refused as refused:
                refusal_to_form(form, refused.renamed(SESSION_FORM))
            except hub.HubUnavailable as exc:
                form.add_error(None, str(exc))
            else:
                say_how_it_started(request, session)
                clash = session_maintenance(
                    cluster=sessions_cluster().name, partition=session.partition, hours=session.time_limit_min // 60
                )
                if clash:
                    messages.warning(request, clash.html)
                return redirect("session_list")
        return render(request, "interactive/session_list.html", _context(request, form), status=400)
    return render(request, "interactive/session_list.html", _context(request, form))


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


@login_required
def session_cards_view(request: HttpRequest) -> HttpResponse:
    """HTMX fragment: the cards, refreshed every few seconds."""
    cards, warning = session_cards(user=request.user)
    status = cluster_status(sessions_cluster().name)
    return render(
        request,
        "interactive/_cards.html",
        {"cards": cards, "hub_warning": warning, "status": status, "low_use": sessions_low_use(cards)},
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
