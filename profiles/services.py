"""Checking, saving, sharing, cloning and running job profiles.

A profile is checked in three layers, each problem pointing at a field (and its line in the file):
the schema (:mod:`profiles.schema`), what the site offers for environments (Python versions, CUDA
modules, containers: :class:`profiles.envscript.EnvSite`), and the same site policy and team check
as the job form (:func:`jobs.submit.submit.job_check`, its field names re-keyed to the profile's by
:data:`jobs.submit.fields.PROFILE`). A refusal is one :class:`portal.refusals.Refused` with every problem.
Running a profile is ``job_create`` with that checked request, whose script is rendered by
:func:`profiles.envscript.render_profile_script`.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction

from accounts.models import User
from audit.services import audit
from jobs.models import Job
from jobs.submit.fields import PROFILE
from jobs.submit.policy import JobRequest
from jobs.submit.submit import CheckedRequest, job_check, job_create
from portal.refusals import Problem, Refused
from teams.models import Membership, Team

from .document import apply_overrides, dump_yaml, line_of, load_yaml
from .envscript import EnvImage, EnvSite, render_profile_script
from .models import Profile
from .schema import ProfileSpec, parse_profile


def _path_error(path: str, field: str) -> str | None:
    if not path:
        return None
    if "\x00" in path or "\n" in path or "\r" in path:
        return "Must be one line without control characters."
    if path.startswith("/") and field != "run.workdir":
        return "Must be a path relative to the project directory (run.workdir)."
    if ".." in path.split("/") and field != "run.workdir":  # the site policy refuses it there, in its words
        return "Must not contain '..'."
    return None


def site_errors(spec: ProfileSpec, site: EnvSite, image: EnvImage | None = None) -> list[Problem]:
    """What the site does not offer: Python versions, CUDA modules, conda, several nodes; in an
    ``image`` (the checked image of ``spec.image``), a Python other than the image's or a CUDA module
    (environment modules are the node's, not the image's); and entry-point paths that leave the
    project directory."""
    errors: list[Problem] = []
    env = spec.environment
    if spec.nodes != 1:
        errors.append(
            Problem("resources.nodes", "Jobs run on one node in this version; set resources.nodes to 1 (up to 8 GPUs per node).")
        )
    if env is not None and image is not None:
        if env.get("python") and not image.python_matches(env["python"]):
            errors.append(
                Problem(
                    "environment.python",
                    f"The image {image.name} has Python {image.python}; the environment is built on top of it. "
                    f'Write python: "{image.python}" or leave environment.python out.',
                )
            )
        if env.get("cuda"):
            errors.append(
                Problem(
                    "environment.cuda",
                    f"In the image {image.name} CUDA comes from the image (environment modules are the node's); "
                    "remove environment.cuda, or choose image: none to load a CUDA module on the node.",
                )
            )
    elif env is not None:
        if env.get("python") and env["python"] not in site.pythons:
            errors.append(
                Problem("environment.python", f"Python {env['python']} is not offered here. Offered: {', '.join(site.pythons)}.")
            )
        if env.get("cuda") and env["cuda"] not in site.cuda_modules:
            offered = ", ".join(sorted(site.cuda_modules)) or "none (this cluster has no CUDA environment modules configured)"
            errors.append(Problem("environment.cuda", f"CUDA {env['cuda']} is not offered here. Offered: {offered}."))
    if env is not None and env.get("conda"):
        errors.append(
            Problem(
                "environment.conda",
                "Conda environment files are not supported here (no conda channel is reachable from the cluster). List the packages under environment.pip or in a requirements file.",
            )
        )
    for field, path in (
        ("run.script", spec.script),
        ("environment.requirements", (env or {}).get("requirements", "")),
        ("run.workdir", spec.workdir),
    ):
        message = _path_error(path, field)
        if message:
            errors.append(Problem(field, message))
    return errors


def image_for(spec: ProfileSpec) -> EnvImage | None:
    """The image a profile names, checked for its cluster and partition by
    :func:`images.services.image_choice_check` (unknown, not allowed on the partition, missing or
    unreadable on the cluster: from the availability cache, no Slurm or SSH call). ``None`` for no
    image (the node's own system), refused where the site sets ``PORTAL_IMAGE_NONE_ALLOWED`` false.
    Raises :class:`Refused` with the problem on the profile's ``image`` field."""
    from images.services import image_choice_check
    from slurm.clusters import cluster_get

    found = cluster_get(spec.cluster or None)
    try:
        image = image_choice_check(spec.image, cluster=found.name if found else spec.cluster, partition=spec.partition)
    except Refused as refused:
        raise Refused(*(Problem("image", p.message) for p in refused.problems)) from None
    return EnvImage.of(image) if image is not None else None


def job_request_for(spec: ProfileSpec, *, site: EnvSite | None = None, image: EnvImage | None = None) -> JobRequest:
    """The :class:`JobRequest` a profile asks for (the script rendered from the profile; ``image``:
    the checked image of ``spec.image``, see :func:`image_for`)."""
    return JobRequest(
        name=spec.name,
        partition=spec.partition,
        gpu_type=spec.gpu_type,
        gpu_count=spec.gpus_per_node,
        cpus=spec.cpus,
        memory_mb=spec.memory_mb,
        time_limit_min=spec.time_limit_min,
        script=render_profile_script(spec, site=site, image=image),
        workdir=spec.workdir,
        account=spec.account,
        requeue=spec.requeue,
        priority=spec.priority,
        cluster=spec.cluster,
        image=spec.image,
    )


def _with_lines(problems: list[Problem], text: str, touched: set[str]) -> list[Problem]:
    """``problems`` with the line of each field in ``text`` (overridden fields have none)."""
    lines = load_yaml(text)[1]
    return [
        p if p.line is not None or p.field in touched else Problem(p.field, p.message, line_of(lines, p.field)) for p in problems
    ]


def profile_check(*, user: User, text: str, overrides: dict | None = None) -> tuple[ProfileSpec, CheckedRequest]:
    """Check a profile file (with overrides) completely, as running it would, without running it:
    the schema, the site's environments, and site policy with the team check
    (:func:`jobs.submit.submit.job_check`). Returns (spec, the checked job request, for
    :func:`jobs.submit.submit.job_create`). Raises :class:`Refused` with every problem, each with its
    profile field and line (``None`` for overridden values)."""
    spec = parse_profile(text, overrides=overrides)
    touched = {".".join(t) for t in apply_overrides({}, overrides)[2]}
    site = EnvSite.from_settings(spec.cluster)
    problems: list[Problem] = []
    try:
        image = image_for(spec)
    except Refused as refused:
        image, problems = None, list(refused.problems)
    problems += site_errors(spec, site, image)
    try:
        checked = job_check(user=user, request=job_request_for(spec, site=site, image=image))
    except Refused as refused:
        problems += refused.renamed(PROFILE).problems
    if problems:
        unique = list({(p.field, p.message): p for p in problems}.values())  # the image is checked by job_check too
        raise Refused(*_with_lines(unique, text, touched))
    return spec, checked


def profile_run(*, user: User, text: str, overrides: dict | None = None, profile: Profile | None = None) -> Job:
    """Check and submit a profile file (``text``, e.g. from the CLI or an upload) or a saved
    ``profile`` (its ``yaml``); site policy is checked once, by :func:`profile_check`. Returns the
    new :class:`Job` (state SUBMITTING; sent on commit). Raises :class:`Refused` or
    ``PermissionDenied`` (a profile the user may not see)."""
    if profile is not None and not profile_visible(profile=profile, user=user):
        raise PermissionDenied("This profile is not yours and not shared with your team.")
    spec, checked = profile_check(user=user, text=text, overrides=overrides)
    return job_create(checked=checked, profile=profile, profile_spec=spec.data)


def profile_visible(*, profile: Profile, user: User) -> bool:
    """Owner, members of the team it is shared with, and portal admins may see (and run) it."""
    if profile.owner_id == user.pk or user.is_staff:
        return True
    return bool(profile.team_id) and Membership.objects.filter(team_id=profile.team_id, user=user).exists()


def _team_for_share(user: User, team_name: str | None):
    if not team_name:
        return None
    # PostgreSQL text cannot hold NUL, so such a name cannot be a team (and must not reach the query).
    team = Team.objects.filter(name=team_name).first() if "\x00" not in team_name else None
    if team is None or not Membership.objects.filter(team=team, user=user).exists():
        mine = ", ".join(m.team.name for m in Membership.objects.filter(user=user).select_related("team")) or "none"
        raise Refused(Problem("team", f"You can share only with a team you are in. Your teams: {mine}."))
    return team


def profile_save(*, user: User, text: str, team: str | None = None, profile: Profile | None = None) -> Profile:
    """Create (``profile`` None) or update the owner's profile from ``text``, checked in full (as
    :func:`profile_check`). The name comes from the file's ``name``. Raises :class:`Refused`
    (also for a name the owner already uses, on the line of ``name:``) or ``PermissionDenied`` (not the owner)."""
    if profile is not None and profile.owner_id != user.pk:
        raise PermissionDenied("Only the profile's owner can change it. Clone it to make your own.")
    spec, _ = profile_check(user=user, text=text)
    shared = _team_for_share(user, team) if team is not None else (profile.team if profile else None)
    try:
        return _store(user=user, text=text, spec=spec, team=shared, profile=profile)
    except IntegrityError:
        raise Refused(
            Problem(
                "name",
                f"You already have a profile named '{spec.name[:60]}'. Change name: in the file.",
                line_of(load_yaml(text)[1], "name"),
            )
        ) from None


def _store(
    *, user: User, text: str, spec: ProfileSpec, team: Team | None, profile: Profile | None, cloned_from: Profile | None = None
) -> Profile:
    """Write the checked ``text`` (``spec``: its document) as ``user``'s new profile (``profile`` None)
    or over ``profile``, audited. Raises ``IntegrityError`` when ``user`` has a profile of that name."""
    old = {"name": profile.name, "team": profile.team.name if profile.team else None} if profile else {}
    with transaction.atomic():
        if profile is None:
            profile = Profile(owner=user, cloned_from=cloned_from)
        profile.name, profile.yaml, profile.spec, profile.team = spec.name, text, spec.data, team
        profile.save()
        audit(
            actor=user,
            action="profile.save",
            target=f"profile:{profile.pk}",
            old=old,
            new={"name": profile.name, "team": team.name if team else None},
        )
    return profile


def profile_share(*, profile: Profile, by: User, team: str | None) -> Profile:
    """Share the profile with ``team`` (a team the owner is in) or stop sharing (``None``/"").
    Raises ``PermissionDenied`` (not the owner) or :class:`Refused` (not their team)."""
    if profile.owner_id != by.pk:
        raise PermissionDenied("Only the profile's owner can share it.")
    shared = _team_for_share(by, team)
    with transaction.atomic():
        old = {"team": profile.team.name if profile.team else None}
        profile.team = shared
        profile.save(update_fields=["team", "updated_at"])
        audit(
            actor=by,
            action="profile.share",
            target=f"profile:{profile.pk}",
            old=old,
            new={"team": shared.name if shared else None},
        )
    return profile


def profile_delete(*, profile: Profile, by: User) -> None:
    """Delete the owner's profile (jobs run from it keep the document they ran). Raises ``PermissionDenied``."""
    if profile.owner_id != by.pk:
        raise PermissionDenied("Only the profile's owner can delete it.")
    with transaction.atomic():
        audit(actor=by, action="profile.delete", target=f"profile:{profile.pk}", old={"name": profile.name})
        profile.delete()


def profile_clone(*, profile: Profile, by: User, name: str = "", overrides: dict | None = None) -> Profile:
    """A copy owned by ``by`` with ``overrides`` applied ("run again with 4 GPUs") and a new
    ``name`` (default "<name> (copy)"). Checked as running ``profile`` with those overrides would be
    (:func:`profile_check`): a problem names the line of the profile's own file, none for an
    overridden field. The copy's file is written from the document, so comments are not kept when
    anything changes. Raises ``PermissionDenied`` or :class:`Refused` (also for a name ``by`` already
    uses: no line, as the copy's file is not shown; it asks for another name)."""
    if not profile_visible(profile=profile, user=by):
        raise PermissionDenied("This profile is not yours and not shared with your team.")
    changes = dict(overrides or {})
    changes["name"] = name or changes.get("name") or f"{profile.name} (copy)"
    spec, _ = profile_check(user=by, text=profile.yaml, overrides=changes)
    document, _, _ = apply_overrides(load_yaml(profile.yaml)[0], changes)  # checked above: no errors
    try:
        return _store(user=by, text=dump_yaml(document), spec=spec, team=None, profile=None, cloned_from=profile)
    except IntegrityError:
        raise Refused(
            Problem("name", f"You already have a profile named '{spec.name[:60]}': give the copy another name.")
        ) from None
