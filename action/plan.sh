#!/usr/bin/env bash
# What a merge would run and cost, the quality checks on the answers already stored, and the API
# keys an apply would need, as one markdown file ($BATCHOR_COMMENT_FILE) for the PR comment.
# Pending work (exit 2) is what a PR is for, a plan over budget (4) and failed checks on stored
# answers (9) only warn; anything else fails the step, after the whole file is written.
# On a pull request ($BATCHOR_COMPARE_TO: the base revision) each plan also shows the FULL job's
# cost at the base and now, per step with its cause; $BATCHOR_FAIL_ON_INCREASE (a percentage)
# fails the step when a spec's full job costs more than that much above the base (exit 11).
set -uo pipefail +e  # every exit code is looked at: no -e, even when the caller set it
here="$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=action/lib.sh
. "$here/lib.sh"
out="${BATCHOR_COMMENT_FILE:?where to write the markdown}"
mapfile -t specs < <(spec_files)
status=0
compare=()
if [ -n "${BATCHOR_COMPARE_TO:-}" ]; then
  # a shallow checkout lacks the base commit: fetch just it
  if git cat-file -e "${BATCHOR_COMPARE_TO}^{commit}" 2>/dev/null \
    || git fetch --quiet --no-tags --depth=1 origin "$BATCHOR_COMPARE_TO" 2>/dev/null; then
    compare=(--compare-to "$BATCHOR_COMPARE_TO")
    if [ -n "${BATCHOR_FAIL_ON_INCREASE:-}" ]; then compare+=(--fail-on-increase "$BATCHOR_FAIL_ON_INCREASE"); fi
  else
    echo "::warning::base revision $BATCHOR_COMPARE_TO not available: no cost diff (checkout with fetch-depth: 0)"
  fi
fi
errors="$(mktemp)"
{
  echo "## batchor plan"
  echo
} >"$out"
for spec in "${specs[@]}"; do
  batchor plan "$spec" --format markdown --detailed-exitcode "${compare[@]}" >>"$out"
  code=$?
  case $code in
    0|2) ;;
    11) echo "::error::$spec: the full job costs more than ${BATCHOR_FAIL_ON_INCREASE:-?} % above the base (see the cost diff)"
        echo "_$spec: the full job's cost rose more than ${BATCHOR_FAIL_ON_INCREASE:-?} % (fail-on-increase)._" >>"$out"; status=1 ;;
    4) echo "::warning::$spec is over its budget or has an unpriced model" ;;
    *) echo "::error::batchor plan $spec exited $code"; echo "_batchor plan $spec failed (exit $code): see the job log._" >>"$out"; status=1 ;;
  esac
done
echo "## batchor checks (answers stored by the default branch)" >>"$out"
for spec in "${specs[@]}"; do
  batchor check "$spec" --format markdown >>"$out" 2>"$errors"
  code=$?
  cat "$errors" >&2
  case $code in
    0) ;;
    9) echo "::warning::checks failed for $spec on the stored answers" ;;
    1) if grep -qE 'run_not_found|no_state' "$errors"; then echo "_$spec has not run on the default branch yet._" >>"$out"
       else echo "::error::batchor check $spec failed"; status=1; fi ;;
    *) echo "::error::batchor check $spec exited $code"; status=1 ;;
  esac
done
if ! batchor keys "${specs[@]}" --check >/dev/null 2>"$errors"; then
  if grep -q 'no_api_key' "$errors"; then
    { echo; echo "**API keys an apply needs are not set here:** $(sed -n 's/^error \[no_api_key\]: //p' "$errors")"; } >>"$out"
  else
    cat "$errors" >&2; status=1
  fi
fi
rm -f "$errors"
exit $status
