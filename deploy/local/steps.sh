# Step reporting shared by the project's setup scripts (infra.sh, docker.sh,
# deploy/docker/local/build.sh); sourced, not run. Each step prints what it
# does; a failure names the script, the step and the command, and a logged
# command shows its log's tail. Needs LOG_DIR for run_logged.

STEPS_SCRIPT=$(basename "$0")
CURRENT_STEP="startup"
step() { CURRENT_STEP="$*"; echo "==> $*"; }
info() { echo "    $*"; }
die()  { echo "!!! $STEPS_SCRIPT: step '$CURRENT_STEP' failed: $*" >&2; exit 1; }
on_err() {
  echo "!!! $STEPS_SCRIPT: step '$CURRENT_STEP' failed (exit $1 at ${BASH_SOURCE[1]:-$0}:$2: $BASH_COMMAND)" >&2
  exit "$1"
}
trap 'on_err $? $LINENO' ERR

# run_logged LOGNAME CMD...: run quietly into $LOG_DIR/LOGNAME.log; show its tail on failure
run_logged() {
  local log="$LOG_DIR/$1.log" start; shift
  mkdir -p "$LOG_DIR"
  touch "$log"
  start=$(($(wc -l <"$log") + 1))
  echo "---- $(date -Is) $*" >>"$log"
  if ! "$@" >>"$log" 2>&1; then
    echo "!!! command failed: $*  (its last lines follow; full log $log)" >&2
    tail -n "+$start" "$log" | tail -n 40 >&2
    return 1
  fi
}
