"""Site session presets that name a site image (``image=`` in ``PORTAL_SESSION_PRESETS``,
interactive/presets.py): how the key is read, what a click sends, a preset whose image is unknown or
disabled shown disabled with the Sessions form's refusal, a cluster whose nodes lack the Jupyter
venv (``session_venv = false``), where only a preset with an image can start, the start-up check
(portal.E011, no database read) and the Start button's words (``SessionPreset.button_label``)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest
from bs4 import BeautifulSoup
from django.template.loader import render_to_string

from interactive.checks import check_session_presets
from interactive.models import Session
from interactive.presets import PresetError, SessionPreset, parse_presets

from .test_home import buttons, started, world  # noqa: F401  (fixtures)
from .test_presets import _choices
from .test_session_images import image

NO_VENV = "cluster1's nodes have no Jupyter venv of their own (session_venv = false in the clusters file): "
ASK = "name a site image that holds the session's server, e.g. image=debian12-sklearn."


def no_venv(settings, tmp_path) -> None:
    """The default sessions cluster, cluster1, with nodes that hold no Jupyter venv."""
    path = tmp_path / "clusters-no-venv.toml"
    path.write_text('[[clusters]]\nname = "cluster1"\nsessions = true\nsession_venv = false\n')
    settings.PORTAL_CLUSTERS_FILE = str(path)


# --- reading ------------------------------------------------------------------------------------
def test_image_is_read_in_the_compact_form_and_json_alike(settings):
    settings.PORTAL_SESSION_PARTITIONS = ["interactive"]
    compact = parse_presets("lab hours=2 image=debian12-sklearn; lab gpus=1 type=a100 hours=4 image=none; lab hours=1")
    as_json = parse_presets(
        '[{"kind": "lab", "hours": 2, "image": "debian12-sklearn"},'
        ' {"kind": "lab", "gpus": 1, "type": "a100", "hours": 4, "image": "none"}, {"kind": "lab", "hours": 1, "image": null}]'
    )
    assert as_json == compact
    sklearn, none, left_out = compact
    assert sklearn.image == "debian12-sklearn" and sklearn.label == "JupyterLab, no GPU, 2 h"  # the label is as before
    assert sklearn.details == "2 CPUs · 4G memory · partition interactive · image debian12-sklearn"
    assert sklearn.options == {
        "ide": "lab",
        "partition": "interactive",
        "gpu_type": "",
        "gpu_count": 0,
        "cpus": 2,
        "memory_mb": 4096,
        "hours": 2,
        "image": "debian12-sklearn",
    }
    assert none.image == left_out.image == "" and "image" not in none.options and "image" not in left_out.options


@pytest.mark.parametrize(
    "text, words",
    [
        (
            "lab image=/srv/images/sklearn",
            ["Preset 1 (lab image=/srv/images/sklearn)", "'/srv/images/sklearn' is not an image's name"],
        ),
        ("lab image=../sklearn", ["'../sklearn' is not an image's name", "never a path", "image=none"]),
        ('[{"kind": "lab", "image": 3}]', ["image '3' is not an image's name"]),
    ],
)
def test_an_image_that_is_not_a_name_is_refused_naming_the_preset(settings, text, words):
    with pytest.raises(PresetError) as refused:
        parse_presets(text)
    for word in words:
        assert word in str(refused.value), (text, str(refused.value))


# --- the start-up check ---------------------------------------------------------------------------
def test_the_start_up_check_reads_no_database_for_an_image(settings):
    """No ``django_db`` here: a database read fails the test. Whether the image exists is asked when
    the preset is offered; only its form is checked at start-up."""
    settings.PORTAL_SESSION_PRESETS = "lab hours=2 image=nope; lab hours=3 image=/srv/x"
    [error] = check_session_presets()
    assert error.id == "portal.E011" and error.msg.startswith("Preset 2 (lab hours=3 image=/srv/x): image '/srv/x'")


def test_the_start_up_check_asks_for_an_image_where_the_node_s_own_system_cannot_serve(settings, tmp_path):
    no_venv(settings, tmp_path)
    settings.PORTAL_SESSION_PRESETS = "lab hours=2; lab hours=3 image=debian12-sklearn"
    [error] = check_session_presets()
    assert error.msg == "Preset 1 (JupyterLab, no GPU, 2 h): " + NO_VENV + ASK
    settings.PORTAL_CLUSTERS_FILE = None  # the local clusters: cluster1's nodes hold the venv
    settings.PORTAL_IMAGE_NONE_ALLOWED = False
    [error] = check_session_presets()
    assert error.msg == (
        "Preset 1 (JupyterLab, no GPU, 2 h): This site runs every session in one of its images "
        "(PORTAL_IMAGE_NONE_ALLOWED is false): " + ASK
    )


# --- offered, and the click -------------------------------------------------------------------------
@pytest.mark.django_db
def test_an_unknown_or_disabled_image_is_offered_disabled_with_the_form_s_words(client, world, settings):  # noqa: F811
    alice, _ = world
    image("debian12-sklearn", offers=["jupyterlab"])
    image("retired", offers=["jupyterlab"], enabled=False)
    settings.PORTAL_SESSION_PRESETS = "lab hours=2 image=debian12-sklearn; lab hours=3 image=nope; lab hours=1 image=retired"
    client.force_login(alice)
    response = client.get("/")
    assert response.status_code == 200
    found = buttons(response.content.decode())
    sklearn, nope, retired = (found[f"preset-jupyterlab-no-gpu-{h}-h"] for h in (2, 3, 1))
    assert not sklearn["disabled"] and "image debian12-sklearn" in sklearn["text"], sklearn["text"]
    assert nope["disabled"] and nope["label"] == "Start JupyterLab, no GPU, 3 h"
    assert "Not offered: There is no image called 'nope'" in nope["text"] and "debian12-sklearn" in nope["text"]
    assert retired["disabled"] and "The image retired has been disabled by the site's admins" in retired["text"]


@pytest.mark.django_db
def test_a_click_on_a_preset_with_an_image_starts_the_session_in_it(client, world, started, settings):  # noqa: F811
    alice, _ = world
    image("debian12-sklearn", offers=["jupyterlab"])
    settings.PORTAL_SESSION_PRESETS = "lab hours=2 image=debian12-sklearn"
    client.force_login(alice)
    client.post("/sessions/start/", {"preset": "preset-jupyterlab-no-gpu-2-h"})
    assert [options.get("image") for _server, options in started] == ["debian12-sklearn"]
    assert Session.objects.get().image_name == "debian12-sklearn"


@pytest.mark.django_db
def test_where_the_nodes_have_no_venv_only_a_preset_with_an_image_is_offered(
    settings, monkeypatch, clean_cache, slurm_json, tmp_path
):
    no_venv(settings, tmp_path)
    settings.PORTAL_SESSION_PARTITIONS = ["interactive"]
    image("debian12-sklearn", offers=["jupyterlab"])
    bare, sklearn = _choices(settings, monkeypatch, slurm_json, "lab hours=2; lab hours=3 image=debian12-sklearn")
    assert not bare.offered
    assert bare.why_not[0].startswith("cluster1's nodes have no session server of their own (no Jupyter venv): ")
    assert "debian12-sklearn" in bare.why_not[0]  # what to choose
    assert sklearn.offered and sklearn.preset.options["image"] == "debian12-sklearn"


# --- the button's words ---------------------------------------------------------------------------
def test_the_button_says_start_and_the_label_as_one_sentence():
    site = SessionPreset("preset-jupyterlab-1-a100-4-h", "JupyterLab, 1 A100, 4 h", "lab", "interactive", "a100", 1, 2, 4096, 4)
    last = replace(site, key="last-k1", label="Your last session: JupyterLab, 1 A100, 4 h")
    assert site.button_label == "Start JupyterLab, 1 A100, 4 h"
    assert last.button_label == "Start your last session: JupyterLab, 1 A100, 4 h"
    choices = [SimpleNamespace(preset=p, availability=SimpleNamespace(), offered=True, why_not=[]) for p in (last, site)]
    html = render_to_string("interactive/_home_starts.html", {"choices": choices})
    said = [b.get_text() for b in BeautifulSoup(html, "html.parser").select("[data-testid=start-button]")]
    assert said == [last.button_label, site.button_label]


@pytest.mark.parametrize("value", ["0", "false"])
def test_an_image_of_json_zero_or_false_is_refused_not_read_as_none(settings, value):
    settings.PORTAL_SESSION_PARTITIONS = ["interactive"]
    with pytest.raises(PresetError, match="is not an image's name"):
        parse_presets(f'[{{"kind": "lab", "image": {value}}}]')
