"""``{% unread_notifications user %}``: the nav's unread count (one COUNT query per page)."""

from django import template

from notifications.selectors import unread_count

register = template.Library()


@register.simple_tag
def unread_notifications(user) -> int:
    """How many of ``user``'s notifications are unread."""
    return unread_count(user=user)
