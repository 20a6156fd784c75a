"""The job script a profile renders: every profile value reaches bash quoted; CUDA modules and
site-curated images; and the environment part run for real with bash and
uv on this machine (no Slurm): built once per hash in the user's area, the requirements file's
content in the hash, a finished entry read-only, and an entry that changed or that others could
change refused and built again (tests/profiles/test_env_integration.py has other users, on the
cluster)."""

from __future__ import annotations

import json
import os
import pwd
import re
import subprocess
from pathlib import Path

import pytest

from portal.refusals import Refused
from profiles.envscript import PORTAL_ENV_SH, EnvImage, EnvSite, env_spec_json, render_profile_script
from profiles.schema import parse_profile
from runtimes import path_owners_sh

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
    assert "-r 'r $(id).txt'" in script and "-- numpy==2.2.6" in script
    assert re.search(r"^portal_env \S+ \S+ '\{.*\}' 'r \$\(id\)\.txt' 'python 3\.11, 1 package'$", script, re.M), script
    # Outside single quotes nothing from the profile appears (the embedded portal_env.sh and
    # runtimes/path_owners.sh are the same text in every script and hold no profile value: they are
    # left out of this check).
    assert PORTAL_ENV_SH.read_text() in script and path_owners_sh() in script
    unquoted = re.sub(r"'[^']*'", "''", script.replace(PORTAL_ENV_SH.read_text(), "").replace(path_owners_sh(), ""))
    assert "pwned" not in unquoted and "`id`" not in unquoted and "$(id)" not in unquoted, unquoted


def test_cuda_module_as_the_site_offers_it():
    script = render_profile_script(parse_profile(profile("{command: nvidia-smi}", "{python: '3.11', cuda: '12.4'}")), site=site())
    assert "export CUDA_VERSION=12.4" in script and "module load cuda/12.4" in script
    assert script.index("module load") < script.index("\nportal_env ") < script.index("nvidia-smi")


IMAGE = EnvImage(name="debian12-sklearn", digest="sha256:" + "ab" * 32, python="3.11")


def test_in_an_image_the_venv_is_on_top_of_its_python_keyed_by_its_digest():
    """In a site image the profile's script runs inside it (jobs/worker/batch.py wraps it); its venv is
    built there, on the image's Python with the image's packages visible, and the image's digest is
    part of the cache key: another image, or a rebuilt one, gets its own environment."""
    text = "version: 1\nname: t\nimage: debian12-sklearn\nresources: {partition: small}\nrun: {script: train.py}\nenvironment: {pip: [six]}\n"
    spec = parse_profile(text)
    assert spec.image == "debian12-sklearn"
    script = render_profile_script(spec, site=site(), image=IMAGE)
    assert f"echo 'portal-env: in image debian12-sklearn ({IMAGE.digest})'" in script
    assert "--system-site-packages" in script and "apptainer" not in script and "ch-run" not in script
    spec_json = json.loads(env_spec_json(spec.environment, site(), IMAGE))
    assert spec_json == {
        "python": "3.11",
        "cuda": "",
        "pip": ["six"],
        "requirements": "",
        "system_site_packages": True,
        "image": IMAGE.digest,
    }
    assert "'python 3.11 of image debian12-sklearn, 1 package'" in script
    other = EnvImage(name="debian12-sklearn", digest="sha256:" + "cd" * 32, python="3.11")
    assert env_spec_json(spec.environment, site(), other) != env_spec_json(spec.environment, site(), IMAGE)
    # On the node's own system the spec (and so every existing cache entry's hash) is as before.
    assert json.loads(env_spec_json(spec.environment, site())) == {
        "python": "3.11",
        "cuda": "",
        "pip": ["six"],
        "requirements": "",
        "system_site_packages": False,
    }
    # The profile can still ask for a venv that hides the image's packages.
    alone = parse_profile(text.replace("pip: [six]", "pip: [six], system_site_packages: false"))
    assert "--system-site-packages" not in render_profile_script(alone, site=site(), image=IMAGE)
    # Without an environment block the image's own python3 runs the script.
    bare = render_profile_script(parse_profile(text.replace("environment: {pip: [six]}\n", "")), site=site(), image=IMAGE)
    assert "portal_env " not in bare and "\npython3 train.py\n" in bare and "the Python of image debian12-sklearn" in bare


def test_an_image_is_a_registered_name_never_a_path():
    base = "version: 1\nname: t\nresources: {partition: small}\n"
    for bad in ["/home/bob/private-image", "../x", "x;$(touch /tmp/pwned)", "docker://pytorch/pytorch:2.5"]:
        with pytest.raises(Refused) as refused:
            parse_profile(base + f"image: {json.dumps(bad)}\nrun: {{command: echo}}\n")
        (problem,) = refused.value.problems
        assert problem.field == "image" and "never a path" in problem.message and problem.line == 4, problem
    assert parse_profile(base + "image: none\nrun: {command: echo}\n").image == ""
    with pytest.raises(Refused) as refused:
        parse_profile(base + "run: {command: echo, image: 'docker://pytorch/pytorch:2.5'}\n")
    (problem,) = refused.value.problems
    assert problem.field == "run.image" and "image: debian12-sklearn" in problem.message


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
    area = cache / pwd.getpwuid(os.getuid()).pw_name  # the job's user's own area
    assert [p.name for p in cache.iterdir()] == [area.name] and area.stat().st_mode & 0o777 == 0o755
    assert len([p for p in area.iterdir() if p.is_dir()]) == 2


@pytest.fixture
def built(tmp_path):
    """An environment built once by a job script run with bash (as this test's user): yields
    ``run()`` (runs the script again, returns ``(returncode, stdout, stderr)``), the entry's path
    and a marker path that planted code would write."""
    cache, project = tmp_path / "envs", tmp_path / "project"
    cache.mkdir()
    project.mkdir()
    marker = tmp_path / "planted-code-ran"
    spec = parse_profile(profile("{command: 'python -c \"import sys; print(sys.prefix)\"'}", "{python: '3.11'}"))
    script = project / "job.sh"
    script.write_text(render_profile_script(spec, site=site(cache)))

    def run() -> tuple[int, str, str]:
        done = subprocess.run(["bash", str(script)], cwd=project, capture_output=True, text=True, timeout=120)
        return done.returncode, done.stdout, done.stderr

    code, out, err = run()
    assert code == 0 and re.search(r"portal-env: built [0-9a-f]{16} in", out), (out, err)
    [entry] = [p for p in (cache / pwd.getpwuid(os.getuid()).pw_name).iterdir() if p.is_dir()]
    return run, entry, marker


def writable(path: Path):
    """Let this test change a read-only entry (as its owner could)."""
    for p in [path, *path.rglob("*")]:
        if not p.is_symlink():
            p.chmod(p.stat().st_mode | 0o200)


def test_a_finished_entry_is_read_only_and_has_a_manifest(built):
    run, entry, _ = built
    assert not [p for p in [entry, *entry.rglob("*")] if not p.is_symlink() and p.stat().st_mode & 0o222]
    manifest = (entry / ".portal-manifest").read_text().splitlines()
    assert manifest[0] == "portal-env manifest 1" and manifest[1] == f"hash {entry.name}"
    assert re.fullmatch(r"files [0-9a-f]{64}", manifest[2])
    code, out, _ = run()
    assert code == 0 and f"portal-env: cache hit {entry.name}" in out and str(entry) in out


def test_an_entry_whose_files_changed_is_refused_and_built_again(built):
    run, entry, marker = built
    writable(entry)
    site_packages = next(entry.glob("lib/python*/site-packages"))
    (site_packages / "zz_planted.pth").write_text(f"import os; open({str(marker)!r}, 'w').close()\n")
    for p in [entry, *entry.rglob("*")]:  # owner and modes as a finished entry's: only the manifest can tell
        if not p.is_symlink():
            p.chmod(p.stat().st_mode & ~0o222)
    code, out, err = run()
    assert code == 0, err
    assert f"portal-env: refused {entry}: its files are not the ones it was built with" in out, out
    assert "; building it again" in out and re.search(r"portal-env: built [0-9a-f]{16} in", out)
    assert not marker.exists() and not (site_packages / "zz_planted.pth").exists()


def test_an_entry_others_could_change_or_an_unfinished_one_is_refused_and_built_again(built):
    run, entry, _ = built
    writable(entry)
    activate = entry / "bin" / "activate"
    activate.chmod(0o666)
    code, out, _ = run()
    assert code == 0 and f"portal-env: refused {entry}: other users can write bin/activate in it (mode 666)" in out, out
    (entry / ".portal-manifest").chmod(0o644)
    (entry).chmod(0o755)
    (entry / ".portal-manifest").unlink()
    code, out, _ = run()
    assert code == 0 and f"portal-env: refused {entry}: it has no manifest (an unfinished build); building it again" in out, out


def test_a_cache_others_can_write_in_is_refused_and_the_job_builds_a_private_environment(tmp_path):
    cache, project = tmp_path / "envs", tmp_path / "project"
    cache.mkdir()
    project.mkdir()
    cache.chmod(0o777)  # world-writable without the sticky bit: anyone could replace anyone's area
    spec = parse_profile(profile("{command: 'python -c \"import sys; print(sys.prefix)\"'}", "{python: '3.11'}"))
    (project / "job.sh").write_text(render_profile_script(spec, site=site(cache)))
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(["bash", "job.sh"], cwd=project, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (
        f"portal-env: refused the environment cache {cache}: other users can write in {cache} (mode 777, not sticky)"
        in done.stdout
    )
    prefix = done.stdout.strip().splitlines()[-1]
    assert prefix.startswith(f"{tmp_path}/portal-env-") and "(private)" in done.stdout
    assert list(cache.iterdir()) == [] and not Path(prefix).exists()  # nothing cached, the private one removed at the end
