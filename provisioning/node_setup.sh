#!/usr/bin/env bash
# Set up the GPU node for the serving lab: a check of the GPU and its driver,
# Docker (Engine 27.5.1, the Jupyter image's CLI version, with its compose plugin, from Docker's apt
# repository under its key's fingerprint; an engine already there is kept if it serves that CLI), the
# NVIDIA container toolkit (at least the version without known container escapes), Docker's default
# bind address on loopback, Docker's cgroup driver work-around, nvtop, and the lab's code.
#
# Idempotent: every step checks first and acts only when something is missing,
# so running it again changes nothing (Docker is restarted only when its
# configuration changed). Run as the login user (cc) with sudo, or as root.
# A run cut short (Ctrl-C in notebook 02, a dropped SSH connection) is finished by the next one:
# it waits for the apt/dpkg locks, lets dpkg finish what was cut off (dpkg --configure -a, when
# dpkg --audit reports it), and installs Docker again when only part of it arrived.
#
# Settings (environment):
#   REPO_URL, REPO_REF  git clone of the lab's code (REF: branch or tag; default main)
#   CODE_TARBALL        an uploaded checkout (.tar.gz) to unpack instead of cloning; files newer here are kept
#   CODE_DIR            where the code goes (default $HOME/serve-system-lab)
#   NODE_USER           the user added to the docker group (default: the caller)
#   NODE_ROOT           prefix for system paths (/etc, /usr/share, /var); empty on a real node
#   UPDATE_CODE=1       fetch and check out REPO_REF again in an existing clone
#   APT_LOCK_TIMEOUT    seconds to wait for another apt/dpkg (unattended-upgrades) to finish (900)
#   SKIP_GPU_CHECK=1    go on whatever nvidia-smi says
#   LAB_PORTS           opened in firewalld when it runs (default: 8888 Jupyter, 80 GourmetGram: the only
#                       ports that answer on the node's public address, servelab/core/exposure.py)
#
# Exit codes: 2 no code source, 3 the GPU or its driver does not suit the images,
# 4 Docker's compose plugin missing, 5 the apt/dpkg lock stayed taken, 6 a Docker engine already
# on the node refuses the API of the Jupyter image's docker CLI, 7 a repository's key is not the one
# pinned here, 8 no package of the pinned version; others: the failed command's.
set -euo pipefail

# ---- what the lab's images need from the GPU and its driver ---------------------------------
# NGC Triton 24.10 (CUDA 12.6.2) "requires NVIDIA Driver release 560 or later. However, if you are
# running on a data center GPU (for example, T4 or any other data center GPU), you can use NVIDIA
# driver release 470.57 (or later R470), 525.85 (or later R525), 535.86 (or later R535), or 545.23
# (or later R545)", and "supports CUDA compute capability 6.0 and later":
#   https://docs.nvidia.com/deeplearning/triton-inference-server/release-notes/rel-24-10.html
# Those older branches work through the CUDA forward-compatibility libraries the NGC image carries,
# which "is applicable only for systems with NVIDIA Data Center GPUs" (and select server RTX cards):
#   https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html
# The FastAPI images' CUDA 12 builds of torch and onnxruntime need less (CUDA minor-version
# compatibility: R525 or later), so Triton's needs are the bar. Maxwell, Pascal (the P100) and Volta
# are supported up to the R580 branch; later branches do not drive them at all (NVIDIA's legacy GPU
# list, https://www.nvidia.com/en-us/drivers/unix/legacy-gpu/).
MIN_COMPUTE_CAP="6.0"
MIN_DRIVER_BRANCH=560
FORWARD_COMPAT_DRIVERS="470.57 525.85 535.86 545.23"   # lowest version of each branch, data-center GPUs only
DATACENTER_GPU_REGEX='^(Tesla |NVIDIA [ABHL][0-9]+|Quadro RTX [68]000|Quadro GV100)'
LEGACY_BELOW_COMPUTE_CAP="7.5"   # Maxwell, Pascal, Volta ...
LEGACY_MAX_DRIVER_BRANCH=580     # ... end with this branch
GPU_IMAGE="CC-Ubuntu24.04-CUDA"

# ---- the Docker engine the lab's Jupyter image drives -----------------------------------------
# The Jupyter image carries docker CLI 27.5.1 (docker/Dockerfile.jupyter: FROM docker:27.5.1-cli),
# which speaks Engine API 1.47; an engine serves a client only down to its MinAPIVersion. This engine
# version is installed from Docker's apt repository (and held there, so unattended-upgrades keeps it);
# an engine already on the node is kept when it still accepts API 1.47.
DOCKER_VERSION="27.5.1"
DOCKER_CLI_API="1.47"
# Docker's release key (https://docs.docker.com/engine/install/ubuntu/) and NVIDIA's for the container
# toolkit's repository: a downloaded key with another fingerprint is refused, never trusted
DOCKER_KEY_FINGERPRINT="9DC858229FC7DD38854AE2D88D81803C0EBFCD88"
NVIDIA_KEY_FINGERPRINT="C95B321B61E88C1809C4F759DDCAE044F796ECB0"
# The NVIDIA container toolkit: versions before 1.17.8 let a container escape to the host (CVE-2025-23266,
# CVE-2025-23267; NVIDIA's bulletin of July 2025). An older toolkit on the node is upgraded to this one.
NVIDIA_CTK_VERSION="1.17.8"
# Where Docker publishes a port given without an address (daemon.json's "ip"): loopback, as
# servelab/core/exposure.py's DAEMON_DEFAULT_IP, so Model Analyzer's Tritons and anything a student
# starts stay off the public address (moby/moby#4737: published ports bypass the host's firewall).
DEFAULT_BIND_IP="127.0.0.1"

NODE_ROOT="${NODE_ROOT:-}"
NODE_USER="${NODE_USER:-${SUDO_USER:-$(id -un)}}"
CODE_DIR="${CODE_DIR:-$HOME/serve-system-lab}"
REPO_URL="${REPO_URL:-}"
REPO_REF="${REPO_REF:-main}"
CODE_TARBALL="${CODE_TARBALL:-}"
UPDATE_CODE="${UPDATE_CODE:-0}"
APT_LOCK_TIMEOUT="${APT_LOCK_TIMEOUT:-900}"
APT_LOCK_POLL="${APT_LOCK_POLL:-5}"
SKIP_GPU_CHECK="${SKIP_GPU_CHECK:-0}"
LAB_PORTS="${LAB_PORTS:-8888/tcp 80/tcp}"

DAEMON_JSON="$NODE_ROOT/etc/docker/daemon.json"
DOCKER_KEYRING="$NODE_ROOT/etc/apt/keyrings/docker.gpg"
DOCKER_LIST="$NODE_ROOT/etc/apt/sources.list.d/docker.list"
DOCKER_REPO="https://download.docker.com/linux/ubuntu"
OS_RELEASE="$NODE_ROOT/etc/os-release"
NVIDIA_KEYRING="$NODE_ROOT/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
NVIDIA_LIST="$NODE_ROOT/etc/apt/sources.list.d/nvidia-container-toolkit.list"
NVIDIA_REPO="https://nvidia.github.io/libnvidia-container"
# held by apt/dpkg while they work (POSIX locks): unattended-upgrades takes them after boot
APT_LOCKS=("$NODE_ROOT/var/lib/dpkg/lock-frontend" "$NODE_ROOT/var/lib/dpkg/lock"
           "$NODE_ROOT/var/lib/apt/lists/lock" "$NODE_ROOT/var/cache/apt/archives/lock")

if [ "$(id -u)" -eq 0 ]; then SUDO=(); else SUDO=(sudo); fi
DOCKER_CHANGED=0
APT_UPDATED=0

say() { printf '[node-setup] %s\n' "$*"; }
fail() {  # fail CODE MESSAGE: stop with what to do
  local code="$1"
  shift
  printf '[node-setup] ERROR: %s\n' "$*" >&2
  exit "$code"
}

# ---- the GPU ------------------------------------------------------------------------------------
trim() {  # trim TEXT: without leading and trailing blanks
  local text="$1"
  text="${text#"${text%%[![:space:]]*}"}"
  printf '%s' "${text%"${text##*[![:space:]]}"}"
}

cap_number() {  # "6.0" -> 60, "8.6" -> 86, "12.0" -> 120
  local major="${1%%.*}" minor="${1#*.}"
  [ "$minor" != "$1" ] || minor=0
  echo $((10#$major * 10 + 10#${minor:0:1}))
}

forward_compatible() {  # forward_compatible DRIVER: one of the data-center branches Triton accepts
  local driver="$1" branch="${1%%.*}" rest minor allowed
  rest="${driver#*.}"
  minor="${rest%%.*}"
  for allowed in $FORWARD_COMPAT_DRIVERS; do
    if [ "${allowed%%.*}" = "$branch" ] && [ "$((10#$minor))" -ge "$((10#${allowed#*.}))" ]; then
      return 0
    fi
  done
  return 1
}

check_gpu() {
  if [ "$SKIP_GPU_CHECK" = "1" ]; then
    say "gpu: check skipped (SKIP_GPU_CHECK=1)"
    return
  fi
  local wrong_image="the lab needs a GPU node (node type gpu_p100) launched with the $GPU_IMAGE image, \
which ships the NVIDIA driver: delete this server (python -m provisioning teardown --keep-lease) and launch it \
again with that image (or set SKIP_GPU_CHECK=1 to go on anyway)"
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    fail 3 "gpu: nvidia-smi not found, so no NVIDIA driver is installed; $wrong_image"
  fi
  local out
  if ! out="$(nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>&1)" \
     || [ -z "$out" ] || [[ "$out" != *,* ]]; then
    fail 3 "gpu: nvidia-smi could not list the GPUs (it said: ${out:-nothing}): this node has none, its \
driver does not drive it (Pascal GPUs such as the P100 need a driver branch <= R$LEGACY_MAX_DRIVER_BRANCH), or \
the driver is too old to report compute_cap (before R510); $wrong_image"
  fi
  local name driver cap min_cap legacy_cap branch number
  min_cap="$(cap_number "$MIN_COMPUTE_CAP")"
  legacy_cap="$(cap_number "$LEGACY_BELOW_COMPUTE_CAP")"
  while IFS=',' read -r name driver cap; do
    name="$(trim "$name")" driver="$(trim "$driver")" cap="$(trim "$cap")"
    if ! [[ "$driver" =~ ^[0-9]+\.[0-9]+ && "$cap" =~ ^[0-9]+\.[0-9]+$ ]]; then
      fail 3 "gpu: nvidia-smi reported '$name, $driver, $cap', not a driver version and a compute \
capability: check the driver (nvidia-smi -q); $wrong_image"
    fi
    branch="${driver%%.*}"
    number="$(cap_number "$cap")"
    if [ "$number" -lt "$min_cap" ]; then
      fail 3 "gpu: $name has compute capability $cap; the lab's images (Triton 24.10, the CUDA 12 builds \
of torch and ONNX Runtime) need $MIN_COMPUTE_CAP or higher: reserve a gpu_p100 node (or a newer GPU)"
    fi
    if [ "$number" -lt "$legacy_cap" ] && [ "$branch" -gt "$LEGACY_MAX_DRIVER_BRANCH" ]; then
      fail 3 "gpu: driver $driver (R$branch) no longer supports $name (compute capability $cap): it needs a \
driver branch <= R$LEGACY_MAX_DRIVER_BRANCH and >= R$MIN_DRIVER_BRANCH; install one (e.g. the R$LEGACY_MAX_DRIVER_BRANCH \
packages from NVIDIA's CUDA repository) or use an image that has one"
    fi
    if [ "$branch" -ge "$MIN_DRIVER_BRANCH" ]; then
      say "gpu: $name, driver $driver, compute capability $cap: OK"
    elif [[ "$name" =~ $DATACENTER_GPU_REGEX ]] && forward_compatible "$driver"; then
      say "gpu: $name, driver $driver, compute capability $cap: OK (a data-center GPU: Triton uses its CUDA \
forward-compatibility libraries)"
    else
      fail 3 "gpu: driver $driver on $name is too old for the lab's Triton image (24.10, CUDA 12.6): it needs \
R$MIN_DRIVER_BRANCH or newer (on data-center GPUs also one of $FORWARD_COMPAT_DRIVERS or later in that branch); \
relaunch with the $GPU_IMAGE image, or install a driver of branch $MIN_DRIVER_BRANCH-$LEGACY_MAX_DRIVER_BRANCH"
    fi
  done <<<"$out"
}

# ---- apt ----------------------------------------------------------------------------------------
# Who holds an apt/dpkg lock ("command pid" per holder; nothing when free). apt and dpkg take POSIX
# (fcntl) locks, which flock(1) cannot see; lslocks (util-linux, on every Ubuntu) lists them.
apt_lock_holders() {
  command -v lslocks >/dev/null 2>&1 || return 0
  local cmd pid path lock
  { "${SUDO[@]}" lslocks --noheadings --raw --output COMMAND,PID,PATH 2>/dev/null || true; } \
    | while read -r cmd pid path; do
        for lock in "${APT_LOCKS[@]}"; do
          if [ "$path" = "$lock" ]; then printf '%s (pid %s, %s)\n' "$cmd" "$pid" "$path"; fi
        done
      done | sort -u | tr '\n' ' '
}

# Wait until no apt/dpkg holds its locks, up to APT_LOCK_TIMEOUT, saying whom it waits for.
wait_for_apt() {
  local waited=0 holders
  holders="$(apt_lock_holders)"
  [ -n "$holders" ] || return 0
  say "apt: waiting up to ${APT_LOCK_TIMEOUT} s for the apt/dpkg lock, held by ${holders}(unattended-upgrades \
runs after boot)"
  while [ -n "$holders" ]; do
    if [ "$waited" -ge "$APT_LOCK_TIMEOUT" ]; then
      fail 5 "apt: the apt/dpkg lock is still held by ${holders}after ${APT_LOCK_TIMEOUT} s: let it \
finish (watch it with: ps -fp PID) and run the set-up again, or raise APT_LOCK_TIMEOUT"
    fi
    sleep "$APT_LOCK_POLL"
    waited=$((waited + APT_LOCK_POLL))
    holders="$(apt_lock_holders)"
  done
  say "apt: the lock is free after ${waited} s"
}

# no prompts: this runs over SSH without a terminal (papermill, Fabric);
# sudo drops the environment, so the settings go on the command line. apt itself also waits
# for the dpkg lock (DPkg::Lock::Timeout, apt >= 1.9.11) should another apt start in between.
QUIET_APT=(env DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=a)
apt_get() { "${SUDO[@]}" "${QUIET_APT[@]}" apt-get -o "DPkg::Lock::Timeout=$APT_LOCK_TIMEOUT" "$@"; }

# Packages an earlier run left unpacked or half-configured (apt or Docker's script cut off mid-way):
# dpkg --audit lists them (it only reads), and every later apt-get refuses to run until
# dpkg --configure -a has finished them.
repair_dpkg() {
  local audit
  audit="$("${SUDO[@]}" dpkg --audit 2>&1 || true)"
  if [ -z "$audit" ]; then
    return
  fi
  say "apt: an earlier install was cut short (dpkg --audit: ${audit%%$'\n'*}); finishing it"
  wait_for_apt
  "${SUDO[@]}" "${QUIET_APT[@]}" dpkg --configure -a
  apt_get install -f -y -q  # dependencies the cut-off install left missing
}

# Temporary files of this run, removed however it ends (an error, Ctrl-C).
TEMP_FILES=()
remove_temp_files() { if [ "${#TEMP_FILES[@]}" -gt 0 ]; then rm -f "${TEMP_FILES[@]}"; fi; }
trap remove_temp_files EXIT
temp_file() {  # temp_file VAR: a new temporary file's path in VAR
  local path
  path="$(mktemp)"
  TEMP_FILES+=("$path")
  printf -v "$1" '%s' "$path"
}

apt_update_once() {
  if [ "$APT_UPDATED" -eq 0 ]; then
    apt_get update -q
    APT_UPDATED=1
  fi
}

api_number() {  # "1.47" -> 1047
  echo $((10#${1%%.*} * 1000 + 10#${1#*.}))
}

check_docker_engine() {  # a Docker already on the node (an image may ship one): can it serve the CLI?
  local out version min_api
  if ! out="$("${SUDO[@]}" docker version --format '{{.Server.Version}} {{.Server.MinAPIVersion}}' 2>&1)"; then
    say "docker: present; its engine did not answer (${out%%$'\n'*}), so its version is not checked"
    return
  fi
  read -r version min_api <<<"$out"
  if ! [[ "${min_api:-}" =~ ^[0-9]+\.[0-9]+$ ]]; then
    say "docker: present, engine ${version:-unknown}; its lowest API version is unknown ('$out'), not checked"
    return
  fi
  if [ "$(api_number "$min_api")" -gt "$(api_number "$DOCKER_CLI_API")" ]; then
    fail 6 "docker: the engine on this node ($version) accepts API $min_api and newer only, but the lab's \
Jupyter image drives it with docker CLI $DOCKER_VERSION (API $DOCKER_CLI_API): uninstall that engine \
(https://docs.docker.com/engine/install/ubuntu/#uninstall-docker-engine) and run the set-up again, which then \
installs Docker Engine $DOCKER_VERSION"
  fi
  say "docker: present, engine $version (serves API $min_api and newer; the Jupyter image's CLI uses \
$DOCKER_CLI_API): OK"
}

# A repository's signing key, downloaded from KEY_URL, kept in KEYRING only when its fingerprint is
# FINGERPRINT (gpg --show-keys reads it without importing it anywhere).
trusted_key() {  # trusted_key KEY_URL FINGERPRINT KEYRING
  local download shown
  if [ -s "$3" ]; then return; fi
  temp_file download
  curl -fsSL "$1" -o "$download"
  shown="$(gpg --batch --show-keys --with-colons "$download" | awk -F: '$1 == "fpr" { print $10; exit }')"
  if [ "$shown" != "$2" ]; then
    fail 7 "apt: the key at $1 has fingerprint ${shown:-none}, not the pinned $2: nothing from that repository \
is installed (a key the vendor rotated: check its install page, then change the fingerprint in node_setup.sh)"
  fi
  "${SUDO[@]}" mkdir -p "$(dirname "$3")"
  "${SUDO[@]}" gpg --batch --yes --dearmor -o "$3" <"$download"
  say "apt: $1 has the pinned fingerprint $2"
}

# The version string apt has for PACKAGE at UPSTREAM (e.g. 5:27.5.1-1~ubuntu.24.04~noble); fails with exit
# 8 when the repository has none.
pinned_version() {  # pinned_version PACKAGE UPSTREAM
  local found
  found="$(apt-cache madison "$1" | awk -v want="$2" '{ v = $3; sub(/^[0-9]+:/, "", v) }
    index(v, want "-") == 1 { print $3; exit }')"
  [ -n "$found" ] || fail 8 "apt: no $1 $2 in the configured repositories (apt-cache madison $1 lists what there is)"
  printf '%s' "$found"
}

install_docker() {
  if command -v docker >/dev/null 2>&1 && command -v dockerd >/dev/null 2>&1; then
    check_docker_engine
    return
  fi
  if command -v docker >/dev/null 2>&1; then  # the CLI came, the engine did not: an install cut short
    say "docker: the docker CLI is here but no engine (dockerd): an earlier install was cut short"
  fi
  say "docker: installing Docker Engine $DOCKER_VERSION from Docker's apt repository"
  trusted_key "$DOCKER_REPO/gpg" "$DOCKER_KEY_FINGERPRINT" "$DOCKER_KEYRING"
  if [ ! -s "$DOCKER_LIST" ]; then
    local codename
    codename="$(sed -n 's/^VERSION_CODENAME=//p' "$OS_RELEASE" | tr -d '"')"
    "${SUDO[@]}" mkdir -p "$(dirname "$DOCKER_LIST")"
    printf 'deb [arch=%s signed-by=/etc/apt/keyrings/docker.gpg] %s %s stable\n' \
      "$(dpkg --print-architecture)" "$DOCKER_REPO" "$codename" | "${SUDO[@]}" tee "$DOCKER_LIST" >/dev/null
  fi
  APT_UPDATED=0  # the new source needs a fresh package list
  wait_for_apt
  apt_update_once
  local version
  version="$(pinned_version docker-ce "$DOCKER_VERSION")"
  apt_get install -y -q "docker-ce=$version" "docker-ce-cli=$version" containerd.io docker-buildx-plugin \
    docker-compose-plugin
  "${SUDO[@]}" apt-mark hold docker-ce docker-ce-cli >/dev/null
  DOCKER_CHANGED=1
}

check_docker_compose() {
  local version
  if ! version="$(docker compose version 2>&1)"; then
    fail 4 "docker compose does not work (${version%%$'\n'*}): the lab's stacks need Docker's compose plugin; \
install it (sudo apt-get install docker-compose-plugin from Docker's repository, or docker-compose-v2 from \
Ubuntu's) and run the set-up again"
  fi
  say "docker compose: ${version%%$'\n'*}"
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

ctk_version() {  # the installed toolkit's version (nvidia-ctk --version: "... version 1.17.8"), "" when unknown
  nvidia-ctk --version 2>/dev/null | sed -n 's/.*version \([0-9][0-9.]*\).*/\1/p' | head -n 1
}

version_below() {  # version_below A B: true when version A is older than B (sort -V)
  [ "$1" != "$2" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$1" ]
}

install_container_toolkit() {
  local have
  if command -v nvidia-ctk >/dev/null 2>&1; then
    have="$(ctk_version)"
    if [ -n "$have" ] && ! version_below "$have" "$NVIDIA_CTK_VERSION"; then
      say "nvidia-container-toolkit: present, $have (>= $NVIDIA_CTK_VERSION, without the known escapes)"
      return
    fi
    say "nvidia-container-toolkit: ${have:-a version it does not tell} is older than $NVIDIA_CTK_VERSION, which \
fixes container escapes (CVE-2025-23266): upgrading"
  else
    say "nvidia-container-toolkit: installing $NVIDIA_CTK_VERSION"
  fi
  trusted_key "$NVIDIA_REPO/gpgkey" "$NVIDIA_KEY_FINGERPRINT" "$NVIDIA_KEYRING"
  if [ ! -s "$NVIDIA_LIST" ]; then
    "${SUDO[@]}" mkdir -p "$(dirname "$NVIDIA_LIST")"
    curl -fsSL "$NVIDIA_REPO/stable/deb/nvidia-container-toolkit.list" \
      | sed 's#deb https://#deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] https://#g' \
      | "${SUDO[@]}" tee "$NVIDIA_LIST" >/dev/null
  fi
  APT_UPDATED=0  # the new source needs a fresh package list
  wait_for_apt
  apt_update_once
  local version package packages=()
  version="$(pinned_version nvidia-container-toolkit "$NVIDIA_CTK_VERSION")"
  for package in nvidia-container-toolkit nvidia-container-toolkit-base libnvidia-container-tools \
      libnvidia-container1; do
    packages+=("$package=$version")
  done
  apt_get install -y -q --allow-downgrades "${packages[@]}"
  DOCKER_CHANGED=1
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

json_equals() {  # json_equals FILE KEY VALUE: the top-level KEY holds the string VALUE
  [ -s "$1" ] || return 1
  python3 - "$@" <<'PY'
import json, sys
path, key, value = sys.argv[1:]
sys.exit(0 if json.load(open(path)).get(key) == value else 1)
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
  temp_file updated
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
  DOCKER_CHANGED=1
}

# Docker's default address for published ports (daemon.json "ip"): loopback, whatever was there before.
configure_default_bind() {
  local updated
  if json_equals "$DAEMON_JSON" ip "$DEFAULT_BIND_IP"; then
    say "docker default bind address: $DEFAULT_BIND_IP already"
    return
  fi
  say "docker default bind address: $DEFAULT_BIND_IP (a port published without an address stays off the public one)"
  temp_file updated
  python3 - "$DAEMON_JSON" "$updated" "$DEFAULT_BIND_IP" <<'PY'
import json, os, sys
src, dst, ip = sys.argv[1:]
config = json.load(open(src)) if os.path.exists(src) and os.path.getsize(src) else {}
config["ip"] = ip
with open(dst, "w") as out:
    json.dump(config, out, indent=4)
    out.write("\n")
PY
  "${SUDO[@]}" mkdir -p "$(dirname "$DAEMON_JSON")"
  "${SUDO[@]}" cp "$updated" "$DAEMON_JSON"
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

# Chameleon's bare-metal images run firewalld (only KVM@TACC uses security groups instead), and
# its default zone lets in SSH only: the student's browser needs Jupyter (host network, port 8888)
# and the lab's pages. Each port is added to the runtime and the permanent configuration, without
# a reload (a reload would drop the rules Docker added).
open_lab_ports() {
  if ! command -v firewall-cmd >/dev/null 2>&1 || ! "${SUDO[@]}" firewall-cmd --state >/dev/null 2>&1; then
    say "firewall: firewalld is not running, no port to open"
    return
  fi
  local port opened=()
  for port in $LAB_PORTS; do
    if ! "${SUDO[@]}" firewall-cmd --query-port="$port" >/dev/null 2>&1; then
      "${SUDO[@]}" firewall-cmd --add-port="$port" >/dev/null
      opened+=("$port")
    fi
    if ! "${SUDO[@]}" firewall-cmd --permanent --query-port="$port" >/dev/null 2>&1; then
      "${SUDO[@]}" firewall-cmd --permanent --add-port="$port" >/dev/null
    fi
  done
  if [ "${#opened[@]}" -eq 0 ]; then
    say "firewall: $LAB_PORTS open already"
  else
    say "firewall: opened ${opened[*]} in firewalld's default zone"
  fi
}

install_nvtop() {
  if command -v nvtop >/dev/null 2>&1; then
    say "nvtop: present"
    return
  fi
  say "nvtop: installing"
  wait_for_apt
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
  say "code: unpacking $CODE_TARBALL into $CODE_DIR (a file newer there, such as a notebook saved on the node, is kept)"
  mkdir -p "$CODE_DIR"
  # the upload is packed reproducibly (the digest above matches a second upload of the same files);
  # every file keeps its time, so the student's work on the node is never replaced by an older copy
  tar --keep-newer-files --warning=no-ignore-newer -xzf "$CODE_TARBALL" -C "$CODE_DIR"
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
    fail 2 "code: no REPO_URL and no CODE_TARBALL given; set one of them"
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
  check_gpu  # first: a wrong node or image is found before anything is installed
  repair_dpkg  # then what an interrupted run left half-done
  install_docker
  check_docker_compose
  add_user_to_docker_group
  install_container_toolkit
  configure_nvidia_runtime
  configure_cgroup_driver
  configure_default_bind
  restart_docker_if_changed
  install_nvtop
  open_lab_ports
  place_code
  say "done"
}

main "$@"
