#!/usr/bin/env bash
# The docker target's host side, for a host with Docker and the NVIDIA container
# toolkit (the Chameleon node, or any such host). The host needs docker and
# nothing else: the lab itself runs in the student's Jupyter container.
#   ./lab images                   build every stack's images, with progress (the notebooks
#                                  never build: a cell would wait minutes)
#   ./lab jupyter                  the images, then prepare the checkout, build the model
#                                  artefacts when missing, start the Jupyter server; the last
#                                  line of stdout is "jupyter: http://localhost:8888/lab?token=..."
#   ./lab run --target docker ...  the same, then the whole lab headless inside that
#                                  container (python -m servelab.lab run --target docker ...)
# GPUs are asked for (docker/docker-compose-*.gpu.yaml) only where the engine has the NVIDIA
# runtime: on a host without one the same stacks run on the CPU (SERVELAB_DOCKER_GPU=1|0 decides).
# Every container that writes into the checkout runs as the checkout owner's
# uid:gid, and models/ and results/ are made by that user first, so nothing in the
# checkout becomes root-owned, whoever runs this (the login user, or root via sudo).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# the engine's socket: DOCKER_SOCKET, else the unix socket DOCKER_HOST names, else Docker's default
case "${DOCKER_HOST:-}" in
  unix://*) SOCKET="${DOCKER_SOCKET:-${DOCKER_HOST#unix://}}" ;;
  *) SOCKET="${DOCKER_SOCKET:-/var/run/docker.sock}" ;;
esac
TOKEN_FILE="$ROOT/.jupyter-token"
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

# does the engine give containers GPUs? (servelab.core.compose.gpu_runtime asks the same)
gpu_runtime() {
  case "${SERVELAB_DOCKER_GPU:-auto}" in
    1) return 0 ;;
    0) return 1 ;;
  esac
  timeout 30 docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"nvidia"'
}

# COMPOSE=(docker compose for one stack): its project, its file and, with GPUs, its GPU override
compose_of() {  # compose_of jupyter|fastapi|triton|llm
  COMPOSE=(docker compose -p "servelab-$1" -f "docker/docker-compose-$1.yaml")
  if [ "$SERVELAB_DOCKER_GPU" = 1 ]; then COMPOSE+=(-f "docker/docker-compose-$1.gpu.yaml"); fi
}

# vLLM's image only where a GPU can run it (compute capability 7.0 to 9.0: servelab.llm.vllm);
# SERVELAB_BUILD_VLLM=1|0 decides instead
wants_vllm() {
  case "${SERVELAB_BUILD_VLLM:-auto}" in
    1) return 0 ;;
    0) return 1 ;;
  esac
  command -v nvidia-smi >/dev/null 2>&1 || return 1
  nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null \
    | awk -F. '{ c = $1 * 10 + $2; if (c >= 70 && c <= 90) found = 1 } END { exit !found }'
}

# every image the notebooks start, built now with progress; BuildKit's cache keeps a rebuild
# after a code change to seconds, and pip's wheels are downloaded once per machine
build_images() {
  local started step
  build_one() {  # build_one LABEL VAR=VALUE... -- COMPOSE ARGS...
    local label="$1"; shift
    local vars=()
    while [ "$1" != "--" ]; do vars+=("$1"); shift; done
    shift
    step=$SECONDS
    say "images: building $label ($*)"
    compose_of "$1"
    env "${vars[@]}" "${COMPOSE[@]}" "${@:2}" >&2 || die "building $label failed (the build's output is above)"
    say "images: $label ready in $((SECONDS - step)) s"
  }
  started=$SECONDS
  build_one "the Jupyter server" -- jupyter build
  build_one "FastAPI + PyTorch and GourmetGram" FASTAPI_APP=fastapi_pt -- fastapi build
  build_one "FastAPI + ONNX Runtime" FASTAPI_APP=fastapi_onnx -- fastapi build fastapi_server
  build_one "Triton" -- triton build triton_server
  build_one "the LLM engine" -- llm build llm_server
  if wants_vllm; then
    build_one "vLLM" -- llm --profile vllm build vllm_server
  else
    say "images: vLLM skipped (it needs a GPU of compute capability 7.0 to 9.0; SERVELAB_BUILD_VLLM=1 builds it)"
  fi
  say "images: all built in $((SECONDS - started)) s"
}

# the checkout owner's ids, passed to every container that writes into the checkout
export_ids() {
  HOST_UID="$(stat -c %u "$ROOT")"
  HOST_GID="$(stat -c %g "$ROOT")"
  DOCKER_GID="$(stat -c %g "$SOCKET")"
  SERVELAB_CHECKOUT="$ROOT"
  SERVELAB_USER="$(stat -c %U "$ROOT")"  # USER inside the container (its uid has no passwd entry there)
  DOCKER_SOCKET="$SOCKET"
  if gpu_runtime; then SERVELAB_DOCKER_GPU=1; else SERVELAB_DOCKER_GPU=0; fi
  export HOST_UID HOST_GID DOCKER_GID SERVELAB_CHECKOUT SERVELAB_USER DOCKER_SOCKET SERVELAB_DOCKER_GPU
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
  say "model artefacts: building them in the Triton image"
  compose_of triton
  "${COMPOSE[@]}" run --rm --no-deps --pull never --user "$HOST_UID:$HOST_GID" \
    -v "$ROOT:$ROOT" -w "$ROOT" -e SERVELAB_ROOT="$ROOT" -e HOME=/tmp \
    --entrypoint python3 triton_server -m servelab.core.model build "${weights[@]}" >&2
}

jupyter_up() {
  compose_of jupyter
  local compose=("${COMPOSE[@]}")
  say "Jupyter: starting servelab-jupyter ($([ "$SERVELAB_DOCKER_GPU" = 1 ] && echo "with the GPUs" || echo "CPU only: no NVIDIA runtime in this engine"))"
  if ! "${compose[@]}" up -d --no-build --pull never --wait --wait-timeout "$UP_TIMEOUT_S" >&2; then
    "${compose[@]}" ps -a >&2 || true
    say "the Jupyter container's last 40 log lines:"
    "${compose[@]}" logs --no-color --tail 40 jupyter >&2 || true
    die "servelab-jupyter did not come up healthy (its state and log lines are above)"
  fi
}

main() {
  local command="${1:-}"
  [ $# -gt 0 ] && shift
  case "$command" in
    jupyter|run|build) ;;
    *) die "usage: scripts/docker_host.sh build | jupyter | run [python -m servelab.lab run arguments]" ;;
  esac
  check_docker "$command" "$@"
  export_ids
  prepare_checkout
  jupyter_token
  build_images
  [ "$command" = "build" ] && return
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
  compose_of jupyter
  exec "${COMPOSE[@]}" exec -T "${pass[@]}" jupyter python -m servelab.lab run "$@"
}

main "$@"
