"""Amazon Bedrock's facts for planning (providers/facts.py): it takes prompt-cache points
(Converse `cachePoint` blocks, providers/caching.py); everything else is the empty description's."""

from __future__ import annotations

from batchor.providers.facts import ProviderFacts

FACTS = ProviderFacts(prompt_cache=True)
