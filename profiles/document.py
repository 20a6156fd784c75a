"""The profile file as text, before its schema: read as YAML with the line of every field, within limits
(size, nesting, no NUL, no anchors: a "YAML bomb" is refused before it grows), with a request's overrides
applied (short names or dotted paths), and written back (:func:`dump_yaml`). Every refusal is
:class:`portal.refusals.Refused` with the line where there is one. The schema itself: :mod:`profiles.schema`."""

from __future__ import annotations

import re

import yaml

from portal.refusals import Problem, Refused

MAX_PROFILE_BYTES = 64 * 1024
MAX_DEPTH = 10
#: More overrides than this in one request are refused at once (there are only a dozen fields to
#: override; each unknown key would otherwise get an error of its own in the answer).
MAX_OVERRIDES = 32
#: Short names accepted in overrides ("run again with 4 GPUs": ``{"gpus": 4}``) -> dotted path.
OVERRIDE_ALIASES = {
    "name": "name",
    "account": "account",
    "cluster": "cluster",
    "partition": "resources.partition",
    "nodes": "resources.nodes",
    "gpus": "resources.gpus_per_node",
    "gpus_per_node": "resources.gpus_per_node",
    "gpu_type": "resources.gpu_type",
    "cpus": "resources.cpus",
    "memory": "resources.memory",
    "time_limit": "resources.time_limit",
    "workdir": "run.workdir",
    "args": "run.args",
    "requeue": "run.requeue",
    "priority": "run.priority",
    "image": "image",
}


# --- parsing -------------------------------------------------------------------------------------
def _lines(node: yaml.Node, path: tuple = (), out: dict | None = None) -> dict[tuple, int]:
    """Dotted path (tuple) -> 1-based line of the value, from the composed YAML tree."""
    out = {} if out is None else out
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else str(key)
            out[(*path, name)] = key.start_mark.line + 1
            _lines(value, (*path, name), out)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _lines(item, (*path, index), out)
    return out


def line_for(lines: dict[tuple, int], loc: tuple) -> int | None:
    """The line of the value at ``loc`` (a path tuple, as pydantic's errors give it), else of its nearest
    enclosing block's, else the document's first line."""
    loc = tuple(loc)
    while loc:
        if loc in lines:
            return lines[loc]
        loc = loc[:-1]
    return lines.get(())


_INT, _FLOAT = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"


class _ProfileLoader(yaml.SafeLoader):
    """PyYAML's safe loader with whole numbers in decimal only, as Slurm and the forms read them: an
    unquoted ``1:30`` (YAML 1.1's base 60) is the text "1:30", a time limit of 1 minute 30 seconds, not
    the integer 90, and ``2:00:00`` two hours, not 7,200; ``017`` is the text "017" (17 minutes as a
    time limit), not octal 15, and ``0x1F``, ``0b11`` and ``1_0`` are text, which a number field refuses
    with why. Floats are read as PyYAML reads them, less base 60."""


_ProfileLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_ProfileLoader.add_implicit_resolver(_INT, re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$"), list("-+0123456789"))
# PyYAML's own pattern (yaml/resolver.py) less its base-60 alternative.
_ProfileLoader.add_implicit_resolver(
    _FLOAT,
    re.compile(
        r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)


#: PyYAML's context of an error inside a bracket or quote: what it opened, and what closes it.
_OPENED = {
    "while parsing a flow sequence": ("the list opened with [", "]"),
    "while parsing a flow mapping": ("the mapping opened with {", "}"),
    "while scanning a quoted scalar": ("the quoted text", "quote"),
}


def _syntax_problem(exc: yaml.MarkedYAMLError, text: str) -> Problem:
    """A YAML syntax error as one :class:`Problem` with a 1-based line. Inside a bracket or quote
    opened on an earlier line, the sentence names that line too: where the file ends before it is
    closed, the problem's line is the one it opened on (PyYAML's own is the file's end); else the
    line where the reader stopped, with a hint (a comma missing between items, or the bracket left
    open: ``version: [1`` is only noticed on the next line)."""
    problem = exc.problem or exc.context or "invalid YAML"
    opened, stopped = exc.context_mark, exc.problem_mark
    if exc.context in _OPENED and opened and stopped and opened.line != stopped.line:
        what, closer = _OPENED[exc.context]
        if "end of stream" in problem or "<stream end>" in problem:
            return Problem(
                "",
                f"This is not valid YAML: {what} on line {opened.line + 1} is not closed: the file ends before its closing {closer}.",
                opened.line + 1,
            )
        hint = f" (a comma missing between two items, or its closing {closer} left out?)" if closer != "quote" else ""
        return Problem(
            "",
            f"This is not valid YAML: {problem} on line {stopped.line + 1}, inside {what} on line {opened.line + 1}{hint}.",
            stopped.line + 1,
        )
    last = _last_line(text)
    if "<stream end>" in problem and exc.context == "while parsing a flow node":  # "a: [1," and the file ends
        return Problem(
            "",
            f"This is not valid YAML: the file ends inside a list or mapping, after line {last}: a closing ] or }} is missing"
            " (or an item after the last comma).",
            last,
        )
    mark = stopped or opened
    return Problem("", f"This is not valid YAML: {problem}.", min(mark.line + 1, last) if mark else None)


def _last_line(text: str) -> int:
    """The 1-based number of the file's last line that is not blank (PyYAML's end of stream is the line
    after it, which the file does not have)."""
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    return max(1, len(lines))


def load_yaml(text: str) -> tuple[dict, dict[tuple, int]]:
    """Parse the file (YAML 1.1, safe: no tags that build objects; no base-60 numbers, so ``1:30`` is
    text: :class:`_ProfileLoader`). Returns (document, lines). Raises :class:`Refused` for text that
    is not a YAML mapping, with the line of a syntax error, and for a number too long to read."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_PROFILE_BYTES:
        raise Refused(Problem("", f"The profile is larger than {MAX_PROFILE_BYTES // 1024} KiB."))
    if "\x00" in text:
        raise Refused(Problem("", "The profile contains a NUL character; save it as plain UTF-8 text."))
    try:
        depth = 0
        for event in yaml.parse(text, Loader=_ProfileLoader):
            depth += isinstance(event, yaml.CollectionStartEvent) - isinstance(event, yaml.CollectionEndEvent)
            if depth > MAX_DEPTH:
                raise Refused(Problem("", f"The profile is nested more than {MAX_DEPTH} levels deep.", event.start_mark.line + 1))
            # Aliases can multiply a small file into billions of values (a "YAML bomb").
            if isinstance(event, yaml.AliasEvent):
                raise Refused(
                    Problem(
                        "",
                        "Anchors and aliases (&name, *name) are not supported in profiles; write the values out.",
                        event.start_mark.line + 1,
                    )
                )
        node = yaml.compose(text, Loader=_ProfileLoader)
        document = yaml.load(text, Loader=_ProfileLoader)  # noqa: S506 (a SafeLoader)
    except RecursionError:
        raise Refused(Problem("", "The profile is nested too deeply.")) from None
    except ValueError as exc:  # int() past Python's 4,300 digits, a date that does not exist (2024-02-30)
        if "digits" in str(exc):
            raise Refused(Problem("", "A number in the profile has more than 4,300 digits; write a shorter one.")) from None
        raise Refused(Problem("", f"A value could not be read ({exc}); put it in quotes to keep it as text.")) from None
    except yaml.MarkedYAMLError as exc:
        raise Refused(_syntax_problem(exc, text)) from None
    except yaml.YAMLError as exc:
        raise Refused(Problem("", f"This is not valid YAML: {exc}.")) from None
    if not isinstance(document, dict) or node is None:
        raise Refused(Problem("", "A profile is a YAML mapping that starts with 'version: 1'. See docs/profiles.md.", 1))
    return document, _lines(node)


def _depth(value) -> int:
    """How deeply lists and mappings nest in ``value`` (0 for a scalar); iterative, as the nesting
    of an override comes from the request."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list | tuple):
            deepest = max(deepest, level + 1)
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def nul_paths(document) -> list[tuple]:
    """The paths of every text (value or key) in ``document`` that holds a NUL character."""
    found, stack = [], [((), document)]
    while stack:
        loc, item = stack.pop()
        if isinstance(item, str) and "\x00" in item:
            found.append(loc)
        elif isinstance(item, dict):
            for key, value in item.items():
                if isinstance(key, str) and "\x00" in key:
                    found.append((*loc, key))
                stack.append(((*loc, key), value))
        elif isinstance(item, list | tuple):
            stack.extend(((*loc, i), v) for i, v in enumerate(item))
    return sorted(found, key=lambda loc: [str(p) for p in loc])


def apply_overrides(document: dict, overrides: dict | None) -> tuple[dict, list[Problem], set[tuple]]:
    """A copy of ``document`` with ``overrides`` applied. Keys are short names (:data:`OVERRIDE_ALIASES`,
    e.g. ``gpus``) or dotted paths (``resources.cpus``); at most :data:`MAX_OVERRIDES` of them, each
    value nested at most :data:`MAX_DEPTH` levels. Returns (document, errors, overridden paths)."""
    import copy

    result = copy.deepcopy(document)
    errors: list[Problem] = []
    touched: set[tuple] = set()
    if overrides is None:
        return result, errors, touched
    if not isinstance(overrides, dict):
        return result, [Problem("overrides", 'Overrides are a mapping such as {"gpus": 4}.')], touched
    if len(overrides) > MAX_OVERRIDES:
        return (
            result,
            [
                Problem(
                    "overrides",
                    f"At most {MAX_OVERRIDES} overrides at once (there are {len(overrides)}); name fields such as gpus or resources.cpus.",
                )
            ],
            touched,
        )
    allowed = set(OVERRIDE_ALIASES.values())
    for key, value in overrides.items():
        path = OVERRIDE_ALIASES.get(str(key), str(key))
        if path not in allowed:
            names = ", ".join(sorted(OVERRIDE_ALIASES))
            errors.append(Problem(f"overrides.{str(key)[:40]}", f"'{str(key)[:40]}' cannot be overridden. Overridable: {names}."))
            continue
        if _depth(value) > MAX_DEPTH:
            errors.append(Problem(f"overrides.{str(key)[:40]}", f"The value is nested more than {MAX_DEPTH} levels deep."))
            continue
        parts = path.split(".")
        target = result
        for part in parts[:-1]:
            if not isinstance(target.get(part), dict):
                target[part] = {}
            target = target[part]
        target[parts[-1]] = value
        touched.add(tuple(parts))
    return result, errors, touched


def line_of(lines: dict[tuple, int], dotted: str) -> int | None:
    """The line of field ``dotted`` (``lines`` from :func:`load_yaml`), for errors found after parsing:
    its own line, else its enclosing block's (``resources`` for a missing ``resources.gpus_per_node``);
    ``None`` when the file has neither (a field left to its default at the top level, e.g. ``account``)."""
    loc = tuple(dotted.split("."))
    while loc:
        if loc in lines:
            return lines[loc]
        loc = loc[:-1]
    return None


def dump_yaml(data: dict) -> str:
    """A document as YAML in the schema's field order (for clones with overrides)."""
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)
