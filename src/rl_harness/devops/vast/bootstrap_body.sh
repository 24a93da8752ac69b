# ---- rl-harness vast bootstrap body (static; the parameters are set above) ----
# Holds no secret: the box destroys itself with vast's per-instance CONTAINER_API_KEY,
# and forwarded credentials (if any) arrive as environment variables, never in this file.
set -uo pipefail
umask 077
W="${RLH_WORK:-/root/rlh}"
mkdir -p "$W"
if [ -z "${RLH_NO_CONTAINER_LOG:-}" ] && [ -w /proc/1/fd/1 ]; then
  # Mirror into the container log so `rl-harness vast logs` shows progress.
  exec > >(tee -a /proc/1/fd/1) 2>&1
fi
log() { printf '[rlh %s] %s\n' "$(date -u +%H:%M:%SZ)" "$*"; }
STATUS=failed
RC=1
PHASE=start
STARTED_AT=$(date -u +%FT%TZ)
SESSION=rlh
LIB="$W/$RLH_LIB_DIR"
if [ "$RLH_SAME_REPO" = 1 ]; then EXP="$LIB"; else EXP="$W/$RLH_EXP_DIR"; fi

load_instance_credential() {
  # vast sets CONTAINER_ID / CONTAINER_API_KEY in the container; PID 1 always has them.
  local name value
  for name in CONTAINER_ID CONTAINER_API_KEY; do
    if [ -z "${!name:-}" ] && [ -r /proc/1/environ ]; then
      value=$(tr '\0' '\n' </proc/1/environ | sed -n "s/^$name=//p" | head -n 1)
      if [ -n "$value" ]; then export "$name=$value"; fi
    fi
  done
}

self_destruct() {
  local why=$1 i
  if [ -e "$W/destroyed" ]; then return 0; fi
  if [ -z "${CONTAINER_ID:-}" ] || [ -z "${CONTAINER_API_KEY:-}" ]; then
    log "self-destruct ($why) impossible: no per-instance credential; destroy it by hand"
    return 1
  fi
  for i in 1 2 3 4 5 6; do
    # The header reaches curl through its stdin config, so the key never shows in `ps`.
    if printf 'header = "Authorization: Bearer %s"\n' "$CONTAINER_API_KEY" |
      curl -fsS -o /dev/null --max-time 30 -X DELETE -K - \
        "$RLH_VAST_URL/api/v0/instances/$CONTAINER_ID/"; then
      : >"$W/destroyed"
      log "self-destruct ($why): destroy accepted"
      return 0
    fi
    log "self-destruct attempt $i failed"
    sleep "$((RLH_RETRY_SLEEP_S * i))"
  done
  return 1
}

g() {
  # git with the forwarded token (if any) as a credential helper: never in a URL or argv.
  if [ -n "${RLH_GIT_TOKEN:-}" ]; then
    git -c credential.helper= \
      -c 'credential.helper=!f() { echo username=x-access-token; echo "password=$RLH_GIT_TOKEN"; }; f' "$@"
  else
    git "$@"
  fi
}
gc() { git -c user.name="rl-harness vast" -c user.email="rl-harness-vast@users.noreply" "$@"; }

clone_at() { # url commit dest
  if [ -d "$3/.git" ]; then return 0; fi
  g clone --quiet --no-checkout "$1" "$3" &&
    git -C "$3" checkout --quiet --detach "$2" &&
    [ "$(git -C "$3" rev-parse HEAD)" = "$2" ]
}

ensure_uv() {
  export PATH="$HOME/.local/bin:$PATH"
  if command -v uv >/dev/null 2>&1; then return 0; fi
  log "installing uv"
  python3 -m pip install --quiet --user uv >/dev/null 2>&1 ||
    curl -LsSf https://astral.sh/uv/install.sh | sh >/dev/null
  command -v uv >/dev/null 2>&1
}

stop_run() {
  tmux -L rlh kill-session -t "$SESSION" 2>/dev/null
  if [ -s "$W/run.pid" ]; then
    pkill -TERM -P "$(cat "$W/run.pid")" 2>/dev/null
    kill -TERM "$(cat "$W/run.pid")" 2>/dev/null
  fi
  return 0
}

redact_file() { # replace forwarded secret values in a file we are about to publish
  local name value text
  text=$(cat "$1")
  for name in $RLH_SECRET_NAMES CONTAINER_API_KEY; do
    value="${!name:-}"
    if [ "${#value}" -ge 6 ]; then text=${text//"$value"/***REDACTED***}; fi
  done
  printf '%s\n' "$text" >"$1"
}

new_run_dirs() { # run folders this box wrote (untracked run manifests)
  git -C "$EXP" ls-files --others --exclude-standard -- ':(glob)**/results/*/run_manifest.json' |
    sed 's#/run_manifest.json$##'
}

upload_artifacts() {
  local dir
  for dir in $(new_run_dirs); do
    log "uploading artifacts of $dir"
    (cd "$EXP" && uv run rl-harness upload "$dir") || log "upload of $dir failed"
  done
}

push_results() {
  local summary ours attempt
  cd "$EXP" || return 1
  mkdir -p vast-logs
  summary="vast-logs/$RLH_LABEL.txt"
  {
    echo "label: $RLH_LABEL"
    echo "status: $STATUS"
    echo "exit_code: $RC"
    echo "phase: $PHASE"
    echo "seed: $RLH_SEED"
    echo "experiment_commit: $RLH_EXP_COMMIT"
    echo "library_commit: $RLH_LIB_COMMIT"
    echo "started_at: $STARTED_AT"
    echo "ended_at: $(date -u +%FT%TZ)"
    echo "--- last 100 lines of the run log ---"
    tail -n 100 "$W/run.log" 2>/dev/null
  } >"$summary"
  redact_file "$summary"
  git add -- "$summary"
  git add --all -- ':(glob)**/results/**' ':(exclude).venv' 2>/dev/null
  if ! gc commit --quiet --no-verify -m "results: $RLH_LABEL ($STATUS, seed $RLH_SEED)"; then
    log "nothing to commit"
    return 0
  fi
  ours=$(git rev-parse HEAD)
  for attempt in $(seq 1 "$RLH_PUSH_ATTEMPTS"); do
    if g push --quiet origin "HEAD:refs/heads/$RLH_RESULTS_BRANCH"; then
      log "pushed results to $RLH_RESULTS_BRANCH"
      return 0
    fi
    # Another box pushed first: replay only our commit on top of theirs (theirs untouched).
    if g fetch --quiet origin "refs/heads/$RLH_RESULTS_BRANCH"; then
      git checkout --quiet --detach FETCH_HEAD &&
        gc cherry-pick "$ours" >/dev/null || {
        git cherry-pick --abort 2>/dev/null
        log "cannot replay results onto $RLH_RESULTS_BRANCH"
        return 1
      }
    fi
    sleep "$((RLH_RETRY_SLEEP_S * attempt + RANDOM % 3))"
  done
  log "giving up pushing results after $RLH_PUSH_ATTEMPTS attempts"
  return 1
}

finish() {
  trap - EXIT TERM INT HUP
  log "finishing: status=$STATUS phase=$PHASE exit_code=$RC"
  if [ -d "$EXP/.git" ]; then
    PHASE=push
    push_results || log "results were not pushed"
  fi
  self_destruct "$STATUS" || log "self-destruct failed; the deadline watchdog retries"
}

load_instance_credential
if [ -e "$W/started" ]; then
  # onstart runs again after a container restart: the run is lost; publish what exists.
  STATUS=restarted
  log "container restarted: not running again"
  trap finish EXIT
  exit 1
fi
: >"$W/started"
wait_until() { # epoch seconds; returns 1 early once the box is destroyed
  while [ "$(date +%s)" -lt "$1" ]; do
    if [ -e "$W/destroyed" ]; then return 1; fi
    sleep "$RLH_POLL_S"
  done
}
T0=$(date +%s)
(
  # Cost guard: stop the run at the deadline, destroy the box after a short grace
  # even if pushing results hangs. Exits by itself once the box is destroyed.
  wait_until "$((T0 + RLH_DEADLINE_S))" || exit 0
  log "deadline (--max-hours) reached: stopping the run"
  : >"$W/deadline"
  stop_run
  wait_until "$((T0 + RLH_DEADLINE_S + RLH_GRACE_S))" || exit 0
  self_destruct deadline
) &
trap finish EXIT
trap 'STATUS=killed; exit 143' TERM INT HUP

PHASE=clone
log "cloning library $RLH_LIB_COMMIT"
clone_at "$RLH_LIB_URL" "$RLH_LIB_COMMIT" "$LIB" || exit 1
if [ "$RLH_SAME_REPO" != 1 ]; then
  log "cloning experiments $RLH_EXP_COMMIT"
  clone_at "$RLH_EXP_URL" "$RLH_EXP_COMMIT" "$EXP" || exit 1
fi

PHASE=sync
ensure_uv || exit 1
if [ -f "$EXP/uv.lock" ]; then FROZEN=--frozen; else FROZEN=; fi
(cd "$EXP" && uv sync $FROZEN) || exit 1

PHASE=run
{
  printf 'cd %q || exit 1\n' "$EXP"
  printf 'echo $$ >%q\n' "$W/run.pid"
  echo 'unset CONTAINER_API_KEY'
  printf 'uv run'
  printf ' %q' "${RLH_ARGV[@]}"
  printf ' 2>&1 | tee -a %q\n' "$W/run.log"
  printf 'echo "${PIPESTATUS[0]}" >%q && mv %q %q\n' "$W/run.rc.tmp" "$W/run.rc.tmp" "$W/run.rc"
} >"$W/run.sh"
log "running: ${RLH_ARGV[*]}"
if command -v tmux >/dev/null 2>&1; then
  tmux -L rlh new-session -d -s "$SESSION" "bash $(printf %q "$W/run.sh")" || exit 1
  while [ ! -e "$W/run.rc" ] && tmux -L rlh has-session -t "$SESSION" 2>/dev/null; do
    sleep "$RLH_POLL_S"
  done
else
  log "tmux not found: running without it (follow with: tail -f $W/run.log)"
  bash "$W/run.sh" &
  wait $!
fi
RC=$(cat "$W/run.rc" 2>/dev/null || echo 137)
if [ -e "$W/deadline" ]; then
  STATUS=deadline
elif [ "$RC" = 0 ]; then
  STATUS=completed
fi
log "run ended: exit_code=$RC"

if [ "$RLH_UPLOAD_B2" = 1 ]; then
  PHASE=upload
  upload_artifacts
fi
PHASE=finished
if [ "$STATUS" = completed ]; then exit 0; else exit 1; fi
