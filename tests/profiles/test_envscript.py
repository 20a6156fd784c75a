"""The job script a profile renders: every profile value reaches bash quoted; CUDA modules and
container images as the site configures them; and the environment part run for real with bash and
uv on this machine (no Slurm): built once per hash, the requirements file's content in the hash."""

from __future__ import annotations

import os
import re
import subprocess

from profiles.envscript import EnvSite, render_profile_script
from profiles.schema import parse_profile

UV = "/opt/gpuportal/tools/bin/uv"


def site(tmp_path=None, **kw) -> EnvSite:
    base = dict(
        cache_dir=str(tmp_path or "/srv/gpuportal/envs"),
        uv=UV,
        pythons=("3.11",),
        cuda_modules={"12.4": "cuda/12.4"},
        container_runtime="",
    )
    base.update(kw)
    return EnvSite(**base)


def profile(run: str, env: str = "") -> str:
    return f"version: 1\nname: t\nresources: {{partition: small}}\nrun: {run}\n" + (f"environment: {env}\n" if env else "")


def test_hostile_values_reach_bash_only_quoted():
    spec = parse_profile(
        profile(
            "{script: '$(touch /tmp/pwned).py', args: ['; pwned-rm ~', '`id`']}",
            "{pip: ['numpy==2.2.6'], requirements: 'r $(id).txt'}",
        )
    )
    script = render_profile_script(spec, site=site())
    assert "python '$(touch /tmp/pwned).py' '; pwned-rm ~' '`id`'" in script
    assert "req='r $(id).txt'" in script and "-r 'r $(id).txt'" in script and "-- numpy==2.2.6" in script
    # Outside single quotes nothing from the profile appears.
    unquoted = re.sub(r"'[^']*'", "''", script)
    assert "pwned" not in unquoted and "`id`" not in unquoted and "$(id)" not in unquoted, unquoted


def test_cuda_module_and_container_image_as_the_site_offers_them():
    script = render_profile_script(parse_profile(profile("{command: nvidia-smi}", "{python: '3.11', cuda: '12.4'}")), site=site())
    assert "export CUDA_VERSION=12.4" in script and "module load cuda/12.4" in script
    assert script.index("module load") < script.index("portal_env\n") < script.index("nvidia-smi")
    image = render_profile_script(
        parse_profile(profile("{script: train.py, args: [--lr, '0.1'], image: 'docker://pytorch/pytorch:2.5'}")),
        site=site(container_runtime="apptainer"),
    )
    assert "apptainer exec --nv docker://pytorch/pytorch:2.5 python3 train.py --lr 0.1" in image and "portal_env" not in image


def test_environment_is_built_once_per_hash_and_the_requirements_file_counts(tmp_path):
    cache, project = tmp_path / "envs", tmp_path / "project"
    cache.mkdir()
    project.mkdir()
    (project / "requirements.txt").write_text("# nothing to install yet\n")
    spec = parse_profile(
        profile(
            "{command: 'python -c \"import sys; print(sys.prefix)\"; echo CUDA=$CUDA_VERSION'}",
            "{python: '3.11', cuda: '12.4', requirements: requirements.txt, system_site_packages: true}",
        )
    )
    script = project / "job.sh"
    script.write_text(render_profile_script(spec, site=site(cache)))
    # The node has no environment modules: a clearly named stand-in for `module` records the call.
    env = {**os.environ, "BASH_FUNC_module%%": '() { echo "stand-in module $*"; }'}

    def run() -> str:
        done = subprocess.run(["bash", str(script)], cwd=project, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    first = run()
    assert "stand-in module load cuda/12.4" in first and "CUDA=12.4" in first
    assert re.search(r"portal-env: built [0-9a-f]{16} in [0-9.]+ s", first), first
    second = run()
    assert "portal-env: cache hit" in second and "portal-env: built" not in second
    (project / "requirements.txt").write_text("# nothing to install yet\n# but a different file\n")
    third = run()
    assert "portal-env: built" in third  # another requirements file is another environment
    assert len([p for p in cache.iterdir() if p.is_dir()]) == 2
