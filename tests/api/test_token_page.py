"""The Tokens page's own words: a New token form with no scope ticked says to tick one and what each
gives, and Revoke asks first, naming the token, as Stop, Cancel and Delete do."""

from __future__ import annotations

import html
from http import HTTPStatus

import pytest
from django.utils.html import escapejs

from api.models import PersonalAccessToken
from api.tokens import token_create
from api.views import no_scope_sentence

pytestmark = pytest.mark.django_db


def test_no_scope_ticked_says_to_tick_one_and_what_each_gives(client, people):
    client.force_login(people["alice"])
    r = client.post("/account/tokens/", {"name": "laptop", "days": "30"})
    page = html.unescape(r.content.decode())
    assert r.status_code == HTTPStatus.BAD_REQUEST and PersonalAccessToken.objects.count() == 0
    assert "This field is required." not in page
    assert no_scope_sentence() == (
        "Tick at least one scope (a token without one can do nothing): “Read jobs, sessions, profiles and team usage” "
        "(every CLI command needs it), “Submit and cancel jobs”, “Start and stop sessions” or “Save, share and delete "
        "profiles”."
    )
    assert no_scope_sentence() in page


def test_revoke_asks_first_naming_the_token_escaped_for_the_script(client, people):
    row, _ = token_create(user=people["alice"], name='Bob\'s "CI" </script>', scopes=["read"], days=7)
    PersonalAccessToken.objects.filter(pk=row.pk).update(prefix=row.prefix[:-2] + "--")  # as a random one may be
    row.refresh_from_db()
    client.force_login(people["alice"])
    page = client.get("/account/tokens/").content.decode()
    form = page.split(f'action="/account/tokens/{row.pk}/revoke/"')[1].split(">")[0]
    assert form.startswith(' class="inline" onsubmit="return confirm(')
    # the prefix as escapejs writes it: a random prefix may hold "-" (\\u002D)
    assert "Bob\\u0027s \\u0022CI\\u0022 \\u003C/script\\u003E" in form and escapejs(row.prefix) in form
    assert "It stops working at once" in form
