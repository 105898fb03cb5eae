#!/usr/bin/env bash
# Post $BATCHOR_COMMENT_FILE as ONE pull request comment, updated in place on every push (found by
# a hidden marker). The markdown always goes to the job summary too; a fork's pull request (its
# token is read-only), a run without `gh` or a token, or a refused call only lose the comment.
set -uo pipefail +e  # every exit code is looked at: no -e, even when the caller set it
here="$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=action/lib.sh
. "$here/lib.sh"
file="${BATCHOR_COMMENT_FILE:?the markdown to post}"
marker="<!-- batchor-plan-comment -->"
body="$(mktemp)"
{ echo "$marker"; cat "$file"; } >"$body"
to_summary "$file"
why=""
if [ -z "${BATCHOR_PR_NUMBER:-}" ]; then why="not a pull request"
elif [ "${BATCHOR_FORK:-false}" = true ]; then why="a pull request from a fork (read-only token)"
elif ! command -v gh >/dev/null 2>&1; then why="gh is not installed"
elif [ -z "${GH_TOKEN:-}" ]; then why="no token (input github-token)"
fi
if [ -n "$why" ]; then
  echo "::notice::batchor plan written to the job summary only: $why"
  rm -f "$body"; exit 0
fi
comments="repos/${GITHUB_REPOSITORY:?}/issues/${BATCHOR_PR_NUMBER}/comments"
id="$(gh api --paginate "$comments" --jq ".[] | select(.body | startswith(\"$marker\")) | .id" | head -n 1)"
if [ -n "$id" ]; then
  gh api --method PATCH "repos/${GITHUB_REPOSITORY}/issues/comments/$id" -F "body=@$body" >/dev/null
else
  gh api --method POST "$comments" -F "body=@$body" >/dev/null
fi
code=$?
rm -f "$body"
if [ $code -ne 0 ]; then
  echo "::warning::could not post the batchor plan comment (is pull-requests: write granted?); it is in the job summary"
fi
exit 0
