"""``gpuportal ls``'s ID column of an array whose ids Slurm cannot write short (over 30 characters):
its Slurm id alone, which names the whole array and which show, cancel and logs take, so every row
stays readable; ``show`` prints the whole ref, and a job key is never cut."""

from __future__ import annotations

import pytest

from gpuportal.cli import main

from .fake_api import KEY_1, make_job

pytestmark = pytest.mark.usefixtures("clean_env")

#: An array of irregular ids as the portal stores it (about 250 characters).
LONG = "390_[" + ",".join(str(1 + 5 * (i // 2) + 2 * (i % 2)) for i in range(60)) + ",...,498%5]"


def test_ls_prints_a_long_refs_slurm_id_which_show_takes(env, capsys):
    env.jobs = [
        make_job(id=390, kind="array", slurm_ref=LONG),
        make_job(id=383, kind="array", slurm_ref="383_[1-400:3%5]", key=KEY_1),
    ]
    assert main(["ls"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert rows[0].split()[0] == "390" and rows[1].split()[0] == "383_[1-400:3%5]"
    assert max(len(row) for row in rows) < 160
    env.jobs = [make_job(id=390, kind="array", slurm_ref=LONG)]
    assert main(["show", rows[0].split()[0]]) == 0  # the printed cell, fed back
    assert LONG in capsys.readouterr().out


def test_ls_prints_a_job_key_whole(env, capsys):
    env.jobs = [make_job(id=None, slurm_ref="", key=KEY_1)]
    assert main(["ls"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[0] == KEY_1
