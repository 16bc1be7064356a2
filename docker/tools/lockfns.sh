# shellcheck shell=bash
# The steps the lock scripts share (requirements/lock.sh, docker/sim-runtime/lock.sh, docker/lock/lock.sh),
# sourced by them after they cd to the repository root: find-links flags, one hashed `uv pip compile` for CPython
# 3.11, the check that a rendered lock input matches the committed one, and the re-resolution of a committed lock
# with itself as preference. The caller's `set -euo pipefail` applies: call them as plain commands (not in `$(...)`,
# a pipeline or an `||` list), so that a failing uv or cp stops the script as it would inline (lock_compile, one
# command, may also be an `if` condition); lock_input_check exits the script, lock_relock records in lock_status.
#   lock_setup TARGET PLATFORM WORKDIR SCRATCH [DIFF_LINES]
#       TARGET     the make target that rewrites the locks (`make TARGET` heads them and the messages name it)
#       PLATFORM   uv's --python-platform; empty for none (a --universal lock)
#       WORKDIR    where uv runs: the locks name their inputs by paths relative to it
#       SCRATCH    the folder (relative to WORKDIR, or absolute) lock_relock re-resolves a lock into
#       DIFF_LINES how many lines of a relock's diff to show; empty for all of it
#   find_links_args "DIR DIR..."   the --find-links flags, one word a line, of the listed folders that exist
#   lock_compile INPUT OUTPUT [uv args...]   resolve INPUT into the hashed lock OUTPUT (relative to WORKDIR or absolute)
#   lock_input_check RENDERED COMMITTED [SOURCE]   exit 1 unless the freshly rendered input equals the committed one
#   lock_relock COMMITTED INPUT [uv args...]   re-resolve INPUT with the committed lock as preference into
#       SCRATCH/<its name>; where that changes it (`#` lines aside) show the diff and set lock_status=1

lock_setup() {
  lock_target="$1" lock_platform="$2" lock_workdir="$3" lock_scratch="$4" lock_diff_lines="${5:-}" lock_status=0
}

find_links_args() {
  local d
  # shellcheck disable=SC2086 # a space-separated list of folders, as DEV_FIND_LINKS and SIM_FIND_LINKS are given
  for d in $1; do
    if [ -d "$d" ]; then printf '%s\n' --find-links "$d"; fi
  done
}

lock_compile() {
  local input="$1" output="$2" platform_args=() new
  shift 2
  if [ -n "$lock_platform" ]; then platform_args=(--python-platform "$lock_platform"); fi
  # Into a copy (the committed lock as preference), replaced only when it changed: a relock that changes nothing
  # leaves the file's time alone, so make does not take the venv for stale and reinstall it.
  new="$output.new"
  (cd "$lock_workdir" && if [ -f "$output" ]; then cp "$output" "$new"; else rm -f "$new"; fi \
     && uv pip compile --quiet --generate-hashes --python-version 3.11 "${platform_args[@]}" \
       --custom-compile-command "make $lock_target" "$@" "$input" -o "$new" \
     && if cmp -s "$new" "$output"; then rm "$new"; else mv "$new" "$output"; fi)
}

lock_input_check() {
  cmp -s "$1" "$2" \
    || { echo "$2 does not match ${3:-the manifest}: run 'make $lock_target' and commit it" >&2; exit 1; }
}

# shellcheck disable=SC2034 # lock_status is for the caller to read
lock_relock() {
  local committed="$1" input="$2" output copy
  shift 2
  output="$lock_scratch/${committed##*/}"
  case "$output" in /*) copy="$output" ;; *) copy="$lock_workdir/$output" ;; esac
  cp "$committed" "$copy"
  lock_compile "$input" "$output" "$@"
  if ! diff -u <(grep -v '^#' "$committed") <(grep -v '^#' "$copy") >"$copy.diff"; then
    if [ -n "$lock_diff_lines" ]; then head -n "$lock_diff_lines" "$copy.diff" >&2; else cat "$copy.diff" >&2; fi
    echo "$committed no longer resolves to itself: run 'make $lock_target' and commit it" >&2
    lock_status=1
  fi
}
