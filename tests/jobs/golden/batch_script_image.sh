#!/bin/bash
#SBATCH --job-name="resnet"
#SBATCH --partition="train"
#SBATCH --account="vision"
#SBATCH --gres="gpu:a100:2"
#SBATCH --nodes="1"
#SBATCH --ntasks="1"
#SBATCH --cpus-per-task="4"
#SBATCH --mem="8192M"
#SBATCH --time="90"
#SBATCH --chdir="/home/alice/portal-jobs/0f8e7a3c-5b1d-4c2e-9a6f-123456789abc"
#SBATCH --output="/home/alice/portal-jobs/0f8e7a3c-5b1d-4c2e-9a6f-123456789abc/slurm-%j.out"
#SBATCH --error="/home/alice/portal-jobs/0f8e7a3c-5b1d-4c2e-9a6f-123456789abc/slurm-%j.err"
#SBATCH --comment="portal:0f8e7a3c-5b1d-4c2e-9a6f-123456789abc"
#SBATCH --requeue
: portal-job-script-begins  # directives above are the portal's; the user's script follows
printf '%s\n' 'portal: image debian12-sklearn (sha256:abababababababababababababababababababababababababababababababab) at /srv/gpuportal/images/debian12-sklearn, run by charliecloud'
printf '%s\n' 'portal: environment: the image debian12-sklearn'"'"'s own packages (no virtual environment)'
if ! portal_image_check=$(ch-run /srv/gpuportal/images/debian12-sklearn -- /bin/true 2>&1); then
  printf '%s\n' 'The image debian12-sklearn (/srv/gpuportal/images/debian12-sklearn) is no longer on the cluster: ask your admins or choose another image' | tee /dev/stderr
  printf 'portal: %s said: %s\n' charliecloud "$portal_image_check" >&2
  exit 97
fi
cat > /home/alice/portal-jobs/0f8e7a3c-5b1d-4c2e-9a6f-123456789abc/portal-script.sh <<'PORTAL_SCRIPT_0f8e7a3c5b1d4c2e9a6f123456789abc'
cat /etc/os-release
python3 -c 'import sklearn'
PORTAL_SCRIPT_0f8e7a3c5b1d4c2e9a6f123456789abc
exec ch-run --home -b /srv/gpuportal/envs:/srv/gpuportal/envs -c /home/alice/portal-jobs/0f8e7a3c-5b1d-4c2e-9a6f-123456789abc /srv/gpuportal/images/debian12-sklearn -- /bin/bash /home/alice/portal-jobs/0f8e7a3c-5b1d-4c2e-9a6f-123456789abc/portal-script.sh
