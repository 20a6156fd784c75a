"""The support bundle's download (:mod:`jobs.support`): one zip per job."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone as djtz

from ..models import Job
from ..support.bundle import bundle_zip
from ..support.gather import job_gathered, may_download


def zip_response(data: bytes, filename: str) -> HttpResponse:
    """``data`` as a zip attachment named ``filename``, never cached by a shared cache."""
    response = HttpResponse(data, content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["Cache-Control"] = "private, no-store"
    return response


@login_required
def job_support_bundle(request: HttpRequest, key) -> HttpResponse:
    """The job's support bundle, ``support-<cluster>-<Slurm job id>.zip`` (the portal's key before it
    has one): for its owner, the leads of its team and portal admins; 404 for anyone else, with the
    job page's words. Slurm being unreachable leaves parts out (README.txt says which), never a 500."""
    job = Job.objects.select_related("user").filter(key=key).first()
    if job is None or not may_download(request.user, owner_id=job.user_id, account=job.account):
        raise Http404("No such job, or it is not yours.")
    data = bundle_zip(job_gathered(job), made_at=djtz.now())
    return zip_response(data, f"support-{job.cluster}-{job.slurm_job_id or job.key}.zip")
