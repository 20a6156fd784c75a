"""The table of :mod:`tests.audit.test_every_action`: one case (or more) per audited action.

A case sets up the state, reads the values the action will change from the database, performs the
action through the service a page, the API or a worker calls, reads the values again, and returns
``(old, new)``: what the audit row must hold. Slurm is a scripted :class:`tests.fakes.FakeTransport`
(the before-values of the Slurm sync are then what the recorded ``sacctmgr`` output says), the hub a
monkeypatched :mod:`interactive.hub`. ``before`` says what ``old`` is: the value read before the
change (:data:`CHANGE`), or nothing, said explicitly: a creation (:data:`CREATED`) or an event with
no value before it (:data:`EVENT`, e.g. a refused sign-in)."""

from __future__ import annotations

from tests.audit import cases_announcements as announcements
from tests.audit import cases_cluster as cluster
from tests.audit import cases_images as images
from tests.audit import cases_jobs as jobs
from tests.audit import cases_people as people
from tests.audit import cases_sessions as sessions
from tests.audit import cases_teams as teams
from tests.audit.world import CHANGE, CREATED, EVENT, Case

__all__ = ["CASES", "CHANGE", "CREATED", "EVENT"]

CASES: list[Case] = [
    Case("announcement.create", announcements.announcement_create, CREATED),
    Case("announcement.change", announcements.announcement_change),
    Case("announcement.delete", announcements.announcement_delete),
    Case("image.create", images.image_create, CREATED),
    Case("image.change", images.image_change),
    Case("image.delete", images.image_delete),
    Case("node.drain", cluster.node_drain),
    Case("node.resume", cluster.node_resume),
    Case("reservation.create", cluster.reservation_create, CREATED),
    Case("reservation.delete", cluster.reservation_delete),
    Case("job.create", jobs.job_create, CREATED),
    Case("job.cancel_requested", jobs.job_cancel_requested),
    Case("job.submitted", jobs.job_submitted),
    Case("job.adopted", jobs.job_adopted_by_key, name="key found at a retry"),
    Case("job.adopted", jobs.job_adopted_from_queue, name="key found by the poller"),
    Case("job.submit_failed", jobs.job_submit_failed),
    Case("job.cancelled_before_submit", jobs.job_cancelled_before_submit),
    Case("job.state", jobs.job_state_from_queue, name="squeue"),
    Case("job.state", jobs.job_state_from_queues_end, name="queue's end, accounting down"),
    Case("job.restarted", jobs.job_restarted),
    Case("job.finished", jobs.job_finished),
    Case("job.outside_found", jobs.job_outside_found, CREATED),
    Case("job.state", jobs.job_state_outside, name="outside job, bulk"),
    Case("job.task_cancel_requested", jobs.job_task_cancel_requested, EVENT),
    Case("job.hold_requested", jobs.job_hold_requested, EVENT),
    Case("job.release_requested", jobs.job_release_requested, EVENT),
    Case("job.held", jobs.job_held),
    Case("job.released", jobs.job_released),
    Case("membership.slurm.import", teams.membership_slurm_import, CREATED),
    Case("membership.claims.add", teams.membership_claims_add, CREATED),
    Case("membership.claims.change", teams.membership_claims_change),
    Case("membership.claims.remove", teams.membership_claims_remove),
    Case("team.limits", teams.team_limits),
    Case("membership.set", teams.membership_set_change, name="role changed"),
    Case("membership.set", teams.membership_set_new, CREATED, name="new member"),
    Case("membership.remove", teams.membership_remove),
    Case("user.admin_override", teams.user_admin_override),
    Case("slurm.sync.add_account", teams.sync_add_account, CREATED),
    Case("slurm.sync.add_user", teams.sync_add_user, CREATED),
    Case("slurm.sync.set_limits", teams.sync_set_limits),
    Case("slurm.sync.set_default_account", teams.sync_set_default_account),
    Case("slurm.sync.remove_user", teams.sync_remove_user),
    Case("slurm.sync.delete_user", teams.sync_delete_user),
    Case("slurm.sync.add_qos", teams.sync_add_qos, CREATED),
    Case("slurm.sync.set_qos", teams.sync_set_qos),
    Case("slurm.sync.keep_class_qos", teams.sync_keep_class_qos),
    Case("slurm.sync.grant_class_qos", teams.sync_grant_class_qos),
    Case("slurm.import.team", teams.slurm_import_team, CREATED),
    Case("slurm.import.membership", teams.slurm_import_membership, CREATED),
    Case("profile.save", people.profile_save_new, CREATED, name="new"),
    Case("profile.save", people.profile_save_change, name="changed"),
    Case("profile.share", people.profile_share),
    Case("profile.delete", people.profile_delete),
    Case("token.create", people.token_create, CREATED),
    Case("token.revoke", people.token_revoke),
    Case("session.start_requested", sessions.session_start_requested, CREATED),
    Case("session.stop", sessions.session_stop),
    Case("session.culled", sessions.session_culled),
    Case("session.gpu_reclaimed", sessions.session_gpu_reclaimed),
    Case("session.submitted", sessions.session_submitted),
    Case("session.running", sessions.session_running),
    Case("session.failed", sessions.session_failed),
    Case("session.ended", sessions.session_ended),
    Case("login.refused", people.login_refused_by_rule, EVENT, name="portal's rule"),
    Case("login.refused", people.login_refused_inactive, EVENT, name="disabled account"),
    Case("user.admin.claims", people.user_admin_claims),
    Case("account.link_approved", people.account_link_approved),
    Case("account.link_refused", people.account_link_refused),
    Case("login.signed_in", people.login_signed_in, EVENT),
    Case("account.link_requested", people.account_link_requested, EVENT),
    Case("hub.login_refused", people.hub_login_refused, EVENT),
    Case("admin.add", people.admin_add, CREATED),
    Case("admin.change", people.admin_change, name="form"),
    Case("admin.change", people.admin_change_password, name="password"),
    Case("admin.delete", people.admin_delete),
]
