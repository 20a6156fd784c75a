"""Template filters shared by the portal's pages."""
from datetime import datetime, UTC

from django import template
from django.utils.dateformat import format as date_format

register = template.Library()


@register.filter
def unix_time(value, fmt: str = "Y-m-d H:i"):
    """Format Unix seconds (UTC) with a Django date format; empty for missing values."""
    if value in (None, "", 0):
        return ""
    return date_format(datetime.fromtimestamp(float(value), tz=UTC), fmt)
