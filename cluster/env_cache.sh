#!/usr/bin/env bash
# The environment cache of job profiles (PORTAL_ENV_CACHE_DIR, default /srv/gpuportal/envs): root's,
# mode 755, with one area per member of $SLURM_GROUP, <cache>/<user>, owned by that user, that nobody
# else can write in. A job uses only environments in its own user's area (profiles/portal_env.sh;
# docs/profiles.md). Run by cluster/up.sh (as root); idempotent: a second run changes nothing.
#
# Fixes what earlier versions left: the cache was mode 1777 and environments sat at its top as
# <cache>/<hash>, where any user could plant one that another user's job then ran. Those entries (and
# their .lock files) are removed, and an area that is not its user's own directory (made by someone
# else, a symbolic link, a file) is removed and made again, empty. A user's area that others could
# write in is made not writable by them (its entries are verified by every job anyway).
set -euo pipefail
LOG_TAG=${LOG_TAG:-env-cache}
# shellcheck source=cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ $(id -u) -eq 0 ]] || die "run as root"

ENV_CACHE_DIR=${PORTAL_ENV_CACHE_DIR:-/srv/gpuportal/envs}
[[ ! -L $ENV_CACHE_DIR ]] || die "$ENV_CACHE_DIR is a symbolic link: set PORTAL_ENV_CACHE_DIR to the real directory (jobs check the owners of the real path)"
# Jobs refuse the cache if a directory above it belongs to another user or others can write in it (those
# that do not exist yet are made here, root's and mode 755).
dir=$(dirname "$ENV_CACHE_DIR")
while :; do
    if [[ -e $dir ]]; then
        read -r owner mode < <(stat -c '%u %a' "$dir")
        if [[ $owner != 0 ]] || { (( 8#$mode & 8#022 )) && ! (( 8#$mode & 8#1000 )); }; then
            die "$dir (above the environment cache) must belong to root and be writable by nobody else: jobs refuse the cache otherwise"
        fi
    fi
    [[ $dir == / ]] && break
    dir=$(dirname "$dir")
done
if [[ ! -d $ENV_CACHE_DIR ]] || [[ $(stat -c '%a %u' "$ENV_CACHE_DIR") != "755 0" ]]; then
    was=$(stat -c '%a %U' "$ENV_CACHE_DIR" 2>/dev/null || echo "missing")
    install -d -m 755 -o root -g root "$ENV_CACHE_DIR"
    log "environment cache $ENV_CACHE_DIR: root's, mode 755 (was: $was)"
fi

# The shared entries of the old layout: <hash> (16 hex digits) and <hash>.lock at the top.
shopt -s nullglob
old=()
for path in "$ENV_CACHE_DIR"/*; do
    if [[ ${path##*/} =~ ^[0-9a-f]{16}(\.lock)?$ ]]; then old+=("$path"); fi
done
if ((${#old[@]})); then
    rm -rf -- "${old[@]}"
    log "removed ${#old[@]} shared environment entries of the old layout from $ENV_CACHE_DIR (anyone could have written them)"
fi

# One area per member of the group.
members=$(getent group "$SLURM_GROUP" | cut -d: -f4 | tr ',' ' ')
for u in $members; do
    area=$ENV_CACHE_DIR/$u
    group=$(id -gn "$u")
    if [[ -L $area ]] || { [[ -e $area ]] && [[ ! -d $area ]]; } || { [[ -d $area ]] && [[ $(stat -c %U "$area") != "$u" ]]; }; then
        what=$(stat -c '%F owned by %U' "$area")
        rm -rf -- "$area"
        log "removed $area ($what): it was not $u's own directory, so it could hold environments someone else made"
    fi
    if [[ ! -d $area ]]; then
        install -d -m 755 -o "$u" -g "$group" "$area"
        log "made $u's environment area $area"
    elif (( 8#$(stat -c %a "$area") & 8#022 )); then
        chmod go-w "$area"
        log "$area: made it writable by $u only (mode $(stat -c %a "$area"))"
    fi
done
