#!/usr/bin/env bash
# Set up the GPU node for the serving lab: Docker, the NVIDIA container toolkit,
# Docker's cgroup driver work-around, nvtop, and the lab's code.
#
# Idempotent: every step checks first and acts only when something is missing,
# so running it again changes nothing (Docker is restarted only when its
# configuration changed). Run as the login user (cc) with sudo, or as root.
#
# Settings (environment):
#   REPO_URL, REPO_REF  git clone of the lab's code (REF: branch or tag; default main)
#   CODE_TARBALL        an uploaded checkout (.tar.gz) to unpack instead of cloning
#   CODE_DIR            where the code goes (default $HOME/serve-system-lab)
#   NODE_USER           the user added to the docker group (default: the caller)
#   NODE_ROOT           prefix for system paths (/etc, /usr/share); empty on a real node
#   UPDATE_CODE=1       fetch and check out REPO_REF again in an existing clone
set -euo pipefail

NODE_ROOT="${NODE_ROOT:-}"
NODE_USER="${NODE_USER:-${SUDO_USER:-$(id -un)}}"
CODE_DIR="${CODE_DIR:-$HOME/serve-system-lab}"
REPO_URL="${REPO_URL:-}"
REPO_REF="${REPO_REF:-main}"
CODE_TARBALL="${CODE_TARBALL:-}"
UPDATE_CODE="${UPDATE_CODE:-0}"

DAEMON_JSON="$NODE_ROOT/etc/docker/daemon.json"
NVIDIA_KEYRING="$NODE_ROOT/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
NVIDIA_LIST="$NODE_ROOT/etc/apt/sources.list.d/nvidia-container-toolkit.list"
NVIDIA_REPO="https://nvidia.github.io/libnvidia-container"

if [ "$(id -u)" -eq 0 ]; then SUDO=(); else SUDO=(sudo); fi
DOCKER_CHANGED=0
APT_UPDATED=0

say() { printf '[node-setup] %s\n' "$*"; }

# no prompts: this runs over SSH without a terminal (papermill, Fabric);
# sudo drops the environment, so the settings go on the command line
QUIET_APT=(env DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=a)
apt_get() { "${SUDO[@]}" "${QUIET_APT[@]}" apt-get "$@"; }

apt_update_once() {
  if [ "$APT_UPDATED" -eq 0 ]; then
    apt_get update -q
    APT_UPDATED=1
  fi
}

install_docker() {
  if command -v docker >/dev/null 2>&1; then
    say "docker: present"
    return
  fi
  say "docker: installing with the convenience script"
  local script
  script="$(mktemp)"
  curl -fsSL https://get.docker.com -o "$script"
  "${SUDO[@]}" "${QUIET_APT[@]}" sh "$script"
  rm -f "$script"
  DOCKER_CHANGED=1
}

add_user_to_docker_group() {
  if id -nG "$NODE_USER" | tr ' ' '\n' | grep -qx docker; then
    say "docker group: $NODE_USER is a member"
    return
  fi
  say "docker group: adding $NODE_USER (takes effect at the next login)"
  "${SUDO[@]}" groupadd -f docker
  "${SUDO[@]}" usermod -aG docker "$NODE_USER"
}

install_container_toolkit() {
  if command -v nvidia-ctk >/dev/null 2>&1; then
    say "nvidia-container-toolkit: present"
    return
  fi
  say "nvidia-container-toolkit: installing"
  if [ ! -s "$NVIDIA_KEYRING" ]; then
    "${SUDO[@]}" mkdir -p "$(dirname "$NVIDIA_KEYRING")"
    curl -fsSL "$NVIDIA_REPO/gpgkey" | "${SUDO[@]}" gpg --dearmor -o "$NVIDIA_KEYRING"
  fi
  if [ ! -s "$NVIDIA_LIST" ]; then
    "${SUDO[@]}" mkdir -p "$(dirname "$NVIDIA_LIST")"
    curl -fsSL "$NVIDIA_REPO/stable/deb/nvidia-container-toolkit.list" \
      | sed 's#deb https://#deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] https://#g' \
      | "${SUDO[@]}" tee "$NVIDIA_LIST" >/dev/null
  fi
  APT_UPDATED=0  # the new source needs a fresh package list
  apt_update_once
  apt_get install -y -q nvidia-container-toolkit
}

# Edit daemon.json with Python's json module (present on every Ubuntu image):
# never clobber what is there, only add the missing key.
json_has() {  # json_has FILE KEY [SUBKEY]
  [ -s "$1" ] || return 1
  python3 - "$@" <<'PY'
import json, sys
path, *keys = sys.argv[1:]
node = json.load(open(path))
for key in keys:
    if not isinstance(node, dict) or key not in node:
        sys.exit(1)
    node = node[key]
PY
}

configure_nvidia_runtime() {
  if json_has "$DAEMON_JSON" runtimes nvidia; then
    say "docker runtime: nvidia already configured"
    return
  fi
  say "docker runtime: configuring nvidia"
  "${SUDO[@]}" mkdir -p "$(dirname "$DAEMON_JSON")"
  "${SUDO[@]}" nvidia-ctk runtime configure --runtime=docker --config="$DAEMON_JSON"
  DOCKER_CHANGED=1
}

# Work-around for nvidia-container-toolkit issue 48 (containers lose GPU access
# after a systemd daemon-reload): cgroupfs as Docker's cgroup driver, set only
# when the administrator has not chosen exec-opts already.
configure_cgroup_driver() {
  if json_has "$DAEMON_JSON" exec-opts; then
    say "docker exec-opts: already set, left as is"
    return
  fi
  say "docker exec-opts: setting native.cgroupdriver=cgroupfs"
  local updated
  updated="$(mktemp)"
  python3 - "$DAEMON_JSON" "$updated" <<'PY'
import json, os, sys
src, dst = sys.argv[1:]
config = json.load(open(src)) if os.path.exists(src) and os.path.getsize(src) else {}
config["exec-opts"] = ["native.cgroupdriver=cgroupfs"]
with open(dst, "w") as out:
    json.dump(config, out, indent=4)
    out.write("\n")
PY
  "${SUDO[@]}" mkdir -p "$(dirname "$DAEMON_JSON")"
  "${SUDO[@]}" cp "$updated" "$DAEMON_JSON"
  rm -f "$updated"
  DOCKER_CHANGED=1
}

restart_docker_if_changed() {
  if [ "$DOCKER_CHANGED" -eq 1 ]; then
    say "docker: restarting to apply its configuration"
    "${SUDO[@]}" systemctl restart docker
  else
    say "docker: configuration unchanged, not restarted"
  fi
}

install_nvtop() {
  if command -v nvtop >/dev/null 2>&1; then
    say "nvtop: present"
    return
  fi
  say "nvtop: installing"
  apt_update_once
  apt_get install -y -q nvtop
}

place_code_from_tarball() {
  local stamp="$CODE_DIR/.servelab-tarball.sha256" digest
  digest="$(sha256sum "$CODE_TARBALL" | cut -d' ' -f1)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$digest" ]; then
    say "code: $CODE_DIR already holds this upload"
    return
  fi
  say "code: unpacking $CODE_TARBALL into $CODE_DIR"
  mkdir -p "$CODE_DIR"
  tar -xzf "$CODE_TARBALL" -C "$CODE_DIR"
  printf '%s\n' "$digest" >"$stamp"
}

place_code_from_git() {
  if [ -d "$CODE_DIR/.git" ]; then
    if [ "$UPDATE_CODE" = "1" ]; then
      say "code: updating $CODE_DIR to $REPO_REF"
      git -C "$CODE_DIR" fetch --depth 1 origin "$REPO_REF"
      git -C "$CODE_DIR" checkout --force FETCH_HEAD
    else
      say "code: $CODE_DIR is a clone already (UPDATE_CODE=1 fetches $REPO_REF again)"
    fi
    return
  fi
  if [ -z "$REPO_URL" ]; then
    say "code: no REPO_URL and no CODE_TARBALL given; set one of them" >&2
    exit 2
  fi
  say "code: cloning $REPO_URL ($REPO_REF) into $CODE_DIR"
  git clone --depth 1 --branch "$REPO_REF" "$REPO_URL" "$CODE_DIR"
}

place_code() {
  if [ -n "$CODE_TARBALL" ]; then
    place_code_from_tarball
  else
    place_code_from_git
  fi
}

main() {
  install_docker
  add_user_to_docker_group
  install_container_toolkit
  configure_nvidia_runtime
  configure_cgroup_driver
  restart_docker_if_changed
  install_nvtop
  place_code
  say "done"
}

main "$@"
