#!/bin/bash
#SBATCH --job-name="resnet \"50\" $(date)"
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
python3 train.py --epochs 3
