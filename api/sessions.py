"""``/api/v1/sessions``: interactive sessions (JupyterHub named servers) of the kinds in
:mod:`interactive.kinds` (``GET /sessions/kinds`` lists them), with the same options, policy and
session rules as the Sessions page (:func:`interactive.services.session_start`)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from http import HTTPStatus
from typing import Any

from django.http import Http404
from ninja import Field, Router, Schema, Status
from ninja.errors import HttpError
from pydantic import field_validator

from interactive import hub
from interactive.kinds import SessionKind, kind_default, kinds_all
from interactive.models import Session
from interactive.options import session_caps_now, session_cluster_choice, session_images, session_maintenance
from interactive.services import SessionCard, cards_cluster, session_cards, session_start, session_stop
from jobs.reads.selectors import cluster_status
from jobs.submit.fields import SESSION_API
from jobs.submit.policy import MOST_CPUS
from portal.refusals import Problem, Refused
from portal.units import MemoryRefusal, memory_mib

from .base import need_scope
from .schemas import ErrorOut, FreshnessOut, In

router = Router(tags=["sessions"])


class SessionOut(Schema):
    key: str
    name: str = Field(description="The JupyterHub named server")
    ide: str = Field(description="The session's kind (a name from GET /sessions/kinds)")
    state: str = Field(description="REQUESTED, STARTING, RUNNING, STOPPED or FAILED")
    phase: str = Field(description="queued, starting, running, ended or unknown (JupyterHub unreachable)")
    url: str | None = Field(None, description="Where to open it, once running")
    partition: str
    gpu_type: str
    gpu_count: int
    cpus: int
    memory_mb: int
    time_limit_min: int
    image: str = Field("", description="The site image the server runs in (GET /images); empty: the node's own system")
    cluster: str = Field("", description="The cluster it runs on (chosen at the start: POST /sessions cluster)")
    account: str = Field(
        "", description="The team (Slurm account) it is billed to (empty: started before sessions were billed to a team)"
    )
    message: str
    explanation: str
    position: int | None = None
    estimated_start: datetime | None = None
    time_left_s: int | None = None
    created_at: datetime
    warnings: list[str] = Field(
        default_factory=list,
        description="At the start (POST /sessions) only: what will keep it from starting although it was accepted, "
        'e.g. "This session cannot start before ... because it would run into maintenance (reservation ... on '
        'partition interactive); ask for at most 2 h to start now."',
    )


class SessionList(Schema):
    items: list[SessionOut]
    count: int
    warning: str = Field(
        "", description="Cluster unreachable since ... (as for jobs), and/or JupyterHub unreachable: states may be out of date"
    )
    freshness: FreshnessOut


class SessionIn(In):
    ide: str | None = Field(
        None, max_length=16, description="A session kind's name (GET /sessions/kinds); omitted: the default kind"
    )
    partition: str | None = Field(None, max_length=64)
    gpus: int = Field(0, ge=0, le=64)
    gpu_type: str = Field("", max_length=64)
    cpus: int = Field(2, ge=1, le=MOST_CPUS)  # below it, the site policy names the node's own figure
    memory: str | int | float | None = Field(
        None,
        description="Memory as on the Sessions page: 4G, 4000M, 1.5T (binary units, as Slurm's --mem), or a bare"
        " number, which means GB (1024 or more without a unit is refused as unclear); omitted: 4G",
        examples=["4G"],
    )
    memory_gb: float | None = Field(None, gt=0, description="Kept for older clients: memory in GB (use memory)")
    hours: int = Field(2, ge=1, le=1000)
    image: str | None = Field(
        None,
        max_length=64,
        description="A site image holding this kind's server (GET /sessions/kinds: images), by name; omitted or"
        " \"none\": the node's own system, where the site allows it and the cluster's nodes hold the Jupyter venv"
        " (else refused, naming the images to choose)",
    )
    account: str | None = Field(
        None,
        max_length=64,
        description="The team (Slurm account) to bill it to, one of your teams (GET /me); omitted: your first team, as for a job",
    )

    cluster: str | None = Field(
        None,
        max_length=64,
        description="A cluster sessions run on (GET /clusters: sessions); omitted: the default one (the first of them)",
    )

    @field_validator("memory", mode="before")
    @classmethod
    def _memory(cls, value: Any) -> Any:
        """Read as sent by the one reader (so ``true`` is refused, not taken as 1 GB); its sentence
        is the field's error. The router converts it (``api.sessions``)."""
        if value is not None:
            memory_mib(value)
        return value


class SessionKindOut(Schema):
    name: str = Field(description="The value of a session's ide field")
    label: str = Field(description="What people read, e.g. JupyterLab")
    available: bool = Field(description="Whether this site offers it now (what it needs is installed)")
    note: str = Field(description="Why it is not offered (empty when it is)")
    images: list[str] = Field(
        default_factory=list,
        description="The site images that hold this kind's server (their offers), for a session's image field",
    )


class SessionKindList(Schema):
    items: list[SessionKindOut]
    count: int
    default: str = Field(description="The kind a start without ide gets")
    caps: list[str] = Field(
        default_factory=list,
        description="The per-person caps you are at now, one sentence each, as POST /sessions would refuse a start"
        " (every start, or every start with GPUs at the GPU cap); empty when none",
    )


ERRORS = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 503: ErrorOut}


def session_out(card: SessionCard) -> dict:
    s = card.session
    return {
        "key": str(s.key),
        "name": s.server_name,
        "ide": s.ide,
        "state": s.state,
        "phase": card.phase,
        "url": card.open_url or None,
        "partition": s.partition,
        "gpu_type": s.gpu_type,
        "gpu_count": s.gpu_count,
        "cpus": s.cpus,
        "memory_mb": s.memory_mb,
        "time_limit_min": s.time_limit_min,
        "image": s.image_name,
        "account": s.account,
        "cluster": s.on_cluster,
        "message": s.message,
        "explanation": card.line,
        "position": card.position,
        "estimated_start": card.estimate,
        "time_left_s": card.time_left_s,
        "created_at": s.created_at,
    }


def _card(request, name: str) -> SessionCard:
    if not Session.objects.filter(user=request.user, server_name=name).exists():
        raise Http404("No such session, or it is not yours.")
    cards, _ = session_cards(user=request.user, recent_seconds=7 * 86400)
    for card in cards:
        if card.session.server_name == name:
            return card
    raise Http404("That session ended more than a week ago.")


@router.get("", response={200: SessionList, **ERRORS}, summary="Your sessions (active, and ended in the last hour)")
def list_sessions(request):
    need_scope(request, "read")
    cards, hub_warning = session_cards(user=request.user)
    status = cluster_status(cards_cluster(cards))
    warning = " ".join(w for w in (status.unreachable, hub_warning) if w)
    return {"items": [session_out(c) for c in cards], "count": len(cards), "warning": warning, "freshness": status.as_api()}


def kind_out(kind: SessionKind, cluster: str = "") -> dict:
    return {
        "name": kind.name,
        "label": kind.label,
        "available": kind.available(),
        "note": kind.unavailable_reason(),
        "images": [image.name for image in session_images(kind, cluster=cluster)],
    }


@router.get("/kinds", response={200: SessionKindList, **ERRORS}, summary="The kinds of session this site has (the ide values)")
def list_kinds(request, cluster: str = ""):
    """``cluster``: the images and caps of a session there (omitted: the default session cluster)."""
    need_scope(request, "read")
    named = cluster
    cluster, refused = session_cluster_choice({"cluster": named})
    if refused and named:  # the default cluster being down is said when a session is started there, not here
        raise Refused(*refused, detail="No such cluster for sessions; see errors.")
    kinds = kinds_all()
    caps = session_caps_now(user=request.user, cluster=cluster)  # from the Session rows and the stored snapshot
    return {"items": [kind_out(k, cluster) for k in kinds], "count": len(kinds), "default": kind_default().name, "caps": caps}


def _memory_mib(body: SessionIn) -> int:
    """The body's ``memory`` (or the older ``memory_gb``, GB) in MiB, read by the one reader
    :func:`portal.units.memory_mib`; 4G when neither is given. Raises :class:`Refused` on the field
    that was given."""
    if body.memory is not None and body.memory_gb is not None:
        raise Refused(Problem("memory", "Give memory or memory_gb, not both (memory takes 4G, 4000M or 1.5T)."))
    field, value = ("memory_gb", f"{Decimal(str(body.memory_gb)):f}G") if body.memory_gb is not None else ("memory", body.memory)
    try:
        return memory_mib("4G" if value is None else value)
    except MemoryRefusal as exc:
        raise Refused(Problem(field, str(exc)), detail="The session cannot be started; see errors.") from None


@router.post("", response={201: SessionOut, **ERRORS}, summary="Start a session (of a kind from GET /sessions/kinds)")
def start_session(request, body: SessionIn):
    need_scope(request, "sessions")
    options = {
        "gpu_count": body.gpus,
        "gpu_type": body.gpu_type,
        "cpus": body.cpus,
        "memory_mb": _memory_mib(body),
        "hours": body.hours,
    }
    if body.ide is not None:
        options["ide"] = body.ide
    if body.partition is not None:
        options["partition"] = body.partition
    if body.image is not None:
        options["image"] = body.image
    if body.account is not None:
        options["account"] = body.account
    if body.cluster is not None:
        options["cluster"] = body.cluster
    try:
        session = session_start(user=request.user, raw_options=options)
    except Refused as refused:
        raise Refused(*refused.renamed(SESSION_API).problems, detail="The session cannot be started; see errors.") from None
    except hub.HubUnavailable as exc:
        raise HttpError(503, f"JupyterHub could not be reached, so the session was not started: {exc}") from None
    clash = session_maintenance(cluster=session.on_cluster, partition=session.partition, hours=session.time_limit_min // 60)
    out = session_out(_card(request, session.server_name))
    return Status(HTTPStatus.CREATED, {**out, "warnings": [clash.text] if clash else []})


@router.get("/{name}", response={200: SessionOut, **ERRORS}, summary="One session, by its named server")
def get_session(request, name: str):
    need_scope(request, "read")
    return session_out(_card(request, name))


@router.delete("/{name}", response={202: SessionOut, **ERRORS}, summary="Stop a session (or cancel a queued one)")
def stop_session(request, name: str):
    need_scope(request, "sessions")
    session = Session.objects.filter(user=request.user, server_name=name).order_by("-created_at").first()
    if session is None:
        raise Http404("No such session, or it is not yours.")
    try:
        session_stop(session=session, by=request.user)
    except hub.HubUnavailable as exc:
        raise HttpError(503, f"JupyterHub could not be reached, so the session was not stopped: {exc}") from None
    return Status(HTTPStatus.ACCEPTED, session_out(_card(request, name)))
