"""Sessions in site images: the session form and the API offer only images whose
``offers`` hold the session kind's server; the spawn check answers with the checked image (name,
path, runtime, digest); the portal's batch script runs the image's /opt/jupyter server inside it through
runtimes (the one place a container command line is made), after a fail-fast check that says which
image is gone. And the identity rule: the spawner takes the user from the hub only, so a request
naming another user, or another user's image directory, cannot run as that user or from there.
No hub, no Slurm here (tests/interactive/test_session_images_integration.py has the real ones)."""

from __future__ import annotations

import shlex

import pytest

from images.availability import image_state_store
from images.models import Image
from interactive.models import Session
from interactive.options import parse_session_options

from .conftest import session_scripts
from .test_options_and_internal import hub_settings, policy, post  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db

DIGEST = "sha256:" + "5e" * 32


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create(username="alice", oidc_issuer="t", oidc_sub="a", slurm_accounts=["vision"])


def image(name: str, *, offers: list[str], path: str | None = None, available: bool = True, **kw) -> Image:
    """A registered image, checked on the sessions cluster (as the availability task stores it)."""
    from slurm.clusters import default_sessions_cluster

    made = Image.objects.create(
        name=name,
        os="Debian GNU/Linux 12 (bookworm)",
        python_version="3.11",
        runtime="charliecloud",
        path=path or f"/srv/gpuportal/images/{name}",
        digest=DIGEST,
        offers=offers,
        **kw,
    )
    image_state_store(made, default_sessions_cluster().name, available=available, reason="" if available else "it is not there")
    return made


def spawn(client, options: dict):
    return post(client, "/hub-internal/spawn-check", {"user": "alice", "server_name": "s-1", "options": options})


def test_a_lab_session_runs_its_server_inside_the_image(client, hub_settings, alice, settings):
    image("debian12-sklearn", offers=["jupyterlab"])
    r = spawn(client, {"image": "debian12-sklearn"})
    assert r.status_code == 200, r.content
    answer = r.json()["settings"]
    assert answer["image"] == {
        "name": "debian12-sklearn",
        "path": "/srv/gpuportal/images/debian12-sklearn",
        "runtime": "charliecloud",
        "digest": DIGEST,
        "env_cache": settings.PORTAL_ENV_CACHE_DIR,
    }
    [built] = session_scripts(answer)
    lines = built.splitlines()
    home = next(line.split("=", 1)[1] for line in lines if line.startswith("export HOME="))
    # The image's own Jupyter venv, not the node's.
    assert "export PATH=/opt/jupyter/bin:/usr/local/bin:/usr/bin:/bin" in lines
    assert f"echo 'session in image debian12-sklearn ({DIGEST}), runtime charliecloud'" in lines
    # Fail fast, with one sentence naming the image, when it is gone from the node.
    check = lines.index(next(line for line in lines if line.startswith("if ! ")))
    assert "/srv/gpuportal/images/debian12-sklearn" in lines[check]
    assert "The image debian12-sklearn (/srv/gpuportal/images/debian12-sklearn) is no longer on the cluster" in lines[check + 1]
    assert lines[check + 2].strip() == "exit 2"
    argv = shlex.split(lines[-1])
    assert argv[0] == "exec" and argv[1] == "ch-run"
    assert argv[argv.index("--") + 1 :] == ["/opt/jupyter/bin/batchspawner-singleuser", "jupyterhub-singleuser"]
    assert "/srv/gpuportal/images/debian12-sklearn" in argv[: argv.index("--")]
    binds = [argv[i + 1] for i, a in enumerate(argv) if a == "-b"] + [
        a[len("--bind=") :] for a in argv if a.startswith("--bind=")
    ]
    # The home (logs, notebooks): Charliecloud's --home for /home/<user>, else a bind at the same path.
    assert "--home" in argv or any(b.startswith(f"{home}:") for b in binds), argv
    assert any(settings.PORTAL_ENV_CACHE_DIR in b for b in binds), argv  # the environment cache
    session = Session.objects.get(user=alice)
    assert session.ide == "lab" and session.image_name == "debian12-sklearn"  # the card and the API show it
    from api.sessions import session_out
    from interactive.services import session_cards

    cards, _ = session_cards(user=alice)
    assert [session_out(card)["image"] for card in cards] == ["debian12-sklearn"]


def test_only_images_with_the_kinds_server_are_offered_and_accepted(client, hub_settings, alice, policy):
    image("debian12-sklearn", offers=["jupyterlab"])
    image("debian12-batch", offers=[])  # no session server in it: batch jobs only
    image("gone-lab", offers=["jupyterlab"], available=False)
    image("train-only", offers=["jupyterlab"], partitions=["train"])
    # The form: none, and the images that hold a server of a kind this site offers.
    client.force_login(alice)
    page = client.get("/sessions/").content.decode()
    assert 'value="debian12-sklearn"' in page and "none: the node&#x27;s own system" in page
    assert 'value="debian12-batch"' not in page
    # The API lists, per kind, the images that hold its server.
    from api.sessions import kind_out
    from interactive.kinds import KINDS

    assert "debian12-sklearn" in kind_out(KINDS["lab"])["images"] and "debian12-batch" not in kind_out(KINDS["lab"])["images"]
    assert kind_out(KINDS["vscode"])["images"] == []
    # Refusals, each naming the image field and what to do.
    for options, says in [
        ({"image": "debian12-batch"}, "The image debian12-batch has no JupyterLab server"),
        ({"image": "nope"}, "There is no image called 'nope'"),
        ({"image": "gone-lab"}, "cannot be used on cluster"),
        ({"image": "train-only"}, "may not be used on partition interactive"),
    ]:
        opts, problems = parse_session_options(options, policy=policy)
        assert opts is None and [p.field for p in problems] == ["image"], (options, problems)
        assert says in problems[0].message, (options, problems)
    r = spawn(client, {"image": "debian12-batch"})
    assert r.status_code == 400 and "has no JupyterLab server" in r.json()["errors"][0]["message"]
    assert not Session.objects.exists()


def test_a_refused_image_is_answered_with_none_only_where_the_nodes_serve_it(hub_settings, policy, settings, tmp_path):
    """The node's own system has a session server only where the site's Jupyter venv is on the nodes
    (``session_venv``; cluster2's root has none): the advice offers none there only."""
    settings.PORTAL_CODE_SERVER_DIR = str(tmp_path)  # VS Code offered: code-server installed
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "code-server").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "code-server").chmod(0o755)
    image("debian12-sklearn", offers=["jupyterlab"])
    own = ' or "none" (the node\'s own system).'
    for options, says in [
        (
            {"ide": "vscode", "image": "debian12-sklearn"},
            'no image on cluster1 has VS Code: choose "none" (the node\'s own system).',
        ),
        ({"ide": "lab", "image": "/opt/x"}, "Choose an image with JupyterLab: debian12-sklearn" + own),
    ]:
        _opts, problems = parse_session_options(options, policy=policy)
        assert says in problems[0].message, problems
    path = tmp_path / "clusters.toml"
    path.write_text('[[clusters]]\nname = "cluster1"\nsessions = true\nsession_venv = false\n')
    settings.PORTAL_CLUSTERS_FILE = str(path)
    _opts, problems = parse_session_options({"ide": "vscode", "image": "debian12-sklearn"}, policy=policy)
    assert "no image on cluster1 has VS Code: ask the admin for one." in problems[0].message, problems


def test_the_site_can_require_an_image(client, hub_settings, alice, policy, settings):
    image("debian12-sklearn", offers=["jupyterlab"])
    settings.PORTAL_IMAGE_NONE_ALLOWED = False
    opts, problems = parse_session_options({}, policy=policy)
    assert opts is None and problems[0].field == "image" and "debian12-sklearn" in problems[0].message
    opts, problems = parse_session_options({"image": "debian12-sklearn"}, policy=policy)
    assert problems == [] and opts.image == "debian12-sklearn"


def test_another_users_image_path_or_name_cannot_be_asked_for(client, hub_settings, alice, policy, django_user_model):
    """The identity rule: who the session runs as is the hub's verified user (the spawn check is
    called by the spawner with ``self.user.name``, from the hub's OIDC identity: issuer + sub); the
    options cannot name a user, and an image is a registered name, never a path."""
    django_user_model.objects.create(username="bob", oidc_issuer="t", oidc_sub="b", slurm_accounts=["nlp"])
    image("debian12-sklearn", offers=["jupyterlab"])
    for options, says in [
        ({"image": "/home/bob/private-image"}, "There is no image called"),
        ({"image": "../../home/bob/img"}, "There is no image called"),
        ({"image": "debian12\x00-sklearn"}, "There is no image called"),  # no query: PostgreSQL text holds no NUL
        ({"user": "bob"}, "Unknown session option(s): user"),
        ({"username": "bob", "image": "debian12-sklearn"}, "Unknown session option(s): username"),
    ]:
        r = spawn(client, options)
        assert r.status_code == 400, (options, r.content)
        assert says in " ".join(e["message"] for e in r.json()["errors"]), (options, r.content)
    assert not Session.objects.exists()
    # A good request runs as the hub's user only: the answer has no user in it for the script.
    r = spawn(client, {"image": "debian12-sklearn"})
    assert r.status_code == 200 and "user" not in r.json()["settings"]
    assert Session.objects.get().user.username == "alice"


def test_an_image_path_reaches_bash_as_one_quoted_word(client, hub_settings, alice):
    """The image comes from the registry (never from the request); a path with spaces and $(...)
    (an admin's registration) is one quoted word in the script."""
    image("odd-lab", offers=["jupyterlab"], path="/srv/images/my lab $(touch /tmp/pwned)")
    answer = spawn(client, {"image": "odd-lab"}).json()["settings"]
    last = session_scripts(answer)[0].splitlines()[-1]
    assert "'/srv/images/my lab $(touch /tmp/pwned)'" in last and "/srv/images/my lab $(touch /tmp/pwned)" in shlex.split(last)
