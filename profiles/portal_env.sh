# portal_env: the environment part of a profile's job script (bash). profiles/envscript.py embeds this
# file in every script it renders, after a generated portal_env_build function, then calls
#
#     portal_env UV CACHE SPEC REQ WHAT
#
# UV: uv's path on the node; CACHE: the environment cache (PORTAL_ENV_CACHE_DIR); SPEC: the canonical
# JSON of the environment; REQ: the requirements file ("" for none); WHAT: a few words for the log.
# portal_env_build DIR makes the environment in DIR (uv venv, then uv pip install) and fails if uv does.
#
# Who may write what (docs/profiles.md, "Environments"): an environment is
# CACHE/<user>/<hash>, in the user's own area (a directory owned by the user, mode 755: nobody else
# can add, replace or change an entry there). The job uses an entry only if the cache and every
# directory above it follow the rule of runtimes/path_owners.sh (portal_env_path_ok, embedded before
# this file: root's or the user's, writable by nobody else unless sticky; in a container, see there);
# the area and everything in the entry belong to the user and are writable by nobody
# else; and the entry's manifest (.portal-manifest: the hash, and the SHA-256 of the list of its
# files with type, mode, owner, size, time and link target) matches. An entry that fails is refused
# with a sentence in the log and built again; when the area itself cannot be trusted or made, the job
# builds a private environment in $TMPDIR for this job only. A finished entry is read-only.
#
# Messages start with "portal-env: " on stdout; a build that fails exits 2 with its reason on stderr.
#
# In a site image this runs inside an unprivileged container (Charliecloud's user namespace
# maps only the user's own uid): files of every other uid, root's included, show as the kernel's
# overflow uid ("nobody", /proc/sys/kernel/overflowuid). The batch script checks the cache on the
# host before the container starts (jobs/worker/batch.py) and says so in PORTAL_ENV_HOST_CHECKED (the cache's
# path) or PORTAL_ENV_HOST_REFUSED (why not); inside, portal_env_path_ok accepts a directory shown as
# "nobody" only after that check and only when nobody else can write in it. The area and every entry
# must be the user's own as everywhere, so an entry another user made (also shown as "nobody" there)
# is still refused.

portal_env() {
    local uv=$1 cache=$2 spec=$3 req=$4 what=$5
    local t0=$EPOCHREALTIME uid me hash root area="" envdir lock
    uid=$(id -u)
    me=$(id -un 2>/dev/null) || me=$uid
    PORTAL_ENV_UNMAPPED=$(portal_env_unmapped_uid)
    if [ ! -x "$uv" ]; then
        echo "portal-env: uv is not installed at $uv on $(hostname); ask the cluster staff (cluster/up.sh installs it)" >&2
        exit 2
    fi
    if [ -n "$req" ] && [ ! -f "$req" ]; then
        echo "portal-env: environment.requirements '$req' is not in the project directory $PWD" >&2
        exit 2
    fi
    if [ -n "$req" ]; then what="$what + $req"; fi
    hash=$( { printf '%s\n' "$spec"; uname -m; if [ -n "$req" ]; then cat -- "$req"; fi; } | sha256sum | cut -c1-16 )

    # The cache, resolved once (what is checked is what is used), and the user's area in it.
    local rule='docs/profiles.md, "Who may own the directories above the cache"'
    if ! root=$(readlink -e -- "$cache"); then
        echo "portal-env: the environment cache $cache does not exist on $(hostname); building a private environment for this job only"
    elif [ -n "$PORTAL_ENV_UNMAPPED" ] && [ -n "${PORTAL_ENV_HOST_REFUSED:-}" ]; then
        echo "portal-env: refused the environment cache $cache, checked on the host before the container started: $PORTAL_ENV_HOST_REFUSED; building a private environment for this job only ($rule)"
    elif ! portal_env_path_ok "$root" "$uid"; then
        echo "portal-env: refused the environment cache $root: $PORTAL_ENV_WHY; building a private environment for this job only ($rule)"
    else
        area=$root/$me
        if [ ! -e "$area" ] && [ ! -L "$area" ] && mkdir -m 0755 -- "$area" 2>/dev/null; then
            echo "portal-env: made your cache area $area"
        fi
        if [ ! -e "$area" ] && [ ! -L "$area" ]; then
            echo "portal-env: you have no cache area in $root and cannot make one; building a private environment for this job only (ask the cluster staff to create $area, owned by you, mode 755)"
            area=""
        elif ! portal_env_area_ok "$area" "$uid"; then
            echo "portal-env: refused the cache area $area: $PORTAL_ENV_WHY; building a private environment for this job only (ask the cluster staff to remove $area)"
            area=""
        fi
    fi

    if [ -n "$area" ]; then
        envdir=$area/$hash lock=$area/$hash.lock
        if portal_env_verify "$envdir" "$hash" "$uid"; then
            echo "portal-env: cache hit $hash ($what) in $envdir"
        else
            [ -e "$lock" ] || : >>"$lock"
            exec 9<"$lock"
            if ! flock -n 9; then
                echo "portal-env: another job is building environment $hash; waiting for it"
                flock 9
            fi
            if portal_env_verify "$envdir" "$hash" "$uid"; then
                echo "portal-env: cache hit $hash (built by another job while this one waited $(portal_env_secs "$t0") s)"
            else
                if [ -n "$PORTAL_ENV_WHY" ]; then
                    echo "portal-env: refused $envdir: $PORTAL_ENV_WHY; building it again"
                fi
                if ! portal_env_remove "$envdir"; then
                    echo "portal-env: cannot remove $envdir (owned by $(portal_env_user "$(stat -c %u -- "$envdir")")); building a private environment for this job only (ask the cluster staff to remove it)"
                    envdir=""
                else
                    echo "portal-env: cache miss $hash; building it ($what) in $envdir"
                    portal_env_make "$envdir" "$hash"
                    portal_env_seal "$envdir" "$hash" "$spec"
                    echo "portal-env: built $hash in $(portal_env_secs "$t0") s"
                fi
            fi
            flock -u 9
            exec 9<&-
        fi
    fi
    if [ -z "$area" ] || [ -z "$envdir" ]; then
        PORTAL_ENV_PRIVATE=$(mktemp -d "${TMPDIR:-/tmp}/portal-env-$hash.XXXXXX")
        trap 'rm -rf -- "$PORTAL_ENV_PRIVATE"' EXIT
        envdir=$PORTAL_ENV_PRIVATE/env
        echo "portal-env: building a private environment $hash ($what) in $envdir, removed when the job ends"
        portal_env_make "$envdir" "$hash"
        echo "portal-env: built $hash in $(portal_env_secs "$t0") s (private)"
    fi
    export VIRTUAL_ENV="$envdir" PATH="$envdir/bin:$PATH"
    unset PYTHONHOME
}

# portal_env_area_ok AREA UID: AREA is a real directory owned by UID. If others can write in it, it is made
# mode 755 (every entry is verified anyway). Otherwise PORTAL_ENV_WHY says why and it returns 1.
portal_env_area_ok() {
    local area=$1 uid=$2 owner mode
    if [ -L "$area" ] || [ ! -d "$area" ]; then PORTAL_ENV_WHY="it is not a directory"; return 1; fi
    read -r owner mode < <(stat -c '%u %a' -- "$area")
    if [ "$owner" != "$uid" ]; then
        PORTAL_ENV_WHY="it belongs to $(portal_env_user "$owner"), not to you (another user may have put environments there)"
        return 1
    fi
    if (( 8#$mode & 8#022 )); then
        chmod go-w -- "$area"
        echo "portal-env: other users could write in your cache area $area (mode $mode): made it $(stat -c %a -- "$area")"
    fi
}

# portal_env_verify DIR HASH UID: DIR is a finished environment HASH that only UID could have written:
# a real directory owned by UID; nothing in it owned by anyone else or writable by others; its manifest
# names HASH and the digest of its file list. Returns 0; else 1 with PORTAL_ENV_WHY set ("" when DIR
# does not exist).
portal_env_verify() {
    local dir=$1 hash=$2 uid=$3 owner mode bad head mhash mdigest digest
    PORTAL_ENV_WHY=""
    if [ ! -e "$dir" ] && [ ! -L "$dir" ]; then return 1; fi
    if [ -L "$dir" ] || [ ! -d "$dir" ]; then PORTAL_ENV_WHY="it is not a directory"; return 1; fi
    owner=$(stat -c %u -- "$dir")
    if [ "$owner" != "$uid" ]; then PORTAL_ENV_WHY="it belongs to $(portal_env_user "$owner"), not to you"; return 1; fi
    if ! bad=$(find "$dir" \( ! -uid "$uid" -o \( ! -type l -perm /022 \) \) -print -quit 2>&1); then
        PORTAL_ENV_WHY="it cannot be read in full ($bad)"
        return 1
    fi
    if [ -n "$bad" ]; then
        read -r owner mode < <(stat -c '%u %a' -- "$bad")
        if [ "$owner" != "$uid" ]; then
            PORTAL_ENV_WHY="${bad#"$dir"/} in it belongs to $(portal_env_user "$owner")"
        else
            PORTAL_ENV_WHY="other users can write ${bad#"$dir"/} in it (mode $mode)"
        fi
        return 1
    fi
    if [ ! -f "$dir/.portal-manifest" ] || [ -L "$dir/.portal-manifest" ]; then
        PORTAL_ENV_WHY="it has no manifest (an unfinished build)"
        return 1
    fi
    { read -r head; read -r _ mhash; read -r _ mdigest; } <"$dir/.portal-manifest" || true
    if [ "${head:-}" != "portal-env manifest 1" ] || [ "${mhash:-}" != "$hash" ]; then
        PORTAL_ENV_WHY="its manifest is not the one of environment $hash"
        return 1
    fi
    if ! digest=$(portal_env_listing "$dir" | sha256sum | cut -d' ' -f1); then
        PORTAL_ENV_WHY="its files cannot be listed"
        return 1
    fi
    if [ "$digest" != "${mdigest:-}" ]; then
        PORTAL_ENV_WHY="its files are not the ones it was built with (the manifest's checksum differs)"
        return 1
    fi
}

# portal_env_listing DIR: one line per file below DIR except the manifest (path, type, mode, owner, size,
# modification time, link target), sorted: what the manifest's checksum is taken of.
portal_env_listing() {
    find "$1" -mindepth 1 -printf '%P %y %m %U %s %T@ %l\n' | LC_ALL=C grep -v '^\.portal-manifest ' | LC_ALL=C sort
}

# portal_env_make DIR HASH: build the environment in DIR (which must not exist yet, or be empty); on failure
# remove it and end the job (exit 2).
portal_env_make() {
    if ! portal_env_build "$1"; then
        echo "portal-env: building environment $2 failed (see the lines above)" >&2
        portal_env_remove "$1" || true
        exit 2
    fi
}

# portal_env_seal DIR HASH SPEC: record the spec, make everything read-only, then write the manifest last
# (the mark of a finished build).
portal_env_seal() {
    local dir=$1 hash=$2 spec=$3 digest
    printf '%s\n' "$spec" >"$dir/.portal-spec.json"
    find "$dir" -mindepth 1 ! -type l -exec chmod a-w -- {} +
    digest=$(portal_env_listing "$dir" | sha256sum | cut -d' ' -f1)
    printf 'portal-env manifest 1\nhash %s\nfiles %s\n' "$hash" "$digest" >"$dir/.portal-manifest"
    chmod a-w -- "$dir/.portal-manifest" "$dir"
}

# portal_env_remove DIR: remove DIR (made writable first: a finished entry is read-only); 0 when it is gone.
portal_env_remove() {
    if [ -L "$1" ]; then rm -f -- "$1" 2>/dev/null; fi
    if [ -d "$1" ]; then
        chmod -R u+w -- "$1" 2>/dev/null || true
        rm -rf -- "$1" 2>/dev/null || true
    fi
    [ ! -e "$1" ] && [ ! -L "$1" ]
}

portal_env_secs() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
