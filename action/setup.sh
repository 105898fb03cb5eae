#!/usr/bin/env bash
# Decide what this run does and where its state lives; writes step outputs to $GITHUB_OUTPUT:
#   apply=true|false   run `apply` (command apply, or command auto on a push to the default branch)
#   plan=true|false    run `plan` + `check` (every command but validate)
#   cache=true|false   keep a DuckDB state with actions/cache (false: a PostgreSQL URL)
#   cache-path=PATH    the folder or file to cache
#   pr=N fork=true|false  the pull request, and whether it comes from a fork (read-only token)
set -euo pipefail
command="${BATCHOR_COMMAND:-auto}"
event="${GITHUB_EVENT_NAME:-}"
default_ref="refs/heads/${BATCHOR_DEFAULT_BRANCH:-main}"
case "$command" in
  auto) plan=true; apply=false
        if [ "$event" != pull_request ] && [ "$event" != pull_request_target ] && [ "${GITHUB_REF:-}" = "$default_ref" ]; then
          apply=true
        fi ;;
  validate) plan=false; apply=false ;;
  plan) plan=true; apply=false ;;
  apply) plan=true; apply=true ;;
  *) echo "::error::input command must be auto, validate, plan or apply (got '$command')" >&2; exit 64 ;;
esac
state="${BATCHOR_STATE_INPUT:-}"
case "$state" in
  postgres://*|postgresql://*|postgresql+*://*)
    cache=false; cache_path=""
    echo "::add-mask::$state"
    echo "BATCHOR_STATE=$state" >>"${GITHUB_ENV:-/dev/null}" ;;
  "") cache=true; cache_path=".batchor" ;;  # the project's state folder (state/location.py)
  *) cache=true; cache_path="$state"
     echo "BATCHOR_STATE=$state" >>"${GITHUB_ENV:-/dev/null}" ;;
esac
fork=false
if [ -n "${BATCHOR_PR_REPO:-}" ] && [ "${BATCHOR_PR_REPO}" != "${GITHUB_REPOSITORY:-}" ]; then
  fork=true
fi
{
  echo "apply=$apply"
  echo "plan=$plan"
  echo "cache=$cache"
  echo "cache-path=$cache_path"
  echo "pr=${BATCHOR_PR_NUMBER:-}"
  echo "fork=$fork"
} >>"${GITHUB_OUTPUT:-/dev/stdout}"
