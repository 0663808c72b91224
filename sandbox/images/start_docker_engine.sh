#!/usr/bin/env bash
# Starts a Docker engine on a machine where none runs (CI, a fresh VM). Does nothing when an engine
# already answers, including a remote one named by DOCKER_HOST.
#
# The flags suit hosts where the usual setup does not work: no systemd, and no permission to manage
# iptables or bridges (sandboxes run with --network none, so a bridge is never needed).
#
# Storage driver: overlay2 when the kernel can really mount overlay on the engine's data root (probed
# with a test mount, since a VM can list overlay in /proc/filesystems and still refuse it), else vfs.
# vfs works on any filesystem but copies the whole image for every container: opening a sandbox takes
# several times longer. Images live per driver: after a switch, build them again
# (make sandbox-images); the other driver's copies stay under the data root until deleted.
#
# Environment: DOCKERD_LOG (default /var/log/dockerd-sandbox.log), DOCKERD_WAIT seconds (default 60),
# DOCKERD_STORAGE_DRIVER (skip the probe and use this driver), DOCKERD_DATA_ROOT (default
# /var/lib/docker).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  echo "A Docker engine already answers (storage driver: $(docker info --format '{{.Driver}}')); left as it is"
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

data_root="${DOCKERD_DATA_ROOT:-/var/lib/docker}"
pid_file=/var/run/docker.pid

# Prints why overlay cannot be used, or nothing when a real overlay mount works on the data root.
overlay_problem() {
  if ! grep -qw overlay /proc/filesystems; then
    $sudo modprobe overlay >/dev/null 2>&1 || true
    if ! grep -qw overlay /proc/filesystems; then
      echo "the kernel has no overlay filesystem (not in /proc/filesystems, modprobe overlay failed)"
      return
    fi
  fi
  $sudo mkdir -p "$data_root"
  local probe
  if ! probe="$($sudo mktemp -d "$data_root/overlay-probe.XXXXXX")"; then
    echo "cannot create a test directory under $data_root"
    return
  fi
  $sudo mkdir "$probe/lower" "$probe/upper" "$probe/work" "$probe/merged"
  if ! $sudo mount -t overlay overlay \
      -o "lowerdir=$probe/lower,upperdir=$probe/upper,workdir=$probe/work" "$probe/merged" 2>/dev/null; then
    echo "a test mount of overlay on $data_root failed"
  elif ! { $sudo touch "$probe/merged/written" && [ -e "$probe/upper/written" ]; }; then
    echo "a test mount of overlay on $data_root did not write through to its upper directory"
  fi
  $sudo umount "$probe/merged" 2>/dev/null || true
  $sudo rm -rf "$probe"
}

start_dockerd() {
  echo "Starting dockerd with the $1 storage driver (log: $log)"
  # setsid: the engine must outlive the shell (make, CI step) that started it.
  $sudo setsid sh -c "nohup dockerd --storage-driver=$1 --data-root='$data_root' --iptables=false --bridge=none >>'$log' 2>&1 &"
}

# 0 once the engine answers; 1 when it did not within the wait, or its process has exited.
wait_for_engine() {
  local seen_pid=""
  for _ in $(seq "$wait_seconds"); do
    if docker info >/dev/null 2>&1; then
      echo "Docker engine is up (storage driver: $(docker info --format '{{.Driver}}'))"
      return 0
    fi
    sleep 1
    if [ -f "$pid_file" ] && $sudo kill -0 "$(cat "$pid_file")" 2>/dev/null; then
      seen_pid=1
    elif [ -n "$seen_pid" ]; then
      return 1  # dockerd started and died (e.g. overlay2 refused on a filesystem without d_type)
    fi
  done
  return 1
}

# A dockerd that is starting (or stuck) holds the pid file; starting a second one would fail.
driver=""
if ! { [ -f "$pid_file" ] && $sudo kill -0 "$(cat "$pid_file")" 2>/dev/null; }; then
  if [ -n "${DOCKERD_STORAGE_DRIVER:-}" ]; then
    driver="$DOCKERD_STORAGE_DRIVER"
    echo "Storage driver $driver, as DOCKERD_STORAGE_DRIVER says"
  else
    problem="$(overlay_problem)"
    if [ -z "$problem" ]; then
      driver=overlay2
      echo "Storage driver overlay2: a test mount of overlay on $data_root works"
    else
      driver=vfs
      echo "Storage driver vfs (slower: a full image copy per container): $problem"
    fi
  fi
  start_dockerd "$driver"
fi

wait_for_engine && exit 0
if [ "$driver" = overlay2 ] && [ -z "${DOCKERD_STORAGE_DRIVER:-}" ] \
    && ! { [ -f "$pid_file" ] && $sudo kill -0 "$(cat "$pid_file")" 2>/dev/null; }; then
  echo "dockerd exited with overlay2 (last lines of $log below); falling back to vfs" >&2
  tail -n 5 "$log" >&2 || true
  start_dockerd vfs
  wait_for_engine && exit 0
fi
echo "The Docker engine did not answer within ${wait_seconds}s; last lines of $log:" >&2
tail -n 20 "$log" >&2 || true
exit 1
