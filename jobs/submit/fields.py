"""One vocabulary for the fields of a request: the name site policy gives each field
(:class:`jobs.submit.policy.JobRequest`'s, and the session options' ``options``) and what each input
surface calls it. A refusal from a service speaks the policy's names; a surface re-keys it once with
``refused.renamed(<its column>)`` (:meth:`portal.refusals.Refused.renamed`).

One row per field, one column per surface, so a field's names are read (and changed) in one place.
``""``: the surface has no field for it, so the problem is about the request as a whole (a form's
non-field error, the API's ``"field": ""``). ``tests/jobs/test_fields.py`` checks every name against
its surface (the forms' fields, the profile schema, the API's session body).
"""

from __future__ import annotations

#: policy's name -> (New job form, profile file, Sessions form, API session body (``api.sessions.SessionIn``))
NAMES: dict[str, tuple[str, str, str, str]] = {
    "name":           ("name",       "name",                    "",          ""),
    "account":        ("account",    "account",                 "account",   "account"),
    "partition":      ("partition",  "resources.partition",     "partition", "partition"),
    "gpu_type":       ("gpu_type",   "resources.gpu_type",      "gpu_type",  "gpu_type"),
    "gpu_count":      ("gpu_count",  "resources.gpus_per_node", "gpu_count", "gpus"),
    "cpus":           ("cpus",       "resources.cpus",          "cpus",      "cpus"),
    "memory_mb":      ("memory_gb",  "resources.memory",        "memory_gb", "memory"),
    "time_limit_min": ("time_limit", "resources.time_limit",    "hours",     "hours"),
    "workdir":        ("workdir",    "run.workdir",             "",          ""),
    "script":         ("script",     "run.command",             "",          ""),
    "requeue":        ("requeue",    "run.requeue",             "",          ""),
    "priority":       ("priority",   "run.priority",            "",          ""),
    "cluster":        ("cluster",    "cluster",                 "cluster",   "cluster"),
    "image":          ("image",      "image",                   "image",     "image"),
    "options":        ("",           "",                        "",          ""),
}  # fmt: skip

#: Each surface's column: policy's name -> the surface's.
JOB_FORM, PROFILE, SESSION_FORM, SESSION_API = ({policy: row[i] for policy, row in NAMES.items()} for i in range(4))
