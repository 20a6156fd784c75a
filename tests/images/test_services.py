"""images.services.image_check and image_choice_check: every refusal names the image and what to
choose instead; the check reads the registry and the availability cache only."""

from __future__ import annotations

import pytest

from images.selectors import images_for
from images.services import image_check, image_choice_check
from portal.refusals import Refused


def refusal(name, **kw) -> str:
    with pytest.raises(Refused) as caught:
        image_check(name, cluster=kw.get("cluster", "cluster1"), partition=kw.get("partition", "train"))
    assert [p.field for p in caught.value.problems] == ["image"]
    return str(caught.value)


def test_an_available_image_passes(make_image):
    image = make_image()
    assert image_check("debian12-sklearn", cluster="cluster1", partition="train") == image


def test_unknown_image_lists_the_choices(make_image):
    make_image()
    message = refusal("ubuntu")
    assert message.startswith("There is no image called 'ubuntu': choose one of debian12-sklearn")
    assert "none" in message


def test_disabled_image_is_refused(make_image):
    make_image(enabled=False)
    assert "has been disabled by the site's admins" in refusal("debian12-sklearn")


def test_partition_not_allowed(make_image):
    make_image(partitions=["gpu"])
    message = refusal("debian12-sklearn", partition="train")
    assert "may not be used on partition train (only on gpu)" in message


def test_cluster_not_allowed(make_image):
    make_image(clusters=["cluster1"])
    make_image("c2-image", clusters=["cluster2"])
    assert refusal("debian12-sklearn", cluster="cluster2") == (
        "The image debian12-sklearn is not offered on cluster cluster2 (only on cluster1): "
        'choose one of c2-image, or "none" (the node\'s own system).'
    )


def test_where_no_image_is_offered_the_refusal_says_so_in_a_sentence(make_image, settings):
    """Not "choose one of none is offered there": the alternative is "none", or the admins."""
    make_image(partitions=["gpu"])
    assert refusal("debian12-sklearn", partition="train").endswith(
        'choose one of those partitions, or "none" (the node\'s own system): no image is offered there.'
    )
    assert refusal("ubuntu", partition="train") == (
        "There is no image called 'ubuntu': choose \"none\" (the node's own system): no image is offered there."
    )
    settings.PORTAL_IMAGE_NONE_ALLOWED = False
    assert refusal("debian12-sklearn", partition="train").endswith(
        "choose one of those partitions (no image is offered there: ask the site's admins)."
    )
    with pytest.raises(Refused) as caught:
        image_choice_check("none", cluster="cluster1", partition="train")
    assert str(caught.value) == "This site runs every job in one of its images: no image is offered there: ask the site's admins."


def test_not_checked_yet_is_its_own_sentence(make_image):
    make_image(available=None)
    message = refusal("debian12-sklearn")
    assert "has not been checked on cluster cluster1 yet" in message
    assert "cannot be used" not in message


def test_missing_image_says_why(make_image):
    make_image(available=False, reason="it is not there, or it lies in a directory the portal's service user cannot read")
    message = refusal("debian12-sklearn")
    assert message == (
        "The image debian12-sklearn (/srv/gpuportal/images/debian12-sklearn) cannot be used on cluster cluster1: "
        "it is not there, or it lies in a directory the portal's service user cannot read. Ask your admins, or choose another image."
    )


def test_moving_an_image_forgets_its_state(make_image):
    image = make_image()
    image.path = "/srv/gpuportal/images/elsewhere"
    image.save()
    assert "has not been checked" in refusal("debian12-sklearn")


@pytest.mark.parametrize("name", ["", "none"])
def test_none_is_the_nodes_own_system(make_image, settings, name):
    assert image_choice_check(name, cluster="cluster1", partition="train") is None
    settings.PORTAL_IMAGE_NONE_ALLOWED = False
    with pytest.raises(Refused, match="This site runs every job in one of its images"):
        image_choice_check(name, cluster="cluster1", partition="train")


def test_images_for_filters_cluster_partition_and_session_kind(make_image):
    make_image("a", offers=["jupyterlab"])
    make_image("b", partitions=["gpu"])
    make_image("c", clusters=["cluster2"])
    make_image("d", enabled=False)
    assert [i.name for i in images_for(cluster="cluster1")] == ["a", "b"]
    assert [i.name for i in images_for(cluster="cluster1", partition="train")] == ["a"]
    assert [i.name for i in images_for(cluster="cluster2", session_kind="jupyterlab")] == ["a"]
