"""Navigation facts for every page."""

from .models import Membership, Role


def team_nav(request) -> dict:
    """``show_teams_link``: the user is an admin or leads a team (the only people with a Teams page)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"show_teams_link": False}
    return {"show_teams_link": user.is_staff or Membership.objects.filter(user=user, role=Role.LEAD).exists()}
