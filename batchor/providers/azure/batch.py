"""Azure OpenAI Batch API: OpenAI's batch protocol at `/openai/files` and `/openai/batches`.

The same JSONL files and batch objects as OpenAI's (providers/openai/batch.py), with Azure's
endpoint without `/v1` (`/chat/completions`) and the deployment as each line's `model`: the
deployment must be a batch one (Global Batch or Data Zone Batch). Batches carry the local batch
id in their metadata, so a create whose outcome is unknown is found again, never repeated.
"""

from __future__ import annotations

from typing import Any

from batchor.providers.azure.realtime import azure_client
from batchor.providers.base import ProviderConfig
from batchor.providers.openai.batch import OpenAIBatchProvider

_ENDPOINTS = {"chat": "/chat/completions"}


class AzureBatchProvider(OpenAIBatchProvider):
    name = "azure"
    endpoints = _ENDPOINTS
    first_party = False  # max_tokens, no prompt_cache_key or service_tier


def create(config: ProviderConfig, info: Any) -> AzureBatchProvider:
    client, secret = azure_client(config, pooled=False)
    return AzureBatchProvider(client, api="chat", strict=bool(config.options.get("strict")), secret=secret)
