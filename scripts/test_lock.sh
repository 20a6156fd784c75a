# One test run at a time on this machine's lab clusters (sourced by scripts/test.sh, after lib.sh).
#
# Two runs at once break each other: the serial tier of one stops slurmctld or slurmdbd, drains nodes
# and changes limits under the other's jobs. A run cut short (a timeout that killed only its make, a
# closed terminal) leaves its pytest going on its own, so "at once" also means "beside an orphan".
#
# take_test_lock: holds an exclusive flock(1) on $TEST_LOCK on file descriptor 9 for the rest of the
# run, and sets PORTAL_TEST_RUN (this run's pid and checkout), which scripts/test.sh exports before
# pytest: test.sh and an orphaned pytest still hold the lock, and the processes the tests start, which
# do not inherit the descriptor (Python's subprocess closes it), still carry the name. The set-up
# scripts run with 9>&- and before the export: the lab's daemons they start outlive the run. Daemons a
# serial test restarts carry the name but are the lab's too (LAB_DAEMONS): never stopped here.
#
# Where another run holds the lock:
#   - under CI=true, the machine is CI's alone, so the other run is a leftover: its processes get
#     SIGTERM, then SIGKILL after 15 s, and the run goes on (cluster/up.sh, which runs next, restarts any
#     daemon of the lab clusters that went with them);
#   - otherwise it waits up to TEST_LOCK_WAIT_S seconds (default 0), then stops, naming the other run's
#     processes and how to stop them.
: "${TEST_LOCK:=/run/lock/gpuportal-tests.lock}"
: "${TEST_LOCK_WAIT_S:=0}"

# Daemons a run may have (re)started with its name in their environment (the serial tier restarts
# Redis, and the Slurm daemons through cluster/up.sh): the lab's, not the run's, so never stopped here.
LAB_DAEMONS=" slurmctld slurmd slurmdbd slurmstepd munged sshd redis-server mariadbd mysqld prometheus "

# _run_pids RUN: pids of the other run's processes: those that hold $TEST_LOCK open (its test.sh, whose
# own environment never had the name: bash's export changes only its children's) and those whose
# environment has PORTAL_TEST_RUN=RUN (/proc/PID/environ, as the process started), but the lab's
# daemons. No pipes and no child processes: each would inherit descriptor 9 and be listed.
_run_pids() {
    local p pid fd comm
    for p in /proc/[0-9]*; do
        pid=${p#/proc/}
        [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
        read -r comm <"$p/comm" 2>/dev/null || continue
        [[ $LAB_DAEMONS == *" $comm "* ]] && continue
        for fd in "$p"/fd/*; do
            if [[ $fd -ef $TEST_LOCK ]]; then echo "$pid"; continue 2; fi
        done 2>/dev/null
        if [[ -n $1 ]] && grep -qzxF "PORTAL_TEST_RUN=$1" "$p/environ" 2>/dev/null; then echo "$pid"; fi
    done
    return 0
}

take_test_lock() {
    local other pids deadline
    mkdir -p "$(dirname "$TEST_LOCK")"
    exec 9<>"$TEST_LOCK"
    if ! flock -w "$TEST_LOCK_WAIT_S" 9; then
        other=$(head -1 "$TEST_LOCK")
        mapfile -t pids < <(_run_pids "$other")
        log "another test run holds $TEST_LOCK (pid and checkout: ${other:-unknown}); its processes:"
        if (( ${#pids[@]} )); then ps -o pid=,etime=,args= -p "$(IFS=,; echo "${pids[*]}")" | cut -c1-160 >&2 || true; fi
        if [[ ${CI:-} != true ]]; then
            die "one test run at a time uses the lab clusters: wait for that one, or stop it (kill ${pids[*]:-<the pids above>}), then run again"
        fi
        log "CI=true: stopping that run (a leftover on CI's machine)"
        if (( ${#pids[@]} )); then kill -TERM "${pids[@]}" 2>/dev/null || true; fi
        deadline=$(( $(date +%s) + 15 ))
        while (( $(date +%s) < deadline )) && [[ -n $(_run_pids "$other") ]]; do sleep 0.5; done
        mapfile -t pids < <(_run_pids "$other")
        if (( ${#pids[@]} )); then kill -KILL "${pids[@]}" 2>/dev/null || true; fi
        flock -w 30 9 || die "$TEST_LOCK is still held after stopping the other run"
    fi
    PORTAL_TEST_RUN="$$ $REPO_DIR"   # exported by the caller once its set-up has started its daemons
    truncate -s 0 "$TEST_LOCK"
    echo "$PORTAL_TEST_RUN" >"$TEST_LOCK"
}
