#!/usr/bin/env bash
# The docker target's host side, for a host with Docker and the NVIDIA container
# toolkit (the Chameleon node, or any such host). The host needs docker and
# nothing else: the lab itself runs in the student's Jupyter container.
#   ./lab jupyter                  prepare the checkout, build the model artefacts when
#                                  missing, start the Jupyter server; the last line of
#                                  stdout is "jupyter: http://localhost:8888/lab?token=..."
#   ./lab run --target docker ...  the same, then the whole lab headless inside that
#                                  container (python -m servelab.lab run --target docker ...)
# Every container that writes into the checkout runs as the checkout owner's
# uid:gid, and models/ and results/ are made by that user first, so nothing in the
# checkout becomes root-owned, whoever runs this (the login user, or root via sudo).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SOCKET="${DOCKER_SOCKET:-/var/run/docker.sock}"
TOKEN_FILE="$ROOT/.jupyter-token"
JUPYTER=(docker compose -p servelab-jupyter -f docker/docker-compose-jupyter.yaml)
TRITON=(docker compose -p servelab-triton -f docker/docker-compose-triton.yaml)
UP_TIMEOUT_S="${SERVELAB_UP_TIMEOUT:-900}"

say() { printf '[docker] %s\n' "$*" >&2; }  # progress on stderr: stdout ends with the URL
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

check_docker() {
  command -v docker >/dev/null 2>&1 \
    || die "docker is not installed on this host: on the Chameleon node run provisioning (notebook 02) first"
  [ -S "$SOCKET" ] || die "no Docker socket at $SOCKET: is the Docker engine running? (sudo systemctl start docker)"
  local info
  if ! info="$(timeout 30 docker info --format '{{.ServerVersion}}' 2>&1)"; then
    case "$info" in
      *"permission denied"*)
        die "$(id -un) may not use Docker yet: log in again (new docker group membership), or run: sg docker -c './lab $(printf '%q ' "$@")'" ;;
      *) die "docker info failed within 30 s: $info" ;;
    esac
  fi
  docker compose version >/dev/null 2>&1 \
    || die "the docker compose plugin is missing: install docker-compose-plugin"
}

# the checkout owner's ids, passed to every container that writes into the checkout
export_ids() {
  HOST_UID="$(stat -c %u "$ROOT")"
  HOST_GID="$(stat -c %g "$ROOT")"
  DOCKER_GID="$(stat -c %g "$SOCKET")"
  SERVELAB_CHECKOUT="$ROOT"
  SERVELAB_USER="$(stat -c %U "$ROOT")"  # USER inside the container (its uid has no passwd entry there)
  DOCKER_SOCKET="$SOCKET"
  export HOST_UID HOST_GID DOCKER_GID SERVELAB_CHECKOUT SERVELAB_USER DOCKER_SOCKET
}

# models/ (the live Triton repository) and results/ exist, owned by the checkout owner
prepare_checkout() {
  local dir
  for dir in models results; do
    if [ ! -d "$dir" ]; then
      install -d -o "$HOST_UID" -g "$HOST_GID" "$dir" 2>/dev/null || mkdir -p "$dir"
    fi
  done
}

jupyter_token() {
  if [ ! -s "$TOKEN_FILE" ]; then
    (umask 077 && od -An -N24 -tx1 /dev/urandom | tr -d ' \n' >"$TOKEN_FILE")
    chown "$HOST_UID:$HOST_GID" "$TOKEN_FILE" 2>/dev/null || true
  fi
  JUPYTER_TOKEN="$(cat "$TOKEN_FILE")"
  export JUPYTER_TOKEN
}

ARTIFACTS=(artifacts/food11.json fastapi_pt/food11.pth fastapi_onnx/food11.onnx
           models_staging/food_classifier/1/food11.pth models_staging/food_classifier_onnx/1/model.onnx)

# the Triton image has torch and onnx: it builds the artefacts when they are missing (a git clone)
# or when trained weights are asked for (SERVELAB_WEIGHTS); an upload carries them already
build_model() {
  local missing=0 file
  for file in "${ARTIFACTS[@]}"; do [ -s "$file" ] || missing=1; done
  if [ "$missing" -eq 0 ] && [ -z "${SERVELAB_WEIGHTS:-}" ]; then
    say "model artefacts: present"
    return
  fi
  local weights=()
  [ -n "${SERVELAB_WEIGHTS:-}" ] && weights=(--weights "$SERVELAB_WEIGHTS")
  say "model artefacts: building them in the Triton image (first time: the image builds, minutes)"
  "${TRITON[@]}" run --rm --no-deps --build --user "$HOST_UID:$HOST_GID" \
    -v "$ROOT:$ROOT" -w "$ROOT" -e SERVELAB_ROOT="$ROOT" -e HOME=/tmp \
    --entrypoint python3 triton_server -m servelab.core.model build "${weights[@]}" >&2
}

jupyter_up() {
  say "Jupyter: building and starting servelab-jupyter (first time: image builds, minutes)"
  "${JUPYTER[@]}" up --build -d --wait --wait-timeout "$UP_TIMEOUT_S" >&2
}

main() {
  local command="${1:-}"
  [ $# -gt 0 ] && shift
  case "$command" in
    jupyter|run) ;;
    *) die "usage: scripts/docker_host.sh jupyter | run [python -m servelab.lab run arguments]" ;;
  esac
  check_docker "$command" "$@"
  export_ids
  prepare_checkout
  jupyter_token
  build_model
  jupyter_up
  if [ "$command" = "jupyter" ]; then
    echo "jupyter: http://localhost:8888/lab?token=$JUPYTER_TOKEN"
    return
  fi
  local pass=()
  if [ -n "${SERVELAB_RESULTS:-}" ]; then  # where runs go: it must be inside the mounted checkout
    case "$(realpath -m "$SERVELAB_RESULTS")/" in
      "$ROOT"/*) pass=(-e "SERVELAB_RESULTS=$(realpath -m "$SERVELAB_RESULTS")") ;;
      *) die "SERVELAB_RESULTS=$SERVELAB_RESULTS is outside the checkout ($ROOT), which is all the container sees" ;;
    esac
  fi
  say "running the lab inside servelab-jupyter: python -m servelab.lab run $*"
  exec "${JUPYTER[@]}" exec -T "${pass[@]}" jupyter python -m servelab.lab run "$@"
}

main "$@"
