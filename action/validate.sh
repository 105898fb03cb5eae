#!/usr/bin/env bash
# Offline: no key, no call to a provider. Every problem in every spec is printed before the exit code.
set -euo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=action/lib.sh
. "$here/lib.sh"
mapfile -t specs < <(spec_files)
if [ "${#specs[@]}" -eq 0 ]; then
  echo "::error::no spec matches '${BATCHOR_SPECS:-specs/*.yaml}' (input specs)" >&2
  exit 1
fi
batchor validate "${specs[@]}"
