"""The profile file as text, before its schema: read as YAML with the line of every field, within limits
(size, nesting, no NUL, no anchors: a "YAML bomb" is refused before it grows; no tags that build objects,
no key given twice), with a request's overrides applied (short names or dotted paths), and written back (:func:`dump_yaml`). Every refusal is
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
def _entries(node: yaml.Node, path: tuple = ()):
    """Every mapping entry and list item below ``node``, depth first: (path of its parent, key node or
    ``None`` for a list item, value node, its name in the path: the key's text or the item's index)."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else str(key)
            yield path, key, value, name
            yield from _entries(value, (*path, name))
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield path, None, item, index
            yield from _entries(item, (*path, index))


def _lines(node: yaml.Node) -> dict[tuple, int]:
    """Dotted path (tuple) -> 1-based line of the value, from the composed YAML tree."""
    out = {(): node.start_mark.line + 1}
    for path, key, value, name in _entries(node):
        out.setdefault((*path, name), (key or value).start_mark.line + 1)
    return out


#: What YAML reads a key that is not text as (the resolved tag's last part).
_KEY_READ_AS = {"int": "a number", "float": "a number", "bool": "true/false", "null": "empty", "timestamp": "a date"}


def _key_problems(node: yaml.Node) -> list[Problem]:
    """Keys that are not text (``1: x``, ``yes: x``, a list as a key) and keys given twice in one mapping,
    at any depth, each on its key's line: a repeated key would silently replace the first one's value
    (a second ``resources:`` block reset the first one's fields to their defaults)."""
    problems, first, repeated = [], {}, set()
    for path, key, _value, name in _entries(node):
        if key is None or any(path[:i] in repeated for i in range(1, len(path) + 1)):
            continue  # a list item, or inside a block given twice (its own fields are not repeated again)
        line, dotted = key.start_mark.line + 1, ".".join(str(p) for p in (*path, name))
        if not isinstance(key, yaml.ScalarNode):
            kind = "list" if isinstance(key, yaml.SequenceNode) else "mapping"
            dotted, message = ".".join(str(p) for p in path), f"A {kind} cannot be a key: fields are named in words such as cpus."
        elif key.tag != _STR:
            read_as = _KEY_READ_AS.get(key.tag.rsplit(":", 1)[-1], "something other than text")
            message = (
                f"'{key.value[:40]}' is not a field name (YAML reads it as {read_as}): fields are named in words such as cpus."
            )
        elif (path, name) in first:
            repeated.add((*path, name))
            message = f"This key is given twice; it is first set on line {first[path, name]}. Keep one."
        else:
            first[path, name] = line
            continue
        problems.append(Problem(dotted, message, line))
    return problems


def line_for(lines: dict[tuple, int], loc: tuple) -> int | None:
    """The line of the value at ``loc`` (a path tuple, as pydantic's errors give it), else of its nearest
    enclosing block's, else the document's first line."""
    loc = tuple(loc)
    while loc:
        if loc in lines:
            return lines[loc]
        loc = loc[:-1]
    return lines.get(())


_YAML = "tag:yaml.org,2002:"
_INT, _FLOAT, _STR, _BOOL, _NULL = (_YAML + t for t in ("int", "float", "str", "bool", "null"))


class _ProfileLoader(yaml.SafeLoader):
    """PyYAML's safe loader with whole numbers in decimal only, as Slurm and the forms read them: an
    unquoted ``1:30`` (YAML 1.1's base 60) is the text "1:30", a time limit of 1 minute 30 seconds, not
    the integer 90, and ``2:00:00`` two hours, not 7,200; ``017`` is the text "017" (17 minutes as a
    time limit), not octal 15, and ``0x1F``, ``0b11`` and ``1_0`` are text, which a number field refuses
    with why. Floats are read as PyYAML reads them, less base 60. A value that cannot be built (a date
    that does not exist, a number past 4,300 digits) raises :class:`_Unreadable` with its node."""

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep=deep)
        except _Unreadable:
            raise
        except ValueError as exc:
            raise _Unreadable(str(exc), node) from None


class _Unreadable(ValueError):
    """A value of the file that could not be built; ``node`` is where it is."""

    def __init__(self, reason: str, node: yaml.Node):
        super().__init__(reason)
        self.node = node


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


#: Tags a value may carry, and what it must read as without one (``!!float 1`` is 1.0; ``!!int 0x10`` is refused).
_TAGS = {_STR: None, _INT: {_INT}, _FLOAT: {_INT, _FLOAT}, _BOOL: {_BOOL}, _NULL: {_NULL}}


def _implicit_tag(value: str) -> str:
    """What a plain scalar ``value`` reads as in a profile (PyYAML's resolver, with :class:`_ProfileLoader`'s numbers)."""
    resolvers = _ProfileLoader.yaml_implicit_resolvers
    for tag, regexp in resolvers.get(value[:1], []) + resolvers.get(None, []):
        if regexp.match(value):
            return tag
    return _STR


def _event_problem(event: yaml.Event) -> Problem | None:
    """An anchor, an alias or a tag other than a plain ``!!str``, ``!!int``, ``!!float``, ``!!bool`` or
    ``!!null`` (whose value must read as the tag says): ``!!binary``, ``!!timestamp``, ``!!python/...``,
    a tag on a list or mapping. Aliases can multiply a small file into billions of values (a "YAML bomb")."""
    line = event.start_mark.line + 1
    if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
        return Problem("", "Anchors and aliases (&name, *name) are not supported in profiles; write the values out.", line)
    tag = getattr(event, "tag", None)
    if tag is None:
        return None
    shown = "!!" + tag[len(_YAML) :] if tag.startswith(_YAML) else tag
    if not isinstance(event, yaml.ScalarEvent) or tag not in _TAGS:
        return Problem(
            "", f"The tag {shown[:60]} is not supported in profiles: write the value plainly (text, a number, true/false).", line
        )
    if _TAGS[tag] is not None and _implicit_tag(event.value) not in _TAGS[tag]:
        return Problem("", f"'{event.value[:40]}' is not what its tag {shown} says: write the value without the tag.", line)
    return None


def _check_events(text: str) -> None:
    """Refuses nesting past :data:`MAX_DEPTH` and what :func:`_event_problem` refuses, before anything is built."""
    depth = 0
    for event in yaml.parse(text, Loader=_ProfileLoader):
        depth += isinstance(event, yaml.CollectionStartEvent) - isinstance(event, yaml.CollectionEndEvent)
        if depth > MAX_DEPTH:
            raise Refused(Problem("", f"The profile is nested more than {MAX_DEPTH} levels deep.", event.start_mark.line + 1))
        problem = _event_problem(event)
        if problem:
            raise Refused(problem)


#: Names of the control characters a profile is most likely to hold (pasted from a terminal or a PDF).
_CONTROL_NAMES = {0x07: "bell", 0x08: "backspace", 0x0B: "vertical tab", 0x0C: "form feed", 0x1B: "escape, ESC", 0x7F: "delete"}


def _character_problem(exc: yaml.reader.ReaderError, text: str) -> Problem:
    """A character YAML does not accept (a control character, U+FFFE), with its line and column."""
    code = ord(exc.character) if isinstance(exc.character, str) else exc.character
    line, column = text.count("\n", 0, exc.position) + 1, exc.position - text.rfind("\n", 0, exc.position)
    if code < 0x20 or 0x7F <= code <= 0x9F:
        name = _CONTROL_NAMES.get(code)
        what = f"a control character U+{code:04X}" + (f" ({name})" if name else "")
    else:
        what = f"a character YAML does not allow, U+{code:04X},"
    return Problem("", f"The profile contains {what} on line {line}, column {column}: delete it.", line)


def _unreadable_problem(exc: ValueError, root: yaml.Node | None) -> Problem:
    """A value that could not be built, named by its field and line where it is known (:class:`_Unreadable`)."""
    node, field, line, value = getattr(exc, "node", None), "", None, "A value"
    if node is not None and root is not None:
        at = node.start_mark.index
        path = next(
            (p + (n,) for p, _k, v, n in _entries(root) if isinstance(v, yaml.ScalarNode) and v.start_mark.index == at), ()
        )
        field, line, value = ".".join(str(p) for p in path), node.start_mark.line + 1, f"'{str(node.value)[:40]}'"
    if "digits" in str(exc):  # int() past Python's 4,300 digits
        return Problem(field, "This number has more than 4,300 digits; write a shorter one.", line)
    read_as = " as a date" if getattr(node, "tag", "") == _YAML + "timestamp" else ""
    return Problem(field, f"{value} could not be read{read_as} ({exc}); put it in quotes to keep it as text.", line)


def load_yaml(text: str) -> tuple[dict, dict[tuple, int]]:
    """Parse the file (YAML 1.1, safe: no anchors, no tags but plain ``!!str``/``!!int``/``!!float``/``!!bool``/
    ``!!null``; no base-60 numbers, so ``1:30`` is text: :class:`_ProfileLoader`). Returns (document, lines).
    Raises :class:`Refused` for text that is not a YAML mapping, with the line of a syntax error or of a
    character YAML does not allow, for a key given twice or not text, and for a value that cannot be read
    (a number too long, a date that does not exist), naming its field."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_PROFILE_BYTES:
        raise Refused(Problem("", f"The profile is larger than {MAX_PROFILE_BYTES // 1024} KiB."))
    if "\x00" in text:
        raise Refused(Problem("", "The profile contains a NUL character; save it as plain UTF-8 text."))
    node = None
    try:
        _check_events(text)
        node = yaml.compose(text, Loader=_ProfileLoader)
        problems = _key_problems(node) if node is not None else []
        if problems:
            raise Refused(*problems)
        document = yaml.load(text, Loader=_ProfileLoader)  # noqa: S506 (a SafeLoader)
    except RecursionError:
        raise Refused(Problem("", "The profile is nested too deeply.")) from None
    except ValueError as exc:  # a date that does not exist (2024-02-30), a number past 4,300 digits
        raise Refused(_unreadable_problem(exc, node)) from None
    except yaml.MarkedYAMLError as exc:
        raise Refused(_syntax_problem(exc, text)) from None
    except yaml.reader.ReaderError as exc:
        raise Refused(_character_problem(exc, text)) from None
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
