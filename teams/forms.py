"""Admin forms for a team: quota and limit, and membership changes."""

from django import forms

from .models import Role


class LimitsForm(forms.Form):
    gpu_hours_quota = forms.DecimalField(
        required=False,
        min_value=0,
        max_value=10_000_000,
        decimal_places=1,
        label="GPU-hour quota per period",
        help_text="Per accounting period (Slurm's PriorityUsageResetPeriod, e.g. monthly), on each cluster. "
        "Slurm GrpTRESMins=gres/gpu, stored in GPU-minutes. Empty: no quota.",
    )
    billed_hours_quota = forms.DecimalField(
        required=False,
        min_value=0,
        max_value=100_000_000,
        decimal_places=1,
        label="Or: billed unit-hour quota per period",
        help_text="Instead of GPU-hours, for a site that charges by Slurm's billed units (each partition's "
        "TRESBillingWeights weigh what a job holds). Slurm GrpTRESMins=billing, stored in billed unit-minutes. "
        "Set this or the GPU-hour quota, not both. Empty: no quota in billed units.",
    )
    gpu_limit = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=100_000,
        label="GPUs in use at once",
        help_text="On each cluster. Slurm GrpTRES=gres/gpu. Empty: no limit.",
    )


class MemberForm(forms.Form):
    username = forms.CharField(max_length=32, label="Cluster user name")
    role = forms.ChoiceField(choices=Role.choices)
