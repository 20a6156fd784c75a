"""The job profile file (``train.yaml``), version 1: parsed, checked field by field, and turned
into a :class:`ProfileSpec`. A file that cannot be used raises :class:`portal.refusals.Refused`; each
problem names the field as a dotted path (``resources.gpus_per_node``) and, when the value came from
the file, its line. The schema is documented in ``docs/profiles.md``.

Only shape and types are checked here; what the cluster allows (partitions, GPU types and counts,
time limits, CPUs, memory) is checked by the same :class:`jobs.submit.policy.SitePolicy` as the job form,
in :mod:`profiles.services`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Annotated

from packaging.requirements import InvalidRequirement, Requirement
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from jobs.submit import policy
from portal.refusals import Problem, Refused, limit_sentence
from portal.units import memory_mib

from .document import apply_overrides, line_for, load_yaml, nul_paths

SCHEMA_VERSION = 1
_VERSION = re.compile(r"^[0-9]+(\.[0-9]+){0,2}$")
#: A registered image's name (images.models.NAME, at most 64 characters): never a path.
_IMAGE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _plain_requirement(item: str) -> bool:
    """A pip requirement by name (PEP 508, read by ``packaging.requirements``): ``numpy``,
    ``numpy==2.2.6``, ``torch[cuda]>=2,<3``; at most 200 characters. URLs (``name @ https://...``),
    environment markers, options (``--index-url=...``) and paths are not plain: they belong in a
    requirements file."""
    if len(item) > 200:
        return False
    try:
        requirement = Requirement(item)
    except InvalidRequirement:
        return False
    return requirement.url is None and requirement.marker is None


def _pip_item(item: str) -> str:
    """One ``environment.pip`` item, checked alone so that its refusal carries its own line."""
    if _plain_requirement(item):
        return item
    if len(item.split()) > 1 and all(_plain_requirement(part) for part in item.split()):
        # YAML joins the lines of a multi-line [ ... ] list whose items have no comma between them
        raise ValueError(
            f"'{item[:60]}' is several requirements in one item: give each its own (a comma between them inside [ ],"
            " or a '- ' line each)."
        )
    raise ValueError(
        f"'{item[:60]}' is not a package requirement such as numpy or numpy==2.2.6 (options, URLs and paths are not allowed"
        " here; use requirements)."
    )


# --- the schema ---------------------------------------------------------------------------------
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False, str_strip_whitespace=False)


def _not_bool(value):
    """YAML reads ``yes``/``true`` as booleans, which pydantic would take as 1: refuse them for counts."""
    if isinstance(value, bool):
        raise ValueError("Must be a whole number, not yes/no or true/false.")
    return value


class Resources(_Strict):
    partition: str = Field(min_length=1, max_length=64)
    nodes: int = Field(default=1, ge=1, le=64)
    gpus_per_node: int = Field(default=0, ge=0, le=64)
    gpu_type: str = Field(default="", max_length=64)
    cpus: int = Field(default=1, ge=1, le=policy.MOST_CPUS)
    #: As written (``4G``, ``4000M``, ``1.5T``, a bare number = GB); read by portal.units.memory_mib.
    memory: str | int | float = "4G"
    time_limit: str | int = "01:00:00"

    _counts = field_validator("nodes", "gpus_per_node", "cpus", mode="before")(_not_bool)

    @field_validator("time_limit", mode="before")
    @classmethod
    def _time_limit(cls, value):
        """Text or a whole number, else one sentence saying the forms: before pydantic's lax mode takes
        ``yes`` for 1 minute and ``no`` for 0, or says two things about one empty value or ``1.5``."""
        if isinstance(value, bool):
            raise ValueError(f"A time limit is not yes/no. Write it as {policy.TIME_LIMIT_FORMS}.")
        if value is None:
            raise ValueError(f"The time limit is empty: write it as {policy.TIME_LIMIT_FORMS}, or leave it out for 1 hour.")
        if isinstance(value, float) and value.is_integer():  # 90.0: minutes, as pydantic's lax int read it before
            return int(value)
        if not isinstance(value, str | int):
            raise ValueError(f"{str(value)[:20]!r} is not a time limit. Write it as {policy.TIME_LIMIT_FORMS}.")
        return value

    @field_validator("memory", mode="before")
    @classmethod
    def _memory(cls, value):
        memory_mib(value)  # raises MemoryRefusal (a ValueError) with the sentence
        return value


class Run(_Strict):
    workdir: str = Field(default="", max_length=512)
    script: str = Field(default="", max_length=512)
    args: list[str] = Field(default_factory=list, max_length=100)
    command: str = Field(default="", max_length=64 * 1024)
    #: Replaced by the top-level ``image:`` (a name the site registered); kept only to say so.
    image: str = Field(default="", max_length=512)
    #: Slurm's --requeue: run again after a node failure or preemption (resume from a checkpoint).
    requeue: bool = True
    #: A priority class (high, normal, scavenger: teams.priority_classes), sent as --qos; "" = none.
    priority: str = Field(default="", max_length=20)

    @field_validator("workdir", mode="before")
    @classmethod
    def _strip(cls, value):
        """Blanks around the directory are dropped, as the New job form drops them (`` proj `` is ``proj``)."""
        return value.strip() if isinstance(value, str) else value

    @field_validator("script", "command")
    @classmethod
    def _not_blank(cls, value: str, info):
        """A script or command of only blank space (``command: "   "``) is refused, as the job form
        refuses a blank script: it ran as an empty job that "completed"."""
        if value and not value.strip():
            if info.field_name == "command":
                raise ValueError(
                    "run.command is blank (only blank space): write the bash command to run, such as python train.py, "
                    "or give run.script instead."
                )
            raise ValueError(
                "run.script is blank (only blank space): name the file to run in the project directory, such as train.py, "
                "or give run.command instead."
            )
        return value

    @field_validator("image")
    @classmethod
    def _no_image_path(cls, value: str):
        if value:
            raise ValueError(
                "run.image is no longer read: images are the site's (registered by the admins). Name one at the top level, "
                "e.g. image: debian12-sklearn (the list: the Images page, gpuportal images), and remove run.image."
            )
        return value

    @model_validator(mode="after")
    def _one_entry_point(self):
        if bool(self.script) == bool(self.command):
            raise ValueError(
                "Give exactly one entry point: run.script (a file in the project directory) or run.command (a bash command)."
            )
        if self.args and not self.script:
            raise ValueError("run.args go with run.script; put arguments of a command into run.command itself.")
        return self


class Environment(_Strict):
    python: str = Field(default="", max_length=16)
    cuda: str = Field(default="", max_length=16)
    pip: list[Annotated[str, AfterValidator(_pip_item)]] = Field(default_factory=list, max_length=200)
    requirements: str = Field(default="", max_length=512)
    conda: str = Field(default="", max_length=512)
    #: Whether the venv sees the Python's own packages; unset (``None``): yes in an image (its numpy,
    #: scikit-learn, ...), no on the node's own system.
    system_site_packages: bool | None = None

    @field_validator("python", "cuda")
    @classmethod
    def _version(cls, value: str):
        if value and not _VERSION.match(value):
            raise ValueError(f'\'{value[:16]}\' is not a version; write it like "3.11" or "12.4" (in quotes).')
        return value


class Profile(_Strict):
    version: int
    name: str = Field(min_length=1, max_length=200)
    account: str = Field(default="", max_length=64)
    #: The cluster it runs on (a name of slurm.clusters); "" = the site's default.
    cluster: str = Field(default="", max_length=32)
    #: A site-registered image (images.models.Image.name) the job runs in; "" or "none": the node's
    #: own system (where the site allows it: PORTAL_IMAGE_NONE_ALLOWED).
    image: str = Field(default="", max_length=64)
    resources: Resources
    run: Run
    environment: Environment | None = None

    @field_validator("image")
    @classmethod
    def _image_name(cls, value: str):
        if value and not _IMAGE_NAME.fullmatch(value):
            raise ValueError(
                f"'{value[:64]}' is not an image name: images are named by the site (letters, digits, '-', '_', '.'), "
                "e.g. debian12-sklearn, never a path; see the Images page or gpuportal images."
            )
        return "" if value == "none" else value

    @field_validator("version")
    @classmethod
    def _known_version(cls, value: int):
        if value != SCHEMA_VERSION:
            raise ValueError(f"This portal reads profile version {SCHEMA_VERSION}; the file says {value}.")
        return value


@dataclass(frozen=True)
class ProfileSpec:
    """A valid profile, with units resolved: ``memory_mb`` MiB, ``time_limit_min`` minutes.
    ``data`` is the normalised document (what is stored and what the environment hash is built from)."""

    data: dict
    name: str
    account: str
    partition: str
    nodes: int
    gpus_per_node: int
    gpu_type: str
    cpus: int
    memory_mb: int
    time_limit_min: int
    workdir: str
    script: str
    args: tuple[str, ...]
    command: str
    image: str
    environment: dict | None = field(default=None)
    requeue: bool = True
    cluster: str = ""
    priority: str = ""


# --- units ---------------------------------------------------------------------------------------
def time_limit_minutes(value: str | int) -> int:
    """``90``, ``"02:00:00"``, ``"1-00:00:00"`` -> minutes by :func:`jobs.submit.policy.time_limit_minutes`; raises ``ValueError``."""
    if isinstance(value, bool):
        raise ValueError(f"A time limit is not yes/no. Write it as {policy.TIME_LIMIT_FORMS}.")
    return policy.time_limit_minutes(str(value))


_FRIENDLY = {
    "missing": "This field is required.",
    "extra_forbidden": "Unknown field. Check the spelling against docs/profiles.md.",
    "int_parsing": "Must be a whole number.",
    "int_type": "Must be a whole number.",
    "int_from_float": "Must be a whole number.",
    "finite_number": "Must be a whole number, not infinity or NaN (.inf, .nan).",
    "string_type": "Must be text (put it in quotes).",
    "list_type": "Must be a list.",
    "bool_parsing": "Must be true or false.",
    "bool_type": "Must be true or false.",
    "model_type": "Must be a mapping (indented fields below it).",
    "model_attributes_type": "Must be a mapping (indented fields below it).",
    "dict_type": "Must be a mapping (indented fields below it).",
}


#: A field left empty (``partition:``, read as null): what to write, and what leaving it out does (``None``: it is required).
_EMPTY = {
    ("version",): ("1", None),
    ("name",): ("the job's name", None),
    ("account",): ("a team (Slurm account) you are in", "bill your first team"),
    ("cluster",): ("a cluster's name", "use the site's default cluster"),
    ("image",): ("a site image's name (such as debian12-sklearn)", "run on the node's own system"),
    ("resources", "partition"): ("a partition (such as small)", None),
    ("resources", "gpu_type"): ("a GPU type (such as a100)", "take any type"),
    ("run", "workdir"): ("the project directory (relative to your home)", "start in a new directory for each job"),
}
#: Else what a field of this type takes.
_EMPTY_KIND = {"string_type": "some text", "int_type": "a whole number", "bool_type": "true or false", "list_type": "a list"}


def _empty(kind: str, loc: tuple, overridden: bool) -> str:
    """The sentence for a field given no value at all: it is empty, what to write, or to leave it out."""
    what, default = _EMPTY.get(loc, (_EMPTY_KIND[kind], "use the default"))
    if overridden:
        return f"This override is empty: give {what}" + (f", or leave it out to {default}." if default else ".")
    if default is None:
        return f"This is empty: write {what} after the colon; it is required."
    return f"This is empty: write {what} after the colon, or remove the line to {default}."


def _message(err: dict, loc: tuple, overridden: bool = False) -> str:
    """A pydantic error ``err`` at ``loc`` in the profile's words (``overridden``: the value came from an override)."""
    kind = err.get("type", "")
    if err.get("input", "") is None and kind in _EMPTY_KIND:
        return _empty(kind, loc, overridden)
    if kind == "string_type" and loc in (("environment", "python"), ("environment", "cuda")):
        return 'Write the version in quotes, like "3.11": unquoted, YAML reads a version as a number (3.10 would become 3.1).'
    if kind in _FRIENDLY:
        return _FRIENDLY[kind]
    bound = limit_sentence(kind, err.get("ctx") or {})
    if bound:
        return bound
    msg = str(err.get("msg", "invalid value"))
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix) :]
    return msg


def parse_profile(text: str, *, overrides: dict | None = None) -> ProfileSpec:
    """Parse and check ``text`` (with optional ``overrides``). Returns the :class:`ProfileSpec`.
    Raises :class:`Refused` with every error found, each with its field and line."""
    document, lines = load_yaml(text)
    return spec_from_document(document, lines=lines, overrides=overrides)


def spec_from_document(document: dict, *, lines: dict[tuple, int] | None = None, overrides: dict | None = None) -> ProfileSpec:
    """Like :func:`parse_profile` for an already parsed document (the API's JSON form)."""
    lines = lines or {}
    document, errors, touched = apply_overrides(document, overrides)
    nul = nul_paths(document)
    if nul:  # a YAML escape ("\0") or an override; PostgreSQL text (and JSON) columns cannot hold it
        errors += [
            Problem(
                ".".join(str(p) for p in loc),
                "Must not contain a NUL character (\\0).",
                None if any(loc[: len(t)] == t for t in touched) else line_for(lines, loc),
            )
            for loc in nul
        ]
        raise Refused(*_dedupe(errors))
    try:
        profile = Profile.model_validate(document)
    except ValidationError as exc:
        for err in exc.errors(include_url=False):
            loc = tuple(err.get("loc", ()))
            # pydantic puts union members into loc (time_limit: str | int -> ("resources","time_limit","str")).
            loc = tuple(p for p in loc if p not in ("str", "int"))
            overridden = any(loc[: len(t)] == t for t in touched)
            line = None if overridden else line_for(lines, loc)
            # a pip item is named by its list (as the API's errors always were), on the item's own line
            named = loc[:-1] if loc[:2] == ("environment", "pip") and isinstance(loc[-1], int) else loc
            errors.append(Problem(".".join(str(p) for p in named), _message(err, named, overridden), line))
        raise Refused(*_dedupe(errors)) from None
    if errors:
        raise Refused(*errors)
    res = profile.resources
    try:
        minutes = time_limit_minutes(res.time_limit)
    except ValueError as exc:
        path = ("resources", "time_limit")
        raise Refused(Problem("resources.time_limit", str(exc), None if path in touched else line_for(lines, path))) from None
    data = profile.model_dump(mode="json", exclude_none=True)
    env = profile.environment.model_dump(mode="json") if profile.environment else None
    return ProfileSpec(
        data=data,
        name=profile.name,
        account=profile.account,
        partition=res.partition,
        nodes=res.nodes,
        gpus_per_node=res.gpus_per_node,
        gpu_type=res.gpu_type,
        cpus=res.cpus,
        memory_mb=memory_mib(res.memory),
        time_limit_min=minutes,
        workdir=profile.run.workdir,
        script=profile.run.script,
        args=tuple(profile.run.args),
        command=profile.run.command,
        image=profile.image,
        environment=env,
        requeue=profile.run.requeue,
        priority=profile.run.priority,
        cluster=profile.cluster,
    )


def _dedupe(errors: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for e in errors:
        if (e.field, e.message, e.line) not in seen:
            seen.add((e.field, e.message, e.line))
            out.append(e)
    return out
