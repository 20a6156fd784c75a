# path_owners: who may own the directories on the way to a path a job trusts (bash). Embedded in every
# profile's job script (profiles/envscript.py, before portal_env.sh) and, for a job in an image, in the
# batch script's lines that run on the host before the container starts (jobs/worker/batch.py). The rule and the
# threat each part answers: docs/profiles.md, "Who may own the directories above the cache".
#
# Whoever can write in a directory can rename what is in it and put their own in its place, between the
# job's check of an environment and its use (the job runs <cache>/<user>/<hash>/bin/python by name). So
# every directory from / down to the cache must be root's or the user's, and neither its group (a team
# member) nor others may write in it, unless it is sticky like /tmp (then only its owner can rename what
# others made in it, and root or the user owns it).
#
# Inside an unprivileged container (Charliecloud's user namespace maps only the user's own uid) the files
# of root and of every other user show as the overflow uid, so root's directories and bob's look the same.
# A directory shown as that uid is accepted only (1) when the host checked the cache before the container
# started (PORTAL_ENV_HOST_CHECKED is the cache's path; the directories above it inside are the image's,
# trusted as the image's own bash is: whoever owns them can replace that too), and (2) when neither its
# group nor others can write in it, sticky or not: a sticky directory's owner may rename anything in it,
# and here that owner could be anyone.

# portal_env_path_ok DIR UID: DIR and every directory above it follow the rule above for the user UID.
# Returns 0; otherwise 1 with PORTAL_ENV_WHY saying which directory, who owns it, what is wrong and what to
# do. Reads PORTAL_ENV_UNMAPPED (the overflow uid in a container, "" on the host) and PORTAL_ENV_HOST_CHECKED.
portal_env_path_ok() {
    local top=$1 uid=$2 dir=$1 owner group mode
    local other="choose a cache below directories only root can change (the cluster staff's PORTAL_ENV_CACHE_DIR)"
    while :; do
        if [ -L "$dir" ] || [ ! -d "$dir" ]; then PORTAL_ENV_WHY="$dir is not a directory"; return 1; fi
        read -r owner group mode < <(stat -c '%u %g %a' -- "$dir")
        if [ -n "${PORTAL_ENV_UNMAPPED:-}" ] && [ "$owner" = "$PORTAL_ENV_UNMAPPED" ]; then
            if [ "${PORTAL_ENV_HOST_CHECKED:-}" != "$top" ]; then
                PORTAL_ENV_WHY="$dir shows as owned by $(portal_env_user "$owner") (uid $owner: in this container root and every other user look the same) and the host did not check it before the container started: run the job from the portal, whose batch script checks it"
                return 1
            fi
            if (( 8#$mode & 8#022 )); then
                PORTAL_ENV_WHY="$(portal_env_writers "$mode" "$group") can write in $dir (mode $mode) and its owner shows as $(portal_env_user "$owner") in this container, so it could be anyone and a sticky bit does not protect it: chmod go-w $dir, or $other"
                return 1
            fi
        elif [ "$owner" != 0 ] && [ "$owner" != "$uid" ]; then
            PORTAL_ENV_WHY="$dir belongs to $(portal_env_user "$owner"), who could put their own environments in place of yours: make it root's (chown root $dir), or $other"
            return 1
        elif (( 8#$mode & 8#022 )) && ! (( 8#$mode & 8#1000 )); then
            PORTAL_ENV_WHY="$(portal_env_writers "$mode" "$group") can write in $dir (mode $mode, not sticky), so they could put their own environments in place of yours: chmod go-w $dir"
            return 1
        fi
        [ "$dir" = / ] && return 0
        dir=$(dirname -- "$dir")
    done
}

# portal_env_writers MODE GID: who, besides the owner, can write in a directory of MODE and group GID.
portal_env_writers() {
    if (( 8#$1 & 8#002 )); then echo "other users"; else echo "members of group $(getent group "$2" | cut -d: -f1 | grep . || echo "$2")"; fi
}

# portal_env_unmapped_uid: in a user namespace that does not map every uid (an unprivileged container),
# the uid that files of unmapped users show as (the overflow uid); nothing on the host itself.
portal_env_unmapped_uid() {
    local inside outside count
    read -r inside outside count </proc/self/uid_map 2>/dev/null || return 0
    if [ "$inside $outside $count" != "0 0 4294967295" ]; then
        cat /proc/sys/kernel/overflowuid 2>/dev/null || echo 65534
    fi
}

portal_env_user() { getent passwd "$1" | cut -d: -f1 | grep . || echo "uid $1"; }
