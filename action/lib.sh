# Shared by the action's scripts (sourced, not run). The action's logic lives in these plain
# scripts so that tests/action/ can run them on a laptop exactly as the runner does.
# shellcheck shell=bash

# The spec files BATCHOR_SPECS names: space-separated globs (`specs/*.yaml jobs/*/job.yaml`).
spec_files() {
  local pattern
  local -a found
  read -ra patterns <<<"${BATCHOR_SPECS:-specs/*.yaml}"
  for pattern in "${patterns[@]}"; do
    mapfile -t found < <(compgen -G "$pattern" | sort)
    if [ "${#found[@]}" -eq 0 ]; then
      echo "::warning::no spec matches '$pattern'" >&2
    fi
    printf '%s\n' "${found[@]}"
  done
}

# Markdown for the job summary page (a no-op outside the runner when the variable is unset).
to_summary() {
  if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
    cat "$1" >>"$GITHUB_STEP_SUMMARY"
  fi
}
