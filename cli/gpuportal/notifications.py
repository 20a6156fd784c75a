"""``gpuportal notifications``: what the portal told you (job failed, pending long, ...), and marking it read."""

from __future__ import annotations

from .args import local_time, positive_int
from .base import Commands, Context, out
from .output import table


def add_commands(commands: Commands) -> None:
    """Register ``notifications``."""
    p = commands.add(
        "notifications", cmd_notifications, "list your notifications (job failed, pending long, ...) or mark them read"
    )
    p.add_argument("--unread", action="store_true", help="only the unread ones")
    p.add_argument("-n", "--limit", type=positive_int, default=50, metavar="N", help="at most N, newest first (default 50)")
    mark = p.add_mutually_exclusive_group()
    mark.add_argument("--read", type=positive_int, nargs="+", metavar="ID", help="mark these read (ids from the list)")
    mark.add_argument("--read-all", action="store_true", help="mark all of yours read")


def cmd_notifications(ctx: Context) -> int:
    """``notifications``: ``GET /notifications`` as a table (ID, WHEN, KIND, SUBJECT, a ``*`` for unread);
    with ``--read ID...`` / ``--read-all``: ``POST /notifications/read`` and how many were marked."""
    client = ctx.client()
    if ctx.args.read or ctx.args.read_all:
        done = client.mark_notifications_read(ctx.args.read if ctx.args.read else None)
        if ctx.json:
            ctx.emit(done)
        else:
            out(f"Marked {done.get('marked', 0)} read.")
        return 0
    doc = client.list_notifications(unread=ctx.args.unread, limit=ctx.args.limit)
    if ctx.json:
        ctx.emit(doc)
        return 0
    items = doc.get("items") or []
    rows = [
        (n.get("id"), "" if n.get("read_at") else "*", local_time(n.get("created_at")), n.get("kind"), n.get("subject"))
        for n in items
    ]
    out(table(["ID", "NEW", "WHEN", "KIND", "SUBJECT"], rows) if items else "No notifications.")
    out(f"{doc.get('unread', 0)} unread.")
    return 0
