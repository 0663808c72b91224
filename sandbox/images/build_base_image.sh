#!/usr/bin/env bash
# Builds the sandbox base image from Debian packages, without any registry:
# debootstrap a minimal bookworm with python3 and numpy, add an unprivileged user, import the tree.
#
# usage: build_base_image.sh [NAME]
#   NAME defaults to $SANDBOX_IMAGE, else autoexperiment-base:bookworm.
#   Quick no-op when NAME exists; FORCE=1 rebuilds. DEBIAN_MIRROR overrides the mirror.
# Debootstraps a minimal Debian, so it takes a while the first time. Needs root (debootstrap) and a running engine
# (start_docker_engine.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
name="${1:-${SANDBOX_IMAGE:-autoexperiment-base:bookworm}}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# The identity sandboxed commands run as: sandbox/base.py SANDBOX_UID, which refuses an image
# labelled otherwise. It is no account of the host.
uid=61000

built_for="$(docker image inspect -f '{{index .Config.Labels "org.autoexperiment.sandbox-uid"}}' "$name" 2>/dev/null || true)"
if [ -z "${FORCE:-}" ] && [ "$built_for" = "$uid" ]; then
  echo "Image $name exists (FORCE=1 rebuilds it)"
  exit 0
fi
"$here/install_host_packages.sh"

# /var/tmp rather than /tmp: the tree is ~300 MB and /tmp may be a small tmpfs.
rootfs="$(mktemp -d /var/tmp/autoexperiment-rootfs.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT
# mktemp makes the directory 0700; as the image's / it would lock the sandbox user out of everything.
chmod 0755 "$rootfs"

echo "debootstrap bookworm into $rootfs"
debootstrap --variant=minbase --include=python3,python3-numpy bookworm "$rootfs" "$mirror" >"$rootfs.log" 2>&1 \
  || { tail -n 30 "$rootfs.log" >&2; rm -f "$rootfs.log"; exit 1; }
rm -f "$rootfs.log"

echo "sandbox:x:$uid:$uid:sandbox:/home/sandbox:/bin/bash" >>"$rootfs/etc/passwd"
echo "sandbox:x:$uid:" >>"$rootfs/etc/group"
echo 'sandbox:!:19000:0:99999:7:::' >>"$rootfs/etc/shadow"
mkdir -p "$rootfs/home/sandbox" "$rootfs/workspace"
chown "$uid:$uid" "$rootfs/home/sandbox" "$rootfs/workspace"

# Suite images (build_suite_image.sh) run apt-get in this tree, so give it the update channels too.
cat >"$rootfs/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF

# Every container gets its own copy of the tree under the vfs driver, so smaller starts faster.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
  "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
  "$rootfs"/usr/share/locale/*

# Environments (sandbox/environments.py) are venvs of the host's /usr/bin/python3: the Docker
# backend refuses one made by another version than the image's, which this label records.
python_version="$(chroot "$rootfs" /usr/bin/python3 -c 'import platform; print(platform.python_version())')"

echo "Importing $name"
# Import untagged and tag only once the image works: a failed tar must not leave an empty image
# under NAME, which would make the next run skip the build.
image_id="$(tar --numeric-owner -C "$rootfs" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'WORKDIR /workspace' \
  --change "USER $uid:$uid" \
  --change 'CMD ["sleep", "infinity"]' \
  --change 'LABEL org.autoexperiment.sandbox=base' \
  --change "LABEL org.autoexperiment.sandbox-uid=$uid" \
  --change "LABEL org.autoexperiment.python=$python_version" \
  -)"
if ! docker run --rm --network none "$image_id" python3 -c "import numpy" >/dev/null; then
  docker rmi "$image_id" >/dev/null || true
  echo "The imported image cannot run python3 with numpy" >&2
  exit 1
fi
docker tag "$image_id" "$name"
docker image inspect -f "Built $name ({{.Size}} bytes)" "$name"
