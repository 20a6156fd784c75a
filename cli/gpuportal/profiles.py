"""Saved job profiles: ``gpuportal profiles ls|push|run``."""

from __future__ import annotations

import argparse

from .args import add_overrides, non_blank, positive_float
from .base import Commands, Context, list_out, out, print_help, read_text
from .jobs import submitted


def add_commands(commands: Commands) -> None:
    """Register ``profiles`` (with ``ls``, ``push``, ``run``; alone it prints its help)."""
    p = commands.add("profiles", None, "job profiles: ls, push, run")
    sub = commands.group(p, "profiles_command", "{ls,push,run}")
    p.set_defaults(func=lambda ctx: print_help(p))
    sub.add("ls", cmd_profiles_ls, "list the profiles you own or that are shared with your teams")
    q = sub.add("push", cmd_profiles_push, "save a profile YAML file on the portal")
    q.add_argument("file", metavar="FILE.yaml")
    q.add_argument("--share", metavar="TEAM", help="share it with this team")
    q = sub.add("run", cmd_profiles_run, "submit a job from a saved profile")
    q.add_argument("id", metavar="ID", type=non_blank("profile", "give its ID as `gpuportal profiles ls` prints it"))
    add_overrides(q, "override a profile field (repeatable)")
    q.add_argument("-f", "--follow", action="store_true", help="then follow the job's output until it ends")
    q.add_argument("--interval", type=positive_float, default=2.0, help=argparse.SUPPRESS)


def cmd_profiles_ls(ctx: Context) -> int:
    """``profiles ls``: ``GET /profiles`` as a table."""
    return list_out(
        ctx,
        ctx.client().list_profiles(),
        empty="No profiles.",
        headers=["ID", "NAME", "OWNER", "SHARED WITH", "VERSION", "UPDATED"],
        row=lambda p: (p.get("id"), p.get("name"), p.get("owner"), p.get("team"), p.get("version"), p.get("updated_at")),
    )


def cmd_profiles_push(ctx: Context) -> int:
    """``profiles push FILE [--share TEAM]``: ``POST /profiles`` with the file's text."""
    text = read_text(ctx.args.file)
    profile = ctx.client().create_profile(text, ctx.args.share)
    if ctx.json:
        ctx.emit(profile)
        return 0
    shared = f", shared with {profile['team']}" if profile.get("team") else ""
    out(f'Saved profile {profile.get("id")} "{profile.get("name", "")}" (version {profile.get("version", "?")}{shared})')
    out(f"Run it: gpuportal profiles run {profile.get('id')}")
    return 0


def cmd_profiles_run(ctx: Context) -> int:
    """``profiles run ID [--set K=V ...] [-f]``: ``POST /profiles/{id}/submit``; output as
    ``submit``."""
    job = ctx.client().submit_profile(ctx.args.id, dict(ctx.args.overrides))
    return submitted(ctx, job, ctx.args.follow, ctx.args.interval)
