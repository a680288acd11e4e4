#!/usr/bin/env bash
# The docker target's host side, for a host with Docker and the NVIDIA container
# toolkit (the Chameleon node, or any such host). The host needs docker and
# nothing else: the lab itself runs in the student's Jupyter container.
#   ./lab images                   build every stack's images, with progress (the notebooks
#                                  never build: a cell would wait minutes)
#   ./lab images --status          what each image's build is doing (ready, building, waiting, failed)
#   ./lab images --push REGISTRY   build every image, then push each as REGISTRY/<name> (an instructor,
#                                  ahead of class); a host with SERVELAB_IMAGE_REGISTRY=REGISTRY (the
#                                  environment or docker/.env) pulls them instead of building
#   ./lab jupyter                  the images notebook 03 needs (Jupyter, FastAPI, GourmetGram), then
#                                  prepare the checkout, build the model artefacts when missing, start
#                                  the Jupyter server; the last line of stdout is
#                                  "jupyter: http://localhost:8888/lab?token=..."; the other images
#                                  (Triton, the LLM engines) build in the background meanwhile, and a
#                                  notebook that needs one waits for it (servelab.core.image_builds)
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
# Each image build's log and state (KEY.log, KEY.status: servelab.core.image_builds reads them).
BUILD_DIR="$ROOT/.servelab-build"
BUILD_BEAT_S="${SERVELAB_BUILD_BEAT_S:-60}"  # a progress line this often while an image builds
FIRST_DONE="$BUILD_DIR/first.done"           # the foreground's builds are over: the background's may start
FIRST_WAIT_S="${SERVELAB_FIRST_WAIT_S:-7200}"
PULL_PREBUILT=1  # 0: build every image here, whatever registry is set (./lab images --push)

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

# One image build per KEY (the keys servelab.core.image_builds.STEPS knows): its label, the image it
# makes, and its compose build. The output goes to $BUILD_DIR/KEY.log, not to the terminal (tens of
# thousands of lines; notebook 02 streams this script's output): one line when it starts, one every
# $BUILD_BEAT_S s with the build's current step, one when it ends; a failure shows the log's tail.
# IMAGES: every image the build makes (the FastAPI stack's build also makes GourmetGram's): what a
# push sends and a pull must find; IMAGE is the first, the one a status line names. DOING: what the
# step does: Model Analyzer's is NVIDIA's image, pulled from NGC as it is (no STEP_ARGS), never
# pushed to a class registry, and only notebook 11 needs it: its failure stops nothing else.
step_of() {  # step_of KEY: sets LABEL, IMAGE, IMAGES, DOING, STEP_ENV (VAR=VALUE...), STEP_ARGS
  STEP_ENV=()
  IMAGES=()
  DOING=building
  case "$1" in
    jupyter) LABEL="the Jupyter server"; IMAGE="servelab/jupyter:latest"; STEP_ARGS=(jupyter build) ;;
    fastapi_pt) LABEL="FastAPI + PyTorch and GourmetGram"; IMAGE="servelab/fastapi_pt:latest"
      IMAGES=("$IMAGE" servelab/gourmetgram:latest)
      STEP_ENV=(FASTAPI_APP=fastapi_pt); STEP_ARGS=(fastapi build) ;;
    fastapi_onnx) LABEL="FastAPI + ONNX Runtime"; IMAGE="servelab/fastapi_onnx:latest"
      STEP_ENV=(FASTAPI_APP=fastapi_onnx); STEP_ARGS=(fastapi build fastapi_server) ;;
    triton) LABEL="Triton"; IMAGE="servelab/triton:24.10"; STEP_ARGS=(triton build triton_server) ;;
    llm) LABEL="the LLM engine"; IMAGE="servelab/llm:latest"; STEP_ARGS=(llm build llm_server) ;;
    vllm) LABEL="vLLM"; IMAGE="servelab/vllm:latest"; STEP_ARGS=(llm --profile vllm build vllm_server) ;;
    # notebook 11 on a GPU host: Model Analyzer with NVIDIA's DCGM (servelab.triton.model_analyzer_docker)
    model_analyzer) LABEL="Model Analyzer"; IMAGE="nvcr.io/nvidia/tritonserver:24.10-py3-sdk"; DOING=pulling
      STEP_ARGS=() ;;
    *) die "no image build called $1" ;;
  esac
  [ "${#IMAGES[@]}" -gt 0 ] || IMAGES=("$IMAGE")
}

mark() {  # mark KEY STATE: KEY.status (replaced whole, so a reader never sees half of it)
  step_of "$1"
  local file="$BUILD_DIR/$1.status"
  printf 'state=%s\nlabel=%s\nimage=%s\nsince=%s\nlog=.servelab-build/%s.log\n' \
    "$2" "$LABEL" "$IMAGE" "$(date +%s)" "$1" >"$file.tmp"
  mv -f "$file.tmp" "$file"
}

state_of() {  # state_of KEY: the state KEY.status holds ("" when none)
  sed -n 's/^state=//p' "$BUILD_DIR/$1.status" 2>/dev/null || true
}

last_step() {  # the build's latest step line in LOG ("#12 [3/8] RUN pip install ...")
  grep -E '^#[0-9]+ \[' "$1" 2>/dev/null | tail -n 1 | cut -c1-120 || true
}

# The registry an instructor pushed the class's images to (./lab images --push): the environment's
# SERVELAB_IMAGE_REGISTRY, else that line of docker/.env (uploaded with the checkout); "" when none.
image_registry() {
  if [ -n "${SERVELAB_IMAGE_REGISTRY:-}" ]; then
    printf '%s' "${SERVELAB_IMAGE_REGISTRY%/}"
    return
  fi
  { sed -n 's/^SERVELAB_IMAGE_REGISTRY=//p' docker/.env 2>/dev/null || true; } | tail -n 1 | sed 's#/*$##'
}

pull_prebuilt() {  # pull_prebuilt KEY: true when the registry had all its images (then tagged with their names)
  local key="$1" registry log="$BUILD_DIR/$1.log" started=$SECONDS image
  [ "$PULL_PREBUILT" = 1 ] || return 1
  step_of "$key"
  [ "$DOING" = building ] || return 1  # NVIDIA's own image comes from NGC
  registry="$(image_registry)"
  [ -n "$registry" ] || return 1
  say "images: pulling $LABEL from $registry (${IMAGES[*]}; log: $log)"
  : >"$log"
  for image in "${IMAGES[@]}"; do
    if ! { docker pull "$registry/$image" && docker tag "$registry/$image" "$image"; } >>"$log" 2>&1 </dev/null; then
      say "images: $registry/$image could not be pulled (see $log): building $LABEL here instead"
      return 1
    fi
  done
  mark "$key" ready
  say "images: $LABEL ready in $((SECONDS - started)) s (pulled)"
}

push_images() {  # push_images REGISTRY KEY...: each of their images as REGISTRY/<name>
  local registry="${1%/}" key image
  shift
  for key in "$@"; do
    step_of "$key"
    [ "$DOING" = building ] || continue  # NVIDIA's own image: every node pulls it from NGC
    : >"$BUILD_DIR/$key.push.log"
    for image in "${IMAGES[@]}"; do
      say "images: pushing $image as $registry/$image (log: $BUILD_DIR/$key.push.log)"
      { docker tag "$image" "$registry/$image" && docker push "$registry/$image"; } \
        >>"$BUILD_DIR/$key.push.log" 2>&1 </dev/null \
        || die "pushing $registry/$image failed: its log is $BUILD_DIR/$key.push.log (docker login $registry first?)"
    done
  done
  say "images: pushed; on the class's nodes set SERVELAB_IMAGE_REGISTRY=$registry (docker/.env) to pull them"
}

build_step() {  # build_step KEY: build it (or pull it prebuilt), its output in its log, progress on stderr
  local key="$1" log="$BUILD_DIR/$1.log" started=$SECONDS pid code=0 beat
  step_of "$key"
  mark "$key" building
  if pull_prebuilt "$key"; then return 0; fi
  if [ "$DOING" = pulling ] && docker image inspect "$IMAGE" >/dev/null 2>&1 </dev/null; then
    mark "$key" ready
    say "images: $LABEL ready ($IMAGE is here already)"
    return 0
  fi
  say "images: $DOING $LABEL ($IMAGE; log: $log)"
  if [ "$DOING" = pulling ]; then
    docker pull "$IMAGE" >"$log" 2>&1 </dev/null &
  else
    compose_of "${STEP_ARGS[0]}"
    env "${STEP_ENV[@]}" "${COMPOSE[@]}" "${STEP_ARGS[@]:1}" >"$log" 2>&1 </dev/null &
  fi
  pid=$!
  beat=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    sleep "${SERVELAB_BUILD_POLL_S:-1}"
    if [ $((SECONDS - beat)) -ge "$BUILD_BEAT_S" ]; then
      beat=$SECONDS
      say "images: $LABEL still $DOING ($((SECONDS - started)) s; $(last_step "$log"))"
    fi
  done
  wait "$pid" || code=$?
  if [ "$code" -ne 0 ]; then
    mark "$key" failed
    tail -n 30 "$log" >&2 || true
    say "images: $DOING $LABEL failed (exit $code); its last 30 log lines are above, the whole log: $log"
    return 1
  fi
  mark "$key" ready
  say "images: $LABEL ready in $((SECONDS - started)) s"
}

# The images in the order the notebooks need them: 03's first (Jupyter, FastAPI, GourmetGram), then
# Triton (04 on), then the LLM engines (09); vLLM's only where a GPU can run it; last, 11's Model
# Analyzer image where the stacks get the GPUs (on a CPU host 11 runs it from the Jupyter image).
FIRST_KEYS=(jupyter fastapi_pt fastapi_onnx)
rest_keys() {
  REST_KEYS=(triton llm)
  if wants_vllm; then
    REST_KEYS+=(vllm)
  else
    say "images: vLLM skipped (it needs a GPU of compute capability 7.0 to 9.0; SERVELAB_BUILD_VLLM=1 builds it)"
  fi
  if [ "${SERVELAB_DOCKER_GPU:-0}" = 1 ]; then REST_KEYS+=(model_analyzer); fi
}

build_images() {  # build_images KEY...: each in turn, in the foreground
  local started=$SECONDS key
  mkdir -p "$BUILD_DIR"
  for key in "$@"; do
    build_step "$key" && continue
    [ "$DOING" = pulling ] || die "building $LABEL failed (see above)"
    say "images: going on without $IMAGE (only notebook 11 needs it; ./lab images tries again)"
  done
  say "images: $* built in $((SECONDS - started)) s"
}

# NGC's Triton base (about 15 GB on a GPU node) is the longest download: pulled at once, while the
# first images build; a base already on the engine (or one no registry has) is left as it is.
triton_base() {
  local version
  version="$(sed -n 's/^ARG TRITON_VERSION=//p' docker/Dockerfile.triton 2>/dev/null || true)"
  { sed -n 's/^FROM \(nvcr\.io[^ ]*\).*/\1/p' docker/Dockerfile.triton 2>/dev/null || true; } \
    | sed "s/\${TRITON_VERSION}/$version/"
}

pull_base() {
  local base
  base="$(triton_base)"
  if [ -z "$base" ]; then
    say "images: no Triton base named in docker/Dockerfile.triton; its build pulls what it needs"
    return
  fi
  if docker image inspect "$base" >/dev/null 2>&1; then
    say "images: Triton's base $base is here already"
    return
  fi
  say "images: pulling Triton's base $base (log: $BUILD_DIR/triton-base.log)"
  local started=$SECONDS
  if docker pull "$base" >"$BUILD_DIR/triton-base.log" 2>&1 </dev/null; then
    say "images: Triton's base pulled in $((SECONDS - started)) s"
  else
    say "images: pulling $base failed (its log: $BUILD_DIR/triton-base.log); Triton's build pulls it again"
  fi
}

# The background builder (`docker_host.sh background KEY...`, started by `jupyter`): pulls the Triton
# base at once, waits until the foreground's builds are over (first.done: the cores go to 03's images
# first), then builds KEY... in turn (BuildKit's cache makes an unchanged image a matter of seconds).
# One builder at a time: a second (02 run again) waits for the first to end, then builds its own list.
background() {
  exec 9>"$BUILD_DIR/background.lock"
  if ! flock -n 9; then
    say "images: another background build is running; waiting up to $FIRST_WAIT_S s for it to end"
    flock -w "$FIRST_WAIT_S" 9 || die "the other background build did not end within $FIRST_WAIT_S s"
  fi
  # a builder that stops early (an error, a signal) leaves no image waiting for ever: those it did
  # not build are marked failed, so a notebook waiting for one says so instead of timing out — unless
  # a newer builder was started meanwhile (02 run again): the keys marked waiting are then its own
  BACKGROUND_KEYS=("$@")
  trap 'if [ "$(cat "$BUILD_DIR/background.generation" 2>/dev/null)" = "${SERVELAB_BUILD_GENERATION:-}" ]; then
          for key in "${BACKGROUND_KEYS[@]}"; do
            case "$(state_of "$key")" in waiting|building) mark "$key" failed ;; esac
          done
        fi' EXIT
  pull_base
  local waited=0 key failed=0
  while [ ! -e "$FIRST_DONE" ]; do
    if [ "$waited" -ge "$FIRST_WAIT_S" ]; then
      say "images: the first images were not done after $FIRST_WAIT_S s; building the rest now"
      break
    fi
    sleep 2
    waited=$((waited + 2))
  done
  for key in "$@"; do build_step "$key" || failed=1; done
  say "images: background builds over ($([ "$failed" -eq 0 ] && echo "all ready" || echo "some failed: ./lab images --status"))"
}

start_background() {  # start_background KEY...: marked waiting, built by a detached builder
  local key labels=()
  for key in "$@"; do
    if [ "$(state_of "$key")" != building ]; then mark "$key" waiting; fi
    step_of "$key"
    labels+=("$LABEL")
  done
  rm -f "$FIRST_DONE"
  local generation
  generation="$(date +%s%N)-$$"  # the newest builder's: an older one's exit leaves its keys alone
  printf '%s\n' "$generation" >"$BUILD_DIR/background.generation"
  SERVELAB_BACKGROUND_BUILD=1 SERVELAB_BUILD_GENERATION="$generation" \
    setsid nohup bash "$ROOT/scripts/docker_host.sh" background "$@" \
    >>"$BUILD_DIR/background.log" 2>&1 </dev/null &
  local joined
  joined="$(printf '%s, ' "${labels[@]}")"
  say "images: ${joined%, } build in the background once 03's images are built (progress: ./lab images \
--status; log: $BUILD_DIR/background.log); a notebook that needs one of them waits for it"
}

show_status() {
  local file key state since label image
  [ -d "$BUILD_DIR" ] || { echo "no image build has run here yet (./lab images builds them)"; return; }
  for key in jupyter fastapi_pt fastapi_onnx triton llm vllm model_analyzer; do
    file="$BUILD_DIR/$key.status"
    [ -f "$file" ] || continue
    state="$(state_of "$key")"
    since="$(sed -n 's/^since=//p' "$file")"
    label="$(sed -n 's/^label=//p' "$file")"
    image="$(sed -n 's/^image=//p' "$file")"
    printf '%-13s %-9s %s (%s) for %s s' "$key" "$state" "$label" "$image" "$(($(date +%s) - since))"
    if [ "$state" = building ]; then printf '; %s' "$(last_step "$BUILD_DIR/$key.log")"; fi
    printf '\n'
  done
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
  for dir in models results .servelab-build; do
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

# the FastAPI + PyTorch image (one of 03's, built first) has torch, onnx and onnxruntime: it builds the
# artefacts when they are missing (a git clone, an upload from a Jupyter without torch) or when
# trained weights are asked for (SERVELAB_WEIGHTS); a checkout that has them uses them as they are
model_needs_build() {  # 0 (true) when the artefacts are missing or trained weights are asked for
  local file
  [ -n "${SERVELAB_WEIGHTS:-}" ] && return 0
  for file in "${ARTIFACTS[@]}"; do [ -s "$file" ] || return 0; done
  return 1
}

build_model() {
  local weights=()
  [ -n "${SERVELAB_WEIGHTS:-}" ] && weights=(--weights "$SERVELAB_WEIGHTS")
  say "model artefacts: building them in the FastAPI + PyTorch image"
  compose_of fastapi
  FASTAPI_APP=fastapi_pt "${COMPOSE[@]}" run --rm --no-deps --pull never --user "$HOST_UID:$HOST_GID" \
    -v "$ROOT:$ROOT" -w "$ROOT" -e SERVELAB_ROOT="$ROOT" -e HOME=/tmp \
    --entrypoint python fastapi_server -m servelab.core.model build "${weights[@]}" >&2
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
    jupyter|run|build|background) ;;
    *) die "usage: scripts/docker_host.sh build [--status] | jupyter | run [python -m servelab.lab run arguments]" ;;
  esac
  if [ "$command" = build ] && [ "${1:-}" = --status ]; then
    show_status
    return
  fi
  local push=""
  if [ "$command" = build ] && [ "${1:-}" = --push ]; then
    push="${2:-}"
    [ -n "$push" ] || die "usage: ./lab images --push REGISTRY (e.g. ghcr.io/<course>; docker login to it first)"
  fi
  if [ "$command" = background ]; then  # started by jupyter, which checked Docker and exported the ids
    export_ids
    background "$@"
    return
  fi
  check_docker "$command" "$@"
  export_ids
  prepare_checkout
  jupyter_token
  rest_keys
  mkdir -p "$BUILD_DIR"
  if [ "$command" = jupyter ]; then  # Triton's base pull starts now; its builds once 03's are done
    start_background "${REST_KEYS[@]}"
    trap 'touch "$FIRST_DONE"' EXIT  # however this ends, the background builder goes on
  fi
  # The FastAPI images carry the model files (their Dockerfiles COPY fastapi_pt/ and fastapi_onnx/):
  # missing artefacts are built first, in the PyTorch image, which the list below then builds again
  # with them (its install layers cached: seconds)
  if model_needs_build; then
    build_step fastapi_pt || die "building FastAPI + PyTorch failed (see above)"
    build_model
  else
    say "model artefacts: present"
  fi
  if [ "$command" = jupyter ]; then  # 03's images now, the rest in the background
    build_images "${FIRST_KEYS[@]}"
  else  # ./lab images and the headless run: every image, in the foreground
    if [ -n "$push" ]; then PULL_PREBUILT=0; fi  # what is pushed is built here
    build_images "${FIRST_KEYS[@]}" "${REST_KEYS[@]}"
    if [ -n "$push" ]; then push_images "$push" "${FIRST_KEYS[@]}" "${REST_KEYS[@]}"; fi
  fi
  [ "$command" = "build" ] && return
  if [ "$command" = jupyter ]; then touch "$FIRST_DONE"; fi  # the cores go to the background builds now
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
