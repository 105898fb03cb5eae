#!/usr/bin/env bash
# Install batchor from the action's own checkout (the version the workflow pinned with
# `uses: batchor-dev/batchor@<tag>`), never by a registry name: PyPI's `batchor` is another project.
set -euo pipefail
source="${1:-${GITHUB_ACTION_PATH:?run from the action, or pass the folder to install}}"
python -m pip install --disable-pip-version-check --quiet "$source"
batchor --version
