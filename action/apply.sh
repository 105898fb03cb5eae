#!/usr/bin/env bash
# Run what changed, within a budget, then gate on the quality checks. Missing API keys are named
# before any call. Batches still in flight (7) and an interrupted run (130) pass: the next run
# collects or resumes them; failed rows, the budget, failed checks or a locked state fail the step.
set -uo pipefail +e  # every exit code is looked at: no -e, even when the caller set it
here="$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=action/lib.sh
. "$here/lib.sh"
mapfile -t specs < <(spec_files)
if ! batchor keys "${specs[@]}" --check; then
  echo "::error::pass the missing API keys to the action (inputs openai-api-key, anthropic-api-key, gemini-api-key)"
  exit 1
fi
budget=(--max-cost "${BATCHOR_BUDGET:?input budget (USD per spec) is required}")
failed=0
for spec in "${specs[@]}"; do
  batchor apply "$spec" "${budget[@]}" --yes
  code=$?
  case $code in
    0) ;;
    7) echo "::notice::$spec has provider batches in flight; the next run collects them" ;;
    130) echo "::warning::$spec was interrupted; the next run resumes it" ;;
    3) echo "::error::$spec: some rows failed (see batchor status)"; failed=1 ;;
    4) echo "::error::$spec: over the budget (input budget), or a model has no price"; failed=1 ;;
    9) echo "::error::$spec: quality checks failed"; failed=1 ;;
    8) echo "::error::$spec: state locked by another apply"; failed=1 ;;
    *) echo "::error::batchor apply $spec exited $code"; failed=1 ;;
  esac
done
exit $failed
