"""Admin forms for a team: quota and limit, and membership changes."""

from decimal import Decimal

from django import forms

from .models import MAX_GPU_LIMIT, MAX_QUOTA_MINUTES, Role

#: The largest quota in hours the forms take (35,791,394.1): the most the quota columns store
#: (:data:`~teams.models.MAX_QUOTA_MINUTES`), in hours to the forms' one decimal place, rounded down.
#: Any quota a team holds, one imported from Slurm too, is shown at most this (rounded half up to a
#: tenth of an hour), so a team's limits can always be saved with its quota as shown.
MAX_QUOTA_HOURS = Decimal(MAX_QUOTA_MINUTES * 10 // 60) / 10


def _too_big(unit: str) -> str:
    """The refusal of a quota above :data:`MAX_QUOTA_HOURS`, in ``unit``-hours: the most, and what to do."""
    return (
        f"A quota must be at most %(limit_value)s {unit}-hours ({MAX_QUOTA_MINUTES:,} {unit}-minutes, the most the "
        "portal can store): give a smaller one, or leave it empty for no quota."
    )


class _BlankIsEmpty:
    """A number field that reads a value of blank space alone ("   ") as empty, as the field looks:
    Django's number fields do not strip, and refused it as not a number."""

    def to_python(self, value):
        """The field's own reading of ``value`` with blank space around it (or alone) left out."""
        return super().to_python(value.strip() if isinstance(value, str) else value)


class QuotaField(_BlankIsEmpty, forms.DecimalField):
    """A quota in hours (:class:`_BlankIsEmpty`)."""


class LimitField(_BlankIsEmpty, forms.IntegerField):
    """A count of GPUs (:class:`_BlankIsEmpty`)."""


class LimitsForm(forms.Form):
    gpu_hours_quota = QuotaField(
        required=False,
        min_value=0,
        max_value=MAX_QUOTA_HOURS,
        decimal_places=1,
        label="GPU-hour quota per period",
        help_text="Per accounting period (Slurm's PriorityUsageResetPeriod, e.g. monthly), on each cluster. "
        "Slurm GrpTRESMins=gres/gpu, stored in GPU-minutes. Empty: no quota.",
        error_messages={
            "invalid": "Give the quota in GPU-hours, such as 500 or 12.5, or leave it empty for no quota.",
            "min_value": "A quota cannot be below 0 GPU-hours: leave it empty for no quota.",
            "max_value": _too_big("GPU"),
            "max_decimal_places": "Give the quota to at most one decimal place, such as 12.5 GPU-hours.",
        },
    )
    billed_hours_quota = QuotaField(
        required=False,
        min_value=0,
        max_value=MAX_QUOTA_HOURS,
        decimal_places=1,
        label="Or: billed unit-hour quota per period",
        help_text="Instead of GPU-hours, for a site that charges by Slurm's billed units (each partition's "
        "TRESBillingWeights weigh what a job holds). Slurm GrpTRESMins=billing, stored in billed unit-minutes. "
        "Set this or the GPU-hour quota, not both. Empty: no quota in billed units.",
        error_messages={
            "invalid": "Give the quota in billed unit-hours, such as 2000 or 12.5, or leave it empty.",
            "min_value": "A quota cannot be below 0 billed unit-hours: leave it empty for no quota.",
            "max_value": _too_big("billed unit"),
            "max_decimal_places": "Give the quota to at most one decimal place, such as 12.5 billed unit-hours.",
        },
    )
    gpu_limit = LimitField(
        required=False,
        min_value=0,
        max_value=MAX_GPU_LIMIT,
        label="GPUs in use at once",
        help_text="On each cluster. Slurm GrpTRES=gres/gpu. Empty: no limit.",
        error_messages={
            "invalid": "Give the GPUs in use at once as a whole number, such as 4, or leave it empty for no limit.",
            "min_value": "The GPUs in use at once cannot be below 0: leave it empty for no limit.",
            "max_value": "The GPUs in use at once must be at most %(limit_value)s.",
        },
    )


class MemberForm(forms.Form):
    username = forms.CharField(
        max_length=32,
        label="Cluster user name",
        error_messages={
            "required": "Give the person's cluster user name (their Slurm and Unix login).",
            "max_length": "A cluster user name is at most %(limit_value)d characters (this one has %(show_value)d).",
        },
    )
    role = forms.ChoiceField(
        choices=Role.choices,
        error_messages={
            "required": "Choose the person's role in the team.",
            "invalid_choice": "'%(value)s' is not a role: choose one of the list.",
        },
    )
