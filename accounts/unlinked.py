"""What an identity that is not linked to a cluster account is told, in one place: the pages
(:func:`accounts.views.unlinked_page`), and the API's 403 both for its browser session (the same
view) and for its token (:class:`api.base.TokenAuth`) say the same, waiting or refused."""

from __future__ import annotations

from .models import LinkState

_WAITING = "Your sign-in is not linked to a cluster account yet: waiting for an administrator to link your account."
_REFUSED = "A portal administrator decided not to link your sign-in to a cluster account."
#: What to do, said after the sentence in the API's answers (the page says it in its own markup).
_WAITING_NEXT = "Nothing runs on the cluster for you until then; tell the cluster staff that you signed in if it takes long."
_REFUSED_NEXT = "Nothing runs on the cluster for it; if you think this is a mistake, ask the cluster staff."


def unlinked_message(user) -> str:
    """One sentence for ``user`` (a :class:`accounts.models.User` that is not linked): that an
    administrator refused the link (``link_state`` refused), else that it waits for one."""
    return _REFUSED if user.link_state == LinkState.REFUSED else _WAITING


def unlinked_detail(user) -> str:
    """The API's ``detail`` for ``user``'s requests (403): :func:`unlinked_message`, then what to do."""
    refused = user.link_state == LinkState.REFUSED
    return f"{unlinked_message(user)} {_REFUSED_NEXT if refused else _WAITING_NEXT}"
