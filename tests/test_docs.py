"""The README stays short, the project's Markdown and code cite no tracker numbers, and links name only what exists.

Checked: README.md (at most 150 lines, none over 400 characters); README.md, CONTRIBUTING.md and docs/*.md
(docs/benchmarks-log.md, the run log kept as history, excepted from the citation rule): no "issue N" or
"design decision N" (any case, N digits), and every relative link names a file that exists and, into
docs/decisions.md, a heading that exists there (GitHub's anchors: lowercase, spaces to "-", punctuation
dropped). The code the repository tracks (``git ls-files``: Python, shell, templates, JavaScript, TOML, YAML
and .conf files; vendored files and this file's own examples excepted) cites no tracker number either, and
each ``docs/decisions.md#anchor`` it names is a heading there. File reads and one ``git ls-files``: no clock,
no network, no database.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DECISIONS = REPO / "docs" / "decisions.md"
README_MAX_LINES = 150
LINE_MAX_CHARS = 400

#: "issue 33", "Issue #7", "design decision 4", "decision 12" (also across a line break).
CITATION = re.compile(r"\b(?:issue|(?:design\s+)?decision)s?\s+#?\d+", re.IGNORECASE)
#: A Markdown link or image: [text](target) or [text](target "title").
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def markdown_files() -> list[Path]:
    """README.md, CONTRIBUTING.md and every docs/*.md that exists, in a stable order."""
    top = [p for p in (README, REPO / "CONTRIBUTING.md") if p.exists()]
    return top + sorted((REPO / "docs").glob("*.md"))


def github_anchor(heading: str) -> str:
    """GitHub's anchor for a heading's text: lowercase, punctuation dropped (letters, digits, "-", "_" and
    spaces kept), each space a "-". ``"Identity is issuer + sub"`` -> ``"identity-is-issuer--sub"``."""
    text = re.sub(r"[`*_~]", lambda m: "_" if m.group() == "_" else "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's ATX headings (``#`` to ``######``), outside fenced code; none when
    the file does not exist (every link into it then fails as a missing file)."""
    if not path.exists():
        return set()
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {github_anchor(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.MULTILINE)}


def citations(text: str) -> list[str]:
    """Every "issue N" / "design decision N" / "decision N" in ``text``, as written."""
    return [m.group(0) for m in CITATION.finditer(text)]


def broken_links(path: Path, decision_anchors: set[str], decisions: Path = DECISIONS) -> list[str]:
    """The relative links of ``path`` (outside fenced code) whose file does not exist, or whose anchor into
    ``decisions`` (docs/decisions.md) is not one of ``decision_anchors``; each as "target (why)"."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("//"):
            continue  # http:, https:, mailto:, ...
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and dest == decisions.resolve() and anchor not in decision_anchors:
            broken.append(f"{target} (no such heading in docs/decisions.md)")
    return broken


def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; at most {README_MAX_LINES}"
    long = [i for i, line in enumerate(lines, 1) if len(line) > LINE_MAX_CHARS]
    assert long == [], f"README.md lines over {LINE_MAX_CHARS} characters: {long}"


#: The benchmarks' run log keeps its history as recorded, tracker numbers in its headings included.
HISTORY = {"benchmarks-log.md"}


@pytest.mark.parametrize("path", [p for p in markdown_files() if p.name not in HISTORY], ids=lambda p: str(p.relative_to(REPO)))
def test_no_tracker_numbers(path):
    found = citations(path.read_text(encoding="utf-8"))
    assert found == [], f"{path.relative_to(REPO)} cites {found}: say the reason, or link docs/decisions.md"


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(path):
    assert broken_links(path, anchors(DECISIONS)) == []


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Identity is issuer + sub", "identity-is-issuer--sub"),
        ("A request is a row before it is a Slurm job", "a-request-is-a-row-before-it-is-a-slurm-job"),
        ("Slurm schedules, the portal never does", "slurm-schedules-the-portal-never-does"),
        ("`make dev` with both clusters", "make-dev-with-both-clusters"),
        ("Your team's quota", "your-teams-quota"),
    ],
)
def test_github_anchor(heading, anchor):
    assert github_anchor(heading) == anchor


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("as issue 21 asked", ["issue 21"]),
        ("Design decision 4 still holds", ["Design decision 4"]),
        ("see Issue #7 and decision\n12", ["Issue #7", "decision\n12"]),
        ("issues and decisions, 4 of them", []),
    ],
)
def test_citation_pattern(text, expected):
    assert citations(text) == expected


#: The code files the citation rule covers, by how their names end.
CODE_SUFFIXES = (".py", ".sh", ".html", ".js", ".toml", ".yml", ".yaml", ".conf")
#: Never checked: the run log kept as history, vendored third-party code, and this file (its examples of
#: the pattern must cite).
CODE_EXEMPT = re.compile(r"^docs/benchmarks-log\.md$|^tests/e2e/vendor/|(^|/)node_modules/|^tests/test_docs\.py$")
#: A link into docs/decisions.md as code writes it: ``docs/decisions.md#identity-is-issuer--sub``.
DECISION_LINK = re.compile(r"docs/decisions\.md#([\w-]+)")


def code_files() -> list[Path]:
    """The code files git tracks (:data:`CODE_SUFFIXES`), less :data:`CODE_EXEMPT`, in git's order."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    names = [n for n in listed.split("\0") if n.endswith(CODE_SUFFIXES) and not CODE_EXEMPT.search(n)]
    return [REPO / n for n in names if (REPO / n).is_file()]


def test_code_cites_no_tracker_numbers():
    found = {}
    for path in code_files():
        cited = citations(path.read_text(encoding="utf-8", errors="replace"))
        if cited:
            found[str(path.relative_to(REPO))] = cited
    assert found == {}, f"code cites tracker numbers: {found}; say the reason, or link docs/decisions.md#<heading>"


def test_code_links_only_decisions_that_exist():
    known = anchors(DECISIONS)
    broken = {}
    for path in code_files():
        missing = sorted(set(DECISION_LINK.findall(path.read_text(encoding="utf-8", errors="replace"))) - known)
        if missing:
            broken[str(path.relative_to(REPO))] = missing
    assert broken == {}, f"links to headings docs/decisions.md lacks: {broken}"


def test_code_files_are_found():
    names = {str(p.relative_to(REPO)) for p in code_files()}
    assert {"portal/settings/base.py", "pyproject.toml", "docker-compose.yml"} <= names
    assert not any(CODE_EXEMPT.search(n) for n in names)


def test_broken_links_are_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[ok](page.md) [gone](missing.md) [web](https://example.org/x.md)\n```\n[in code](nowhere.md)\n```\n")
    assert broken_links(page, set()) == ["missing.md (no such file)"]


def test_unknown_decision_anchors_are_found(tmp_path):
    decisions = tmp_path / "decisions.md"
    decisions.write_text("# Decisions\n\n## Identity is issuer + sub\n")
    page = tmp_path / "page.md"
    page.write_text("[a](decisions.md#identity-is-issuer--sub) [b](decisions.md#identity-is-email)\n")
    assert broken_links(page, anchors(decisions), decisions) == [
        "decisions.md#identity-is-email (no such heading in docs/decisions.md)"
    ]
