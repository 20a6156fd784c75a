#!/usr/bin/env bash
# Build the demo container image: Debian 12 minimal ('debootstrap --variant=minbase bookworm' from the
# Debian mirror) + python3 and python3-venv (Debian's packages, no recommended ones), numpy, scipy and
# scikit-learn for /usr/bin/python3 from PyPI's wheels at the versions and hashes of
# scripts/image/python-requirements.txt, and for sessions a venv at /opt/jupyter with what the hub's own Jupyter
# venv has (scripts/hub_setup.sh): hub/requirements.txt from PyPI (jupyterlab, jupyterhub, batchspawner at its
# pins; every other package at the version scripts/image/jupyter-constraints.txt pins), the portal's session
# extension (hub/session: the activity the idle limit reads) and the site's JupyterLab defaults. Nothing comes
# from a container registry.
# Reproducible: the same inputs give the same digest (Python's byte code compiled with hash-based invalidation,
# no build time in any file, fixed dates, logs and caches removed); only a newer Debian package on the mirror
# (bookworm's point releases and security updates: the mirror keeps no older version) changes it.
# The result is a Charliecloud directory image (a plain root file system: Charliecloud's own format, run with
# 'ch-run DIR -- CMD') in the shared image directory:
#     $PORTAL_IMAGES_DIR/debian12-sklearn/        the image (owned by root, readable by every user)
#     $PORTAL_IMAGES_DIR/debian12-sklearn.json    what 'manage.py image_register --from-json' reads
# Idempotent: a stamp holds the hash of the inputs (this script, the packages, hub/requirements.txt, hub/session,
# the site's CA certificates, the mount points); a second run with the same inputs does nothing and says "up to date". A new build is made beside the old one and renamed into place,
# so jobs never see a half-built image. Prints its time. Run as root (debootstrap and chroot need it).
# Settings (environment): PORTAL_IMAGES_DIR, IMAGE_MIRROR, IMAGE_FORCE=1 (build even if up to date),
# IMAGE_RELOCK=1 (install the session venv without the constraints and write its versions to them afterwards),
# PORTAL_ENV_CACHE_DIR and PORTAL_ENV_UV (mount points for the environment cache and uv's directory are made in the
# image: ch-run cannot create a bind's target in a read-only image; see docs/containers.md).
LOG_TAG=image
source "$(dirname "$0")/lib.sh"

: "${PORTAL_IMAGES_DIR:=/srv/gpuportal/images}"
: "${IMAGE_MIRROR:=http://deb.debian.org/debian}"
: "${PORTAL_ENV_CACHE_DIR:=/srv/gpuportal/envs}"
: "${PORTAL_ENV_UV:=/opt/gpuportal/tools/bin/uv}"
MOUNT_POINTS=("$PORTAL_ENV_CACHE_DIR" "$(dirname "$PORTAL_ENV_UV")")   # the binds a job adds besides the home
NAME=debian12-sklearn
SUITE=bookworm
DEBS=python3,python3-venv,ca-certificates
PY_LOCK=$REPO_DIR/scripts/image/python-requirements.txt      # numpy, scipy, scikit-learn: versions and hashes
JUPYTER_LOCK=$REPO_DIR/scripts/image/jupyter-constraints.txt # every package of /opt/jupyter at its version
# The date every file of the image claims where a date is written into one (the password file's "last changed"):
# fixed, so two builds on different days write the same bytes.
IMAGE_EPOCH=1767225600   # 2026-01-01 00:00 UTC
export SOURCE_DATE_EPOCH=$IMAGE_EPOCH   # pip and py_compile: hash-based .pyc files, no time stamps in them
DEST=$PORTAL_IMAGES_DIR/$NAME
JSON=$PORTAL_IMAGES_DIR/$NAME.json
STAMP=$PORTAL_IMAGES_DIR/.$NAME.stamp
BUILD=$PORTAL_IMAGES_DIR/.$NAME.build
BUILD_LOG=$LOG_DIR/image-$NAME.log
t0=$(date +%s)

pin() {  # pin NAME: the 'NAME==VERSION' line of hub/requirements.txt (the hub and the image's server agree)
    local line
    line=$(grep -E "^$1==" "$REPO_DIR/hub/requirements.txt" | head -1 | sed 's/[[:space:]#;].*//')
    [[ -n $line ]] || die "hub/requirements.txt has no '$1==VERSION' line"
    printf '%s\n' "$line"
}
PIP_SPECS=("$(pin jupyterhub)" "$(pin jupyterlab)" "$(pin batchspawner)")
SESSION_FILES=("$REPO_DIR/hub/requirements.txt" "$REPO_DIR/hub/site-settings/jupyterlab-overrides.json" "$PY_LOCK" "$JUPYTER_LOCK"
               $(find "$REPO_DIR/hub/session" -path '*/vscode-activity' -prune -o -type f \( -name '*.py' -o -name '*.toml' -o -name '*.json' \) -print | LC_ALL=C sort))

shopt -s nullglob
SITE_CAS=(/usr/local/share/ca-certificates/*.crt)   # the site's own CAs (e.g. a TLS proxy's), copied into the image
shopt -u nullglob
inputs_hash=$({ cat "$0" "${SESSION_FILES[@]}" ${SITE_CAS[@]+"${SITE_CAS[@]}"}; printf '%s\n' "$SUITE" "$DEBS" "${MOUNT_POINTS[@]}" "${PIP_SPECS[@]}"; } | sha256sum | cut -c1-32)
if [[ -z ${IMAGE_FORCE:-} && -f $STAMP && $(<"$STAMP") == "$inputs_hash" && -d $DEST && -s $JSON ]]; then
    log "image $NAME is up to date ($DEST; inputs $inputs_hash; $(( $(date +%s) - t0 )) s)"
    exit 0
fi
[[ $(id -u) == 0 ]] || die "building the image needs root (debootstrap, chroot): run 'sudo bash $0'"
apt_install debootstrap

mkdir -p "$PORTAL_IMAGES_DIR"
chmod 755 "$PORTAL_IMAGES_DIR"
mounts_below() { awk -v r="$1" 'index($5, r "/") == 1 {print $5}' /proc/self/mountinfo | sort -r; }
cleanup() { local m; for m in $(mounts_below "$BUILD"); do umount "$m" || true; done; }
trap cleanup EXIT
cleanup
rm -rf --one-file-system "$BUILD"

log "debootstrap --variant=minbase $SUITE from $IMAGE_MIRROR with $DEBS (log: $BUILD_LOG)"
if ! debootstrap --variant=minbase --include="$DEBS" "$SUITE" "$BUILD" "$IMAGE_MIRROR" >"$BUILD_LOG" 2>&1; then
    tail -n 15 "$BUILD_LOG" >&2
    die "debootstrap of $SUITE into $BUILD failed (see $BUILD_LOG): is $IMAGE_MIRROR reachable?"
fi
log "debootstrap done ($(du -sm --one-file-system "$BUILD" | cut -f1) MB)"

# The session server's venv, made with the image's own Python inside a chroot (/proc and /dev from the host;
# during the build only: the host's resolv.conf and CA certificates, so PyPI is reached as the host reaches it,
# through a site's TLS proxy too).
for m in proc dev; do mkdir -p "$BUILD/$m"; mount --bind "/$m" "$BUILD/$m"; done
mkdir -p "$BUILD/run/host-certs"; mount --bind -o ro /etc/ssl/certs "$BUILD/run/host-certs"
cp /etc/resolv.conf "$BUILD/etc/resolv.conf"
log "venv /opt/jupyter in the image: pip install -r hub/requirements.txt (${PIP_SPECS[*]} ...) and hub/session"
mkdir -p "$BUILD/tmp/portal-build"
cp "$REPO_DIR/hub/requirements.txt" "$PY_LOCK" "$JUPYTER_LOCK" "$BUILD/tmp/portal-build/"
cp -r "$REPO_DIR/hub/session" "$BUILD/tmp/portal-build/session"   # setuptools builds in the tree
in_image_pip() {
    chroot "$BUILD" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root PIP_CERT=/run/host-certs/ca-certificates.crt \
        SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" /opt/jupyter/bin/pip install -q --no-cache-dir --disable-pip-version-check "$@"
}
CONSTRAINTS=(-c /tmp/portal-build/jupyter-constraints.txt)
[[ -n ${IMAGE_RELOCK:-} ]] && CONSTRAINTS=()
SYS_SITE=/usr/local/lib/python3.11/dist-packages   # on Debian's /usr/bin/python3 path, apart from dpkg's files
{
    chroot "$BUILD" /usr/bin/python3 -m venv /opt/jupyter &&
    in_image_pip -r /tmp/portal-build/requirements.txt ${CONSTRAINTS[@]+"${CONSTRAINTS[@]}"} &&
    in_image_pip --no-deps /tmp/portal-build/session &&
    chroot "$BUILD" /opt/jupyter/bin/python -c 'import gpuportal_session' &&
    in_image_pip --no-deps --only-binary=:all: --require-hashes --target "$SYS_SITE" -r /tmp/portal-build/python-requirements.txt &&
    rm -rf "$BUILD$SYS_SITE/bin" &&   # f2py and the like, written for the venv's Python: not for jobs
    chroot "$BUILD" /usr/bin/python3 -c 'import numpy, scipy, sklearn'
} >>"$BUILD_LOG" 2>&1 || { tail -n 15 "$BUILD_LOG" >&2; die "pip install in the image failed (see $BUILD_LOG)"; }
if [[ -n ${IMAGE_RELOCK:-} ]]; then
    { sed -n '/^#/p' "$JUPYTER_LOCK"
      chroot "$BUILD" /opt/jupyter/bin/pip freeze --all --disable-pip-version-check | grep -v -i -E '^(gpuportal.session|pip|setuptools)[=@ ]'
    } >"$JUPYTER_LOCK.new" && mv "$JUPYTER_LOCK.new" "$JUPYTER_LOCK"
    log "wrote $JUPYTER_LOCK ($(grep -vc '^#' "$JUPYTER_LOCK") packages): commit it"
fi
rm -rf "$BUILD/tmp/portal-build"
# Byte code as every build writes it alike: pip's and dpkg's .pyc files are dropped and the whole tree compiled
# again with hash-based invalidation ("unchecked": the image is read-only, its sources never change).
# PYTHONDONTWRITEBYTECODE=1 whatever the caller's environment: compileall's own imports (-j0's process pool)
# would otherwise write timestamped .pyc files first, which compileall then takes as up to date; -f as well.
find "$BUILD" -xdev -name __pycache__ -type d -prune -exec rm -rf {} +
chroot "$BUILD" /usr/bin/env PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -m compileall -f -q -j0 --invalidation-mode unchecked-hash \
    /usr/lib/python3.11 /usr/lib/python3/dist-packages "$SYS_SITE" /opt/jupyter/lib/python3.11/site-packages \
    >>"$BUILD_LOG" 2>&1 || log "compileall left some files uncompiled (test data that is not Python 3; see $BUILD_LOG)"
install -D -m 644 "$REPO_DIR/hub/session/jupyter_server_config.json" \
    "$BUILD/opt/jupyter/etc/jupyter/jupyter_server_config.d/gpuportal_session.json"
install -D -m 644 "$REPO_DIR/hub/site-settings/jupyterlab-overrides.json" \
    "$BUILD/opt/jupyter/share/jupyter/lab/settings/overrides.json"
cleanup
rmdir "$BUILD/run/host-certs"
# The site's CA certificates into the image's store, so uv and pip in a profile's job (inside the image) reach the
# package index as the host does; a site adds its own CA the same way.
if ((${#SITE_CAS[@]})); then
    cp "${SITE_CAS[@]}" "$BUILD/usr/local/share/ca-certificates/"
    chroot "$BUILD" /usr/sbin/update-ca-certificates >>"$BUILD_LOG" 2>&1 || die "update-ca-certificates in the image failed (see $BUILD_LOG)"
    log "site CA certificates in the image: ${SITE_CAS[*]##*/}"
fi

# Tidy up, then what ch-run needs in a read-only image: the files and directories it mounts over
# (/etc/hosts, /etc/resolv.conf, /home, /tmp, /dev, /proc, /sys) and the mount points of the env cache and uv's
# directory (bind targets must exist: ch-run cannot make them in a read-only image).
# What a build writes that differs from build to build: logs, caches, backups, the day of the password change.
rm -rf "$BUILD"/var/cache/apt/archives/*.deb "$BUILD"/var/lib/apt/lists/* "$BUILD"/var/cache/ldconfig/aux-cache
find "$BUILD/var/log" -type f -delete
rm -f "$BUILD"/var/lib/dpkg/*-old "$BUILD"/var/cache/debconf/*-old "$BUILD"/etc/{passwd,group,shadow,gshadow}-
sed -i -E "s/^([^:]*:[^:]*:)[0-9]+:/\1$((IMAGE_EPOCH / 86400)):/" "$BUILD/etc/shadow"
: >"$BUILD/etc/resolv.conf"
: >"$BUILD/etc/hosts"
mkdir -p "$BUILD"/{home,tmp,dev,proc,sys,mnt,opt}
for m in "${MOUNT_POINTS[@]}"; do mkdir -p "$BUILD$m"; done
printf '%s\n' "name=$NAME" "inputs=$inputs_hash" >"$BUILD/etc/portal-image"   # no build time: same inputs, same bytes
# Readable by every user, writable by none but root (ch-run runs as the user; the image is mounted read-only).
chown -R root:root "$BUILD"
chmod -R u+rwX,go+rX,go-w "$BUILD"
chmod 1777 "$BUILD/tmp" "$BUILD/var/tmp"   # as on any Debian system (ch-run binds the host's /tmp over the first)

log "digest (sha256 over the sorted file list and contents)"
digest=$(PYTHONPATH=$REPO_DIR "$PYTHON" -m runtimes.digest "$BUILD") || die "could not compute the image digest"
pyver=$(chroot "$BUILD" /usr/bin/env PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c 'import platform; print(platform.python_version())')
osname=$(. "$BUILD/etc/os-release" && printf '%s' "$PRETTY_NAME")

# Swap in: the image before the previous one is removed, the previous one is renamed aside (kept until the next
# build, so a job that started in it keeps its files), the new one takes its place.
rm -rf --one-file-system "$BUILD.old"
if [[ -e $DEST ]]; then mv "$DEST" "$BUILD.old"; fi
mv "$BUILD" "$DEST"

"$PYTHON" - "$JSON" "$NAME" "$osname" "$pyver" "$digest" "$DEST" <<'EOF'
import json, os, sys
path, name, os_name, python, digest, dest = sys.argv[1:]
doc = {"name": name, "description": "Debian 12 minimal, Python 3.11 with numpy, scipy and scikit-learn (PyPI's wheels,"
       " pinned); JupyterLab in /opt/jupyter", "os": os_name, "python": python, "cuda": None, "digest": digest,
       "path": dest, "runtime": "charliecloud", "offers": ["jupyterlab"]}
tmp = path + ".tmp"
with open(tmp, "w") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")
os.chmod(tmp, 0o644)
os.replace(tmp, path)
EOF
printf '%s\n' "$inputs_hash" >"$STAMP"
log "image $NAME built in $(( $(date +%s) - t0 )) s: $DEST ($(du -sm --one-file-system "$DEST" | cut -f1) MB, $digest)"
