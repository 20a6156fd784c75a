"""Size limits of the app code, checked by scripts/lint.sh (so by make test and make test-fast).

A module of more than ``max_module_lines`` lines, a function of more than ``max_function_lines``
lines or a package of more than ``max_package_modules`` modules is too big to hold in mind. The
limits and the places still over them live in pyproject.toml under ``[tool.portal-sizes]``: each
such place is listed with its size today, and may shrink but not grow. The check fails when

- a place not on the list goes over a limit (split it, or say in the commit why not and list it),
- a listed place grew (its size is over the listed one) or shrank (list its new size: the ratchet), or
- a listed place is gone or within its limit (take it off the list: the limit holds for it now).

What counts: the Python files of the import-linter root packages (``[tool.importlinter]
root_packages``), of the hub's package (``hub/portal_hub``) and of the CLI's (``cli/gpuportal``), without migrations and tests. A
module's size is its line count; a function's is from its ``def`` line to its last line, decorators
not counted; a package's is its ``.py`` files directly inside it, ``__init__.py`` not counted.

Usage: ``python scripts/check_sizes.py`` (exit status 1 and one line per finding when a check fails;
``--list`` prints every place over a limit with its size, for updating the list).
"""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Packages outside the repository root: the hub's (hub/portal_hub) and the CLI's (cli/gpuportal, its own
#: distribution; import-linter names it ``gpuportal``).
EXTRA_PACKAGES = ["hub/portal_hub", "cli/gpuportal"]


def sizes(repo: Path, packages: list[str]) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """(module lines by path, function lines by ``path:qualified.name``, modules by package dir) for
    every module under ``packages`` (directories relative to ``repo``), migrations and tests aside."""
    modules: dict[str, int] = {}
    functions: dict[str, int] = {}
    package_modules: dict[str, int] = {}
    for package in packages:
        if not (repo / package).is_dir():  # a root package that lives elsewhere (EXTRA_PACKAGES)
            continue
        for path in sorted((repo / package).rglob("*.py")):
            rel = path.relative_to(repo)
            if {"migrations", "tests", "node_modules"} & set(rel.parts):
                continue
            text = path.read_text()
            modules[str(rel)] = len(text.splitlines())
            if path.name != "__init__.py":
                package_modules[str(rel.parent)] = package_modules.get(str(rel.parent), 0) + 1
            for name, node in _functions(ast.parse(text, filename=str(rel))):
                functions[f"{rel}:{name}"] = node.end_lineno - node.lineno + 1
    return modules, functions, package_modules


def _functions(tree: ast.AST, prefix: str = ""):
    """(qualified name, node) of every function and method in ``tree``, nested ones included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from _functions(node, prefix + node.name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")
        else:
            yield from _functions(node, prefix)


def findings(config: dict, measured: tuple[dict[str, int], dict[str, int], dict[str, int]]) -> list[str]:
    """What breaks the limits of ``config`` (the ``[tool.portal-sizes]`` table), one sentence each."""
    limits = {
        "module": (config["max_module_lines"], "lines"),
        "function": (config["max_function_lines"], "lines"),
        "package": (config["max_package_modules"], "modules"),
    }
    allowed = config.get("allowed", {})
    out: list[str] = []
    for kind, found in zip(("module", "function", "package"), measured, strict=True):
        limit, unit = limits[kind]
        listed = allowed.get(kind, {})
        for place, size in sorted(found.items()):
            if size <= limit:
                continue
            if place not in listed:
                out.append(f"{place}: {kind} of {size} {unit}, over the limit of {limit}: split it")
            elif size > listed[place]:
                out.append(f"{place}: grew to {size} {unit} (listed at {listed[place]}, limit {limit}): shrink it")
            elif size < listed[place]:
                out.append(f"{place}: shrank to {size} {unit}: list it at {size} (was {listed[place]}), so it cannot grow back")
        for place in sorted(listed):
            if found.get(place, 0) <= limit:
                out.append(f"{place}: within the {kind} limit now (or gone): take it off [tool.portal-sizes.allowed.{kind}]")
    return out


def main(argv: list[str]) -> int:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    config = pyproject["tool"]["portal-sizes"]
    packages = list(pyproject["tool"]["importlinter"]["root_packages"]) + EXTRA_PACKAGES
    measured = sizes(REPO, packages)
    if "--list" in argv:
        limits = (config["max_module_lines"], config["max_function_lines"], config["max_package_modules"])
        for kind, found, limit in zip(("module", "function", "package"), measured, limits, strict=True):
            print(f"[tool.portal-sizes.allowed.{kind}]")
            for place, size in sorted(found.items()):
                if size > limit:
                    print(f'"{place}" = {size}')
        return 0
    problems = findings(config, measured)
    for line in problems:
        print(line)
    over = sum(len(v) for v in config.get("allowed", {}).values())
    print(f"sizes: {len(problems)} problem(s); {over} place(s) still over a limit, listed in pyproject.toml")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
