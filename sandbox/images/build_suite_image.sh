#!/usr/bin/env bash
# Builds a suite's own image: the base image plus the Debian and pip packages the suite declares.
#
# usage: build_suite_image.sh BASE NAME [--apt PACKAGE...] [--pip REQUIREMENT...]
#   build_suite_image.sh autoexperiment-base:bookworm suite-mlrc:1 --apt python3-scipy --pip tqdm==4.66.4
#
# Idempotent: NAME is labelled with a hash of (BASE's id, packages); a matching NAME is left alone.
# Installing needs network at build time only (the build container uses the host's network,
# BUILD_NETWORK overrides it); sandboxes started from NAME still have none. pip installs into the
# system Python (--break-system-packages: the image is single-purpose), python3-pip comes from apt.
# pip trusts the host's CA bundle (BUILD_CA_BUNDLE, else PIP_CERT, else the Debian bundle).
set -euo pipefail

if [ $# -lt 2 ]; then
  sed -n '4,5p' "$0" >&2
  exit 2
fi
base="$1"
name="$2"
shift 2
apt=()
pip=()
mode=""
# Package names and pip requirements (name[extra]==1.0) go through word splitting inside the build
# container: allow no spaces, quotes, $ or globbing characters other than the brackets of extras.
valid_name='^[A-Za-z0-9][]A-Za-z0-9._+:=<>~,![-]*$'
for arg in "$@"; do
  case "$arg" in
    --apt) mode=apt ;;
    --pip) mode=pip ;;
    *)
      if ! [[ "$arg" =~ $valid_name ]]; then
        echo "Invalid package name: $arg" >&2
        exit 2
      fi
      case "$mode" in
        apt) apt+=("$arg") ;;
        pip) pip+=("$arg") ;;
        *) echo "Package $arg must follow --apt or --pip" >&2; exit 2 ;;
      esac
      ;;
  esac
done

base_id="$(docker image inspect -f '{{.Id}}' "$base" 2>/dev/null)" || {
  echo "Base image $base does not exist; build it with sandbox/images/build_base_image.sh" >&2
  exit 1
}
spec="$(printf '%s\napt:%s\npip:%s\n' "$base_id" "${apt[*]:-}" "${pip[*]:-}" | sha256sum | cut -c1-16)"
current="$(docker image inspect -f '{{index .Config.Labels "org.autoexperiment.spec"}}' "$name" 2>/dev/null || true)"
if [ "$current" = "$spec" ]; then
  echo "Image $name is up to date"
  exit 0
fi

# Behind a TLS-intercepting proxy pip must trust what the host trusts: lend it the host's CA bundle
# (a build-time mount, not part of the image), and pass on index and proxy settings.
build_args=()
ca="${BUILD_CA_BUNDLE:-${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}}"
if [ -f "$ca" ]; then
  build_args+=(-v "$ca:/etc/ssl/certs/build-ca.crt:ro" -e PIP_CERT=/etc/ssl/certs/build-ca.crt)
fi
for var in PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_TRUSTED_HOST http_proxy https_proxy HTTP_PROXY HTTPS_PROXY no_proxy NO_PROXY; do
  if [ -n "${!var:-}" ]; then build_args+=(-e "$var"); fi
done

container="autoexperiment-build-$$"
trap 'docker rm -f "$container" >/dev/null 2>&1 || true' EXIT
echo "Building $name from $base (apt: ${apt[*]:-none}; pip: ${pip[*]:-none})"
docker run --name "$container" --user 0:0 --network "${BUILD_NETWORK:-host}" \
  -e APT_PACKAGES="${apt[*]:-}" -e PIP_PACKAGES="${pip[*]:-}" "${build_args[@]}" \
  "$base" /bin/sh -c '
    set -euf
    export DEBIAN_FRONTEND=noninteractive
    extra=""
    [ -z "$PIP_PACKAGES" ] || extra="python3-pip"
    if [ -n "$APT_PACKAGES$extra" ]; then
      apt-get update -q
      apt-get install -y -q --no-install-recommends $APT_PACKAGES $extra
    fi
    if [ -n "$PIP_PACKAGES" ]; then
      pip3 install --no-cache-dir --break-system-packages $PIP_PACKAGES
    fi
    apt-get clean
    rm -rf /var/lib/apt/lists/*
  '
docker commit \
  --change 'USER 1000:1000' \
  --change 'CMD ["sleep", "infinity"]' \
  --change "LABEL org.autoexperiment.spec=$spec org.autoexperiment.sandbox=suite" \
  "$container" "$name" >/dev/null
echo "Built $name"
