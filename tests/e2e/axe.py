"""axe-core in the browser tests: inject the vendored ``vendor/axe.min.js`` into a
Playwright page and run it, keeping the violations a person would be stopped by (impact serious or
critical)."""

from __future__ import annotations

from pathlib import Path

AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"
BLOCKING = ("serious", "critical")


def axe_violations(page, *, impacts: tuple[str, ...] = BLOCKING) -> list[dict]:
    """axe-core's violations on ``page`` as it is now (its default rule set: WCAG 2.x A and AA plus best
    practices), those whose ``impact`` is in ``impacts``. Each is axe's own dict: ``id``, ``impact``,
    ``help``, ``helpUrl`` and ``nodes`` (each with ``target``, a list of CSS selectors, and ``html``)."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.add_script_tag(path=str(AXE))
    violations = page.evaluate("async () => (await window.axe.run(document, {resultTypes: ['violations']})).violations")
    return [v for v in violations if v["impact"] in impacts]


def axe_report(violations: list[dict]) -> str:
    """One line per violation and node, for an assertion's message: rule id, impact, what it wants, where."""
    lines = []
    for v in violations:
        for node in v["nodes"]:
            lines.append(f"{v['id']} ({v['impact']}): {v['help']} at {' '.join(node['target'])}: {node['html'][:160]}")
    return "\n".join(lines)
