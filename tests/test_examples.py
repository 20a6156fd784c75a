"""The examples stay usable: the pasted job script is generated from train_digits.py and passes policy."""

import subprocess
import sys
from pathlib import Path

from jobs.submit.policy import JobRequest, _check_text

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_job_scripts_are_generated_from_the_training_script():
    proc = subprocess.run([sys.executable, str(EXAMPLES / "make_job_script.py"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_form_script_passes_the_policys_text_checks():
    script = (EXAMPLES / "train_digits_job.sh").read_text()
    request = JobRequest(
        name="digits", partition="small", gpu_type="", gpu_count=0, cpus=2, memory_mb=2048, time_limit_min=5, script=script
    )
    assert _check_text(request) == []
