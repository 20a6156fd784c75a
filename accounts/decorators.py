"""View decorators other apps may use (they never import this app's views)."""

from __future__ import annotations

from functools import wraps

from .views import login_page


def sign_in_page_when_anonymous(view):
    """An anonymous visitor gets the sign-in page itself (200, the same page as
    ``/accounts/login/``) instead of a redirect; a signed-in one gets ``view``."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return login_page(request)
        return view(request, *args, **kwargs)

    return wrapper
