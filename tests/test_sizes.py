"""scripts/check_sizes.py: the size limits of the app code hold, and the check can fail."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_sizes", REPO / "scripts" / "check_sizes.py")
check_sizes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_sizes)

LIMITS = {"max_module_lines": 10, "max_function_lines": 3, "max_package_modules": 2}


@pytest.fixture
def tree(tmp_path):
    """An app ``app/`` of three modules: ``big.py`` 12 lines with a 4-line method, two small ones."""
    app = tmp_path / "app"
    (app / "migrations").mkdir(parents=True)
    (app / "__init__.py").write_text("")
    (app / "big.py").write_text(
        "class C:\n    def f(self):\n        a = 1\n        b = 2\n        return a + b\n" + "x = 1\n" * 7
    )
    (app / "one.py").write_text("y = 1\n")
    (app / "two.py").write_text("def g():\n    return 1\n")
    (app / "migrations" / "0001_initial.py").write_text("z = 1\n" * 50)  # never counted
    return tmp_path


def test_sizes_measure_modules_functions_and_packages_without_migrations(tree):
    modules, functions, packages = check_sizes.sizes(tree, ["app"])
    assert modules == {"app/__init__.py": 0, "app/big.py": 12, "app/one.py": 1, "app/two.py": 2}
    assert functions == {"app/big.py:C.f": 4, "app/two.py:g": 2}
    assert packages == {"app": 3}


def test_a_place_over_a_limit_and_not_listed_fails(tree):
    found = check_sizes.findings(LIMITS, check_sizes.sizes(tree, ["app"]))
    assert found == [
        "app/big.py: module of 12 lines, over the limit of 10: split it",
        "app/big.py:C.f: function of 4 lines, over the limit of 3: split it",
        "app: package of 3 modules, over the limit of 2: split it",
    ]


def test_a_listed_place_is_listed_at_its_size_and_leaves_the_list_within_the_limit(tree):
    measured = check_sizes.sizes(tree, ["app"])
    allowed = {"module": {"app/big.py": 12, "app/one.py": 20}, "function": {"app/big.py:C.f": 4}, "package": {"app": 2}}
    found = check_sizes.findings({**LIMITS, "allowed": allowed}, measured)
    assert found == [
        "app/one.py: within the module limit now (or gone): take it off [tool.portal-sizes.allowed.module]",
        "app: grew to 3 modules (listed at 2, limit 2): shrink it",
    ]
    allowed = {"module": {"app/big.py": 13}, "function": {"app/big.py:C.f": 4}, "package": {"app": 3}}
    assert check_sizes.findings({**LIMITS, "allowed": allowed}, measured) == [
        "app/big.py: shrank to 12 lines: list it at 12 (was 13), so it cannot grow back"
    ]
    allowed = {"module": {"app/big.py": 12}, "function": {"app/big.py:C.f": 4}, "package": {"app": 3}}
    assert check_sizes.findings({**LIMITS, "allowed": allowed}, measured) == []


def test_the_repository_keeps_its_limits():
    """What scripts/lint.sh runs: no new place over a limit, no listed place grown."""
    assert check_sizes.main([]) == 0
