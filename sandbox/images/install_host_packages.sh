#!/usr/bin/env bash
# Installs the Debian packages the sandboxes need on this host, skipping what is already there:
#   bubblewrap     the bwrap backend;
#   docker.io      the Docker engine and client (the docker backend, building images);
#   debootstrap    building the base image from Debian packages (no registry is needed);
#   python3-numpy  experiments under bwrap run the host's /usr, so python3 and numpy come from here;
#   util-linux     prlimit, which applies per-command resource limits in both backends.
# A clean CI clone runs this through start_docker_engine.sh / build_base_image.sh, and through the
# Makefile, which adds the packages the rest of the project needs as arguments (chromium, patch).
# usage: install_host_packages.sh [EXTRA_PACKAGE...]
set -euo pipefail

packages=(bubblewrap docker.io debootstrap python3 python3-numpy util-linux "$@")
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null; then
  echo "Missing packages: ${missing[*]}; install them with your package manager." >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "Installing ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
