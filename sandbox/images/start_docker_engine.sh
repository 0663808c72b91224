#!/usr/bin/env bash
# Starts a Docker engine on a machine where none runs (CI, a fresh VM). Does nothing when an engine
# already answers, including a remote one named by DOCKER_HOST.
#
# The flags suit hosts where the usual setup does not work: no systemd, no overlay support (vfs
# copies each image per container, slower but works on any filesystem), and no permission to manage
# iptables or bridges. Sandboxes run with --network none, so a bridge is never needed.
#
# Environment: DOCKERD_LOG (default /var/log/dockerd-sandbox.log), DOCKERD_WAIT seconds (default 60).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  exit 0
fi
if [ -n "${DOCKER_HOST:-}" ]; then
  echo "DOCKER_HOST=$DOCKER_HOST is set but that engine does not answer; not starting a local one." >&2
  exit 1
fi

"$here/install_host_packages.sh"

log="${DOCKERD_LOG:-/var/log/dockerd-sandbox.log}"
wait_seconds="${DOCKERD_WAIT:-60}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

# A dockerd that is starting (or stuck) holds the pid file; starting a second one would fail.
pid_file=/var/run/docker.pid
if ! { [ -f "$pid_file" ] && $sudo kill -0 "$(cat "$pid_file")" 2>/dev/null; }; then
  echo "Starting dockerd (log: $log)"
  # setsid: the engine must outlive the shell (make, CI step) that started it.
  $sudo setsid sh -c "nohup dockerd --storage-driver=vfs --iptables=false --bridge=none >>'$log' 2>&1 &"
fi

for _ in $(seq "$wait_seconds"); do
  if docker info >/dev/null 2>&1; then
    echo "Docker engine is up"
    exit 0
  fi
  sleep 1
done
echo "The Docker engine did not answer within ${wait_seconds}s; last lines of $log:" >&2
tail -n 20 "$log" >&2 || true
exit 1
