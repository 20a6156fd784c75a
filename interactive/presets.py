"""Session presets: the one-click Start buttons of the home page.

A preset is a set of session options (kind, GPUs and type, CPUs, memory, hours, partition, image) with a label
people read ("JupyterLab, 1 A100, 4 h"). The site configures them in ``PORTAL_SESSION_PRESETS``
(``settings.PORTAL_SESSION_PRESETS``; unset: ``settings.PORTAL_SESSION_PRESETS_DEFAULT``), in a compact text
form, presets separated by ``;`` or new lines, each a kind's name followed by ``key=value`` words::

    lab gpus=1 type=a100 hours=4; lab hours=2 image=debian12-sklearn; vscode gpus=1 cpus=4 memory=8G hours=4

or as JSON, a list of objects with the same keys (``[{"kind": "lab", "gpus": 1, "type": "a100", "hours": 4}]``).
Keys: ``gpus`` (default 0), ``type`` (a GPU type; default "" = any type), ``cpus`` (default 2), ``memory`` (as
every surface reads it, :func:`portal.units.memory_mib`: ``4G``, ``4000M``, a bare number is GB; default 4G),
``hours`` (default 2), ``partition`` (default the first of ``PORTAL_SESSION_PARTITIONS``), ``image`` (a site
image's name on the default sessions cluster; default ``none``: the node's own system, which a cluster with
``session_venv = false`` lacks) and ``label`` (default made from the others: "JupyterLab, 1 A100, 4 h", plus
" in <partition>" for a partition other than the first; the image is said under the button). Besides the
site's presets, a user gets a button for the settings of the last session they started (:func:`last_session_preset`).

A preset is checked twice. At start-up, the system check ``portal.E011`` (:func:`preset_problems`, no database
read) refuses text that cannot be read and any preset the session rules always refuse (more GPUs than
``PORTAL_SESSION_MAX_GPUS``, hours out of range, a partition sessions may not use, an unknown kind, an image
that is not a name, no image where the node's own system cannot serve it), naming the preset. On the page,
each preset is checked with the same :func:`interactive.options.parse_session_options` and site policy the
session form uses: one it would refuse (a GPU type the partition lacks, a kind not installed, too many CPUs
for its nodes, an image unknown, disabled or without the kind's server) is shown disabled with the refusal's
words, and a click runs :func:`interactive.services.session_start` exactly as the form does.
"""

from __future__ import annotations

import json
import shlex
import uuid
from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings
from django.utils.text import slugify

from jobs.submit.policy import SitePolicy
from portal.refusals import Problem
from portal.units import MemoryRefusal, memory_mib, memory_text
from slurm.clusters import default_sessions_cluster, has_session_venv, session_clusters

from .kinds import KINDS, kind_label
from .models import Session
from .options import IMAGE_NAME, parse_session_options

#: The keys a preset may carry, and the session option each one is.
PRESET_KEYS = {
    "kind": "ide",
    "gpus": "gpu_count",
    "type": "gpu_type",
    "cpus": "cpus",
    "memory": "memory_mb",
    "hours": "hours",
    "partition": "partition",
    "image": "image",
    "label": "",
}
DEFAULT_CPUS = 2
DEFAULT_MEMORY = "4G"
DEFAULT_HOURS = 2


class PresetError(ValueError):
    """``PORTAL_SESSION_PRESETS`` cannot be read, or a preset in it is one the session rules always
    refuse (raised by :func:`parse_presets`). The message names the preset (its number from 1 and
    its text or label) and says what to fix."""


@dataclass(frozen=True)
class SessionPreset:
    """One Start button's settings: ``ide`` a kind's name (:mod:`interactive.kinds`), ``memory_mb``
    MiB, ``hours`` whole hours, ``gpu_type`` "" for any type. ``key`` identifies it in a click
    (``preset-<slug of the label>``, or ``last-<session key>``); ``label`` is what the button says.
    ``account``: the team to bill (the last session's, while the person is still in it); "": the
    person's first team (:func:`interactive.options.session_account`). ``cluster``: the last session's,
    while sessions still run there ("": the default session cluster); ``note``: why it is not (said
    under the button); ``image``: the site image it runs in (a site preset's ``image``, or the last
    session's; "": the node's own system)."""

    key: str
    label: str
    ide: str
    partition: str
    gpu_type: str
    gpu_count: int
    cpus: int
    memory_mb: int
    hours: int
    account: str = ""
    cluster: str = ""
    note: str = ""
    image: str = ""

    @property
    def options(self) -> dict:
        """The ``user_options`` a start with this preset sends, as the session form's
        ``user_options()`` does (:data:`interactive.options.ALLOWED_KEYS`)."""
        return {
            "ide": self.ide,
            "partition": self.partition,
            "gpu_type": self.gpu_type,
            "gpu_count": self.gpu_count,
            "cpus": self.cpus,
            "memory_mb": self.memory_mb,
            "hours": self.hours,
            **({"account": self.account} if self.account else {}),
            **({"cluster": self.cluster} if self.cluster else {}),
            **({"image": self.image} if self.image else {}),
        }

    @property
    def button_label(self) -> str:
        """What its Start button says: "Start " and the label, as one sentence ("Start JupyterLab, 1 A100,
        4 h"; the last session's with a small first letter: "Start your last session: JupyterLab, 1 A100, 4 h")."""
        label = self.label[:1].lower() + self.label[1:] if self.key.startswith("last-") else self.label
        return f"Start {label}"

    @property
    def details(self) -> str:
        """The rest of the settings, e.g. "2 CPUs · 4G memory · partition interactive · image debian12-sklearn"
        (memory as the Sessions form takes it: :func:`portal.units.memory_text`)."""
        cpus = f"{self.cpus} CPU{'s' if self.cpus != 1 else ''}"
        where = (f" · cluster {self.cluster}" if self.cluster else "") + (f" · image {self.image}" if self.image else "")
        return f"{cpus} · {memory_text(self.memory_mb)} memory · partition {self.partition}{where}{self.note}"


def preset_label(ide: str, gpu_count: int, gpu_type: str, hours: int) -> str:
    """ "JupyterLab, 1 A100, 4 h", "VS Code, 2 GPUs, 8 h" (any type), "JupyterLab, no GPU, 2 h"."""
    if not gpu_count:
        gpus = "no GPU"
    elif gpu_type:
        gpus = f"{gpu_count} {gpu_type.upper()}"
    else:
        gpus = f"{gpu_count} GPU{'s' if gpu_count != 1 else ''}"
    return f"{kind_label(ide)}, {gpus}, {hours} h"


class _NoSitePolicy:
    """Site policy for the start-up check: it knows no cluster figures and reads no database (both are checked
    when a preset is offered), only the session rules (on the default session cluster). Its answer, ``STOP``,
    stops ``parse_session_options`` before the image check (a database read)."""

    cluster = ""
    STOP = Problem("", "")

    def check(self, request) -> list[Problem]:
        return [self.STOP]


def _split(text: str) -> list[tuple[dict | str, str]]:
    """The compact text form -> per preset, its dict (``kind`` and the ``key=value`` words), or the
    sentence saying why it cannot be read, and its text (for messages)."""
    lexer = shlex.shlex(text.replace("\n", ";"), posix=True, punctuation_chars=";")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError as exc:  # an unclosed quote
        raise PresetError(f"PORTAL_SESSION_PRESETS cannot be read: {exc} (close the quote).") from None
    presets: list[list[str]] = [[]]
    for token in tokens:
        if token and set(token) == {";"}:
            presets.extend([] for _ in token)
        else:
            presets[-1].append(token)
    return [(_words(words), shlex.join(words)[:100]) for words in presets if words]


def _words(words: list[str]) -> dict | str:
    if "=" in words[0]:
        return f"it must start with a session kind: {', '.join(KINDS)}."
    raw: dict = {"kind": words[0]}
    for word in words[1:]:
        key, sep, value = word.partition("=")
        if not sep:
            return f"{word[:40]!r} is not key=value."
        if key in raw:
            return f"it names {key!r} twice."
        raw[key] = value
    return raw


def _read(text: str) -> list[tuple[dict | str, str]]:
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise PresetError(f"PORTAL_SESSION_PRESETS is not valid JSON: {exc}.") from None
        if not all(isinstance(item, dict) for item in data):
            raise PresetError('PORTAL_SESSION_PRESETS as JSON must be a list of objects, e.g. [{"kind": "lab", "hours": 2}].')
        return [(item, json.dumps(item)[:100]) for item in data]
    return _split(text)


def _whole(raw: dict, key: str, default: int, where: str) -> int:
    value = raw.get(key, default)
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**31:
        raise PresetError(f"{where}: {key} must be a whole number, not {str(value)[:20]!r}.")
    return value


def _memory_mb(raw: dict, where: str) -> int:
    """``memory`` read as every surface reads memory (:func:`portal.units.memory_mib`), in MiB."""
    try:
        return memory_mib(raw.get("memory", DEFAULT_MEMORY))
    except MemoryRefusal as exc:
        raise PresetError(f"{where}: memory: {exc}") from None


def _image(raw: dict, where: str) -> str:
    """``image`` read: a site image's name, or "" for none (left out, ``none`` or JSON null); the form only."""
    name = "none" if raw.get("image") is None else raw["image"]
    if isinstance(name, str) and (name.strip() in ("", "none") or IMAGE_NAME.fullmatch(name.strip())):
        return "" if name.strip() in ("", "none") else name.strip()
    raise PresetError(
        f"{where}: image {str(name)[:64]!r} is not an image's name: write a site image's name as the Container images "
        "page lists it (image=debian12-sklearn, never a path), or image=none for the node's own system."
    )


def _rule_problems(preset: SessionPreset) -> list[str]:
    """What the session rules always refuse in ``preset``, without a database read: the options check without
    cluster figures, images or whether the kind is installed (all asked when the preset is offered), and no
    image where the node's own system cannot serve it."""
    _options, problems = parse_session_options(preset.options, policy=_NoSitePolicy())
    said = [p.message for p in problems if p is not _NoSitePolicy.STOP and p.field != "ide"]
    cluster = default_sessions_cluster().name
    if preset.image or (has_session_venv(cluster) and settings.PORTAL_IMAGE_NONE_ALLOWED):
        return said
    why = f"{cluster}'s nodes have no Jupyter venv of their own (session_venv = false in the clusters file)"
    if has_session_venv(cluster):
        why = "This site runs every session in one of its images (PORTAL_IMAGE_NONE_ALLOWED is false)"
    return [*said, f"{why}: name a site image that holds the session's server, e.g. image=debian12-sklearn."]


def _preset(raw: dict | str, source: str, number: int, *, rules: bool) -> SessionPreset:
    where = f"Preset {number} ({source})"
    if isinstance(raw, str):  # it could not be read
        raise PresetError(f"{where}: {raw}")
    unknown = sorted(str(k)[:20] for k in raw if k not in PRESET_KEYS)
    if unknown:
        raise PresetError(f"{where}: unknown key(s) {', '.join(unknown)}; a preset may have {', '.join(PRESET_KEYS)}.")
    ide = str(raw.get("kind", ""))
    if ide not in KINDS:
        raise PresetError(f"{where}: {ide[:20]!r} is not a session kind; use one of {', '.join(KINDS)}.")
    partitions = settings.PORTAL_SESSION_PARTITIONS
    partition = str(raw.get("partition") or (partitions[0] if partitions else ""))
    gpu_type = str(raw.get("type", "")).strip()
    gpu_count = _whole(raw, "gpus", 0, where)
    cpus = _whole(raw, "cpus", DEFAULT_CPUS, where)
    hours = _whole(raw, "hours", DEFAULT_HOURS, where)
    memory_mb = _memory_mb(raw, where)
    image = _image(raw, where)
    elsewhere = f" in {partition}" if partitions and partition != partitions[0] else ""
    label = str(raw.get("label") or preset_label(ide, gpu_count, gpu_type, hours) + elsewhere).strip()[:80]
    slug = slugify(label)
    if not slug:
        raise PresetError(f"{where}: its label {label!r} needs a letter or digit.")
    preset = SessionPreset(f"preset-{slug}", label, ide, partition, gpu_type, gpu_count, cpus, memory_mb, hours, image=image)
    problems = _rule_problems(preset) if rules else []
    if problems:
        raise PresetError(f"Preset {number} ({label}): " + " ".join(problems))
    return preset


def _parse_all(text: str, *, rules: bool = True) -> tuple[list[SessionPreset], list[str]]:
    """Every preset that can be read, and a sentence for each one that cannot (with ``rules``, also
    for each one the session rules always refuse)."""
    try:
        raws = _read(text or "")
    except PresetError as exc:
        return [], [str(exc)]
    presets: list[SessionPreset] = []
    problems: list[str] = []
    for number, (raw, source) in enumerate(raws, start=1):
        try:
            preset = _preset(raw, source, number, rules=rules)
        except PresetError as exc:
            problems.append(str(exc))
            continue
        twin = next((p for p in presets if p.key == preset.key), None)
        if twin is not None:
            problems.append(f"Preset {number} ({preset.label}) has the same label as an earlier one; give one of them a label=.")
            continue
        presets.append(preset)
    return presets, problems


def parse_presets(text: str) -> list[SessionPreset]:
    """The presets in ``text`` (the compact form or JSON: see the module's docstring), in order. Raises
    :class:`PresetError` naming the first bad preset: text that cannot be read, an unknown key or kind, a value
    that is not a whole number, an amount of memory or an image's name, a preset the session rules always refuse
    (:func:`interactive.options.parse_session_options` without cluster figures or images; no image where the
    node's own system cannot serve it), or two presets with the same label."""
    presets, problems = _parse_all(text)
    if problems:
        raise PresetError(problems[0])
    return presets


def presets_text() -> str:
    """The configured text: ``PORTAL_SESSION_PRESETS``, or the site's default when it is unset."""
    text = settings.PORTAL_SESSION_PRESETS
    return settings.PORTAL_SESSION_PRESETS_DEFAULT if text is None else text


@lru_cache(maxsize=8)
def _readable(text: str, default_partition: str) -> tuple[tuple[SessionPreset, ...], tuple[str, ...]]:
    presets, problems = _parse_all(text, rules=False)
    return tuple(presets), tuple(problems)


def _site() -> tuple[tuple[SessionPreset, ...], tuple[str, ...]]:
    partitions = settings.PORTAL_SESSION_PARTITIONS
    return _readable(presets_text(), partitions[0] if partitions else "")


def site_presets() -> list[SessionPreset]:
    """The site's presets that can be read (:func:`presets_text`, cached per text). Only reading is checked
    here: whether the session rules and site policy allow a preset now is asked when it is offered
    (:func:`preset_refusals`), so a rule changed since start-up disables the presets it refuses, with
    why, instead of hiding them."""
    return list(_site()[0])


def unreadable_presets() -> list[str]:
    """Why each of the site's presets that cannot be read is left out (the start-up check, ``portal.E011``,
    reports them too), or ``[]``."""
    return list(_site()[1])


def preset_problems() -> list[str]:
    """What is wrong with the configured presets: one sentence per bad preset, naming it (its
    number from 1 and its label or text), or ``[]``."""
    return _parse_all(presets_text())[1]


def _from_session(session: Session) -> SessionPreset:
    hours = max(1, session.time_limit_min // 60)
    cluster, note = session.on_cluster, ""
    if cluster not in {c.name for c in session_clusters()}:  # sessions no longer run there: the default
        without = f" without its image {session.image_name}" if session.image_name else ""
        cluster, note = "", f" · {cluster} no longer runs sessions, so it starts on {default_sessions_cluster().name}{without}"
    return SessionPreset(
        f"last-{session.key}",
        "Your last session: " + preset_label(session.ide, session.gpu_count, session.gpu_type, hours),
        session.ide,
        session.partition,
        session.gpu_type,
        session.gpu_count,
        session.cpus,
        session.memory_mb,
        hours,
        session.account if session.account in session.user.slurm_accounts else "",
        cluster if len(session_clusters()) > 1 else "",
        note,
        session.image_name if cluster else "",  # its image, on its own cluster (a site image is per cluster)
    )


def last_session_preset(*, user) -> SessionPreset | None:
    """The settings of the last session ``user`` started (any state: kind, partition, GPUs and type, CPUs,
    memory, hours, its team while they are still in it, its cluster while sessions still run there and its
    image there), as a preset labelled "Your last session: …", or ``None`` when they have started none."""
    session = Session.objects.filter(user=user).select_related("user").order_by("-created_at").first()
    return _from_session(session) if session is not None else None


def presets_for(*, user) -> list[SessionPreset]:
    """The Start buttons ``user`` gets, in order: their last session's settings (when they have one), then
    the site's presets."""
    last = last_session_preset(user=user)
    return ([last] if last else []) + site_presets()


def preset_get(*, user, key: str) -> SessionPreset | None:
    """The preset a click names (:attr:`SessionPreset.key`): one of the site's presets, or
    ``last-<session key>`` for one of ``user``'s own sessions (that one, so that a click starts what
    its button said even if another session was started meanwhile). ``None`` when there is none."""
    if key.startswith("last-"):
        try:
            session_key = uuid.UUID(key.removeprefix("last-"))
        except ValueError:
            return None
        session = Session.objects.filter(user=user, key=session_key).select_related("user").first()
        return _from_session(session) if session is not None else None
    return next((p for p in site_presets() if p.key == key), None)


def preset_refusals(preset: SessionPreset, *, policy: SitePolicy) -> list[Problem]:
    """What the session form's checks would say to ``preset`` now ([] when it would start):
    :func:`interactive.options.parse_session_options` against ``policy`` (its cluster's)."""
    _options, problems = parse_session_options(preset.options, policy=policy)
    return problems
