#!/usr/bin/env bash
# Installs the Debian packages the project needs: bubblewrap and Docker for the sandboxes,
# debootstrap to build the base image, python3-numpy for the built-in suite's experiments when they
# run under bubblewrap (which uses the host's /usr), and Chromium for the page tests.
set -euo pipefail
packages=(bubblewrap docker.io debootstrap python3 python3-numpy chromium)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null; then
  echo "Missing system packages: ${missing[*]}. Install them with your package manager." >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "Installing system packages: ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
