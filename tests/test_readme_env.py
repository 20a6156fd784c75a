"""The admin guide's table of environment variables (docs/admin-guide.md) is portal/env.py's SCHEMA (both ways)."""

from __future__ import annotations

import re
from pathlib import Path

from portal.env import SCHEMA


def test_every_variable_is_documented_and_every_documented_one_exists():
    text = (Path(__file__).resolve().parent.parent / "docs" / "admin-guide.md").read_text()
    table = text.split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`((?:PORTAL|DATABASE|REDIS)_[A-Z_]+)`", table.split("The scripts read a few more")[0]))
    assert set(SCHEMA) - documented == set()
    assert documented - set(SCHEMA) == set()
