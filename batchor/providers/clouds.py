"""Cloud facts: which provider names and model ids belong to a cloud batchor cannot reach yet,
and which cloud Batch APIs it has no path for, so `validate` says what is missing.

Asked at plan time (no SDK imported, no call made): a spec naming a cloud path that does not
exist is refused with `cloud_unsupported`, never an internal error at `apply`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from batchor.errors import CloudPathMissingError
from batchor.providers.keys import gemini_on_vertex

_BEDROCK = ("Amazon Bedrock is the bedrock provider", "write `provider: bedrock` with the Bedrock model id as `name`")
_ANTHROPIC_VERTEX = (
    "Anthropic models on Vertex AI are not supported yet: they need an adapter for the anthropic SDK's "
    "AnthropicVertex client (realtime) and Vertex batch prediction with a gs:// or BigQuery location (batch)",
    "use `provider: anthropic` with ANTHROPIC_API_KEY, or `provider: bedrock` for Claude on AWS",
)
# Names people write for a cloud, with what to write instead (or what batchor lacks).
_CLOUD_NAMES: dict[str, tuple[str, str]] = {
    "aws": _BEDROCK,
    "amazon-bedrock": _BEDROCK,
    "aws-bedrock": _BEDROCK,
    "anthropic-vertex": _ANTHROPIC_VERTEX,
    "vertex-anthropic": _ANTHROPIC_VERTEX,
    "anthropic_vertex": _ANTHROPIC_VERTEX,
    "vertex": (
        "Vertex AI is the gemini provider on Vertex",
        "write `provider: gemini` with `options: {vertexai: true, project: ..., location: ...}`",
    ),
    "vertexai": (
        "Vertex AI is the gemini provider on Vertex",
        "write `provider: gemini` with `options: {vertexai: true, project: ..., location: ...}`",
    ),
    "vertex-ai": (
        "Vertex AI is the gemini provider on Vertex",
        "write `provider: gemini` with `options: {vertexai: true, project: ..., location: ...}`",
    ),
    "google": ("Google's models are the gemini provider", "write `provider: gemini`"),
    "azure-openai": ("Azure OpenAI is the azure provider", "write `provider: azure`"),
    "azure_openai": ("Azure OpenAI is the azure provider", "write `provider: azure`"),
    "aoai": ("Azure OpenAI is the azure provider", "write `provider: azure`"),
}
S3_OPTION, ROLE_OPTION = "batch_s3", "role_arn"  # Bedrock batch: where its files go, the role it assumes
GCS_OPTION = "batch_gcs"  # Vertex AI batch: where its files go
MIN_RECORDS_OPTION = "batch_min_records"  # Bedrock batch: the fewest records a job takes, if not its default
BEDROCK_MIN_RECORDS = 100  # Bedrock refuses a batch inference job with fewer records (a service quota)
_MISSING = frozenset({"anthropic-vertex", "vertex-anthropic", "anthropic_vertex"})  # clouds batchor cannot reach yet
# Bedrock model ids: `anthropic.claude-3-haiku-...`, with a cross-region prefix (`us.`, `eu.`, ...).
_BEDROCK_ID = re.compile(
    r"^(?:(?:us|eu|apac|us-gov|global)\.)?(?:anthropic|amazon|meta|mistral|cohere|ai21|deepseek|qwen|writer)\."
)


def unknown_provider_help(name: str, known: Iterable[str]) -> tuple[str, str]:
    """The message and hint for a provider name batchor does not have: a cloud's name says what
    to write instead (or what is missing); a misspelling gets the close names; else the list.
    A cloud batchor has no path for raises `cloud_unsupported` naming what is missing."""
    listed = sorted(known)
    if name.lower() in _MISSING:
        what, instead = _CLOUD_NAMES[name.lower()]
        raise CloudPathMissingError(f"provider '{name}': {what}", hint=instead)
    if name.lower() in _CLOUD_NAMES:
        what, instead = _CLOUD_NAMES[name.lower()]
        return f"unknown provider '{name}': {what}", instead
    close = difflib.get_close_matches(name.lower(), listed, n=2, cutoff=0.6)
    guess = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return f"unknown provider '{name}'", f"{guess}use one of: {', '.join(listed)}"


def option_missing(provider: str, option: str) -> None:
    """Raise `cloud_unsupported` for an option asking for a cloud path batchor lacks (Anthropic's
    models on Vertex AI: `provider: anthropic` with `vertexai`)."""
    if provider == "anthropic" and option == "vertexai":
        what, instead = _ANTHROPIC_VERTEX
        raise CloudPathMissingError(f"provider 'anthropic' with `vertexai`: {what}", hint=instead)


def bedrock_model_id(model: str) -> bool:
    """Whether `model` is written as an Amazon Bedrock model id (`anthropic.claude-...`)."""
    return _BEDROCK_ID.match(model) is not None


def bedrock_id_help(model: str) -> str:
    """' (...)': what to write for a Bedrock model id given to another provider."""
    bare = _BEDROCK_ID.sub("", model)
    return f" ('{model}' is an Amazon Bedrock model id: write `provider: bedrock`; for Anthropic's API write '{bare}')"


def batch_missing(provider: str, options: Mapping[str, Any]) -> str | None:
    """What batchor lacks to run this provider's Batch API with these options (None: it can)."""
    if provider == "bedrock":
        return bedrock_batch_missing(options)
    if provider == "gemini" and gemini_on_vertex(options):
        return vertex_batch_missing(options)
    return None


def vertex_batch_missing(options: Mapping[str, Any]) -> str | None:
    """What a Vertex AI model block lacks to run batch prediction: a Cloud Storage location for the
    job's files (batchor writes and deletes objects there; it creates no bucket)."""
    location = options.get(GCS_OPTION)
    if not isinstance(location, str) or not re.fullmatch(r"gs://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9](/.*)?", location):
        return (
            f"Gemini batch prediction on Vertex AI needs a Cloud Storage location for its files: add "
            f"`options: {{{GCS_OPTION}: gs://<bucket>/<prefix>}}` (a bucket the project's Vertex AI service "
            f"agent can read and write){_written(location)}"
        )
    return None


def batch_min_requests(provider: str, options: Mapping[str, Any]) -> int:
    """The fewest requests one batch job of this provider takes (1: any number). Bedrock's is a
    quota of the account and model, 100 unless AWS set it otherwise (`batch_min_records`)."""
    if provider != "bedrock":
        return 1
    value = options.get(MIN_RECORDS_OPTION)
    return value if isinstance(value, int) and value >= 1 else BEDROCK_MIN_RECORDS


def bedrock_batch_missing(options: Mapping[str, Any]) -> str | None:
    """What a Bedrock model block lacks to run batch inference: an S3 location for the job's files
    and the IAM service role Bedrock assumes to read and write it (batchor creates neither)."""
    location, role = options.get(S3_OPTION), options.get(ROLE_OPTION)
    if not isinstance(location, str) or not re.fullmatch(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?", location):
        return (
            f"Bedrock batch inference needs an S3 location for its files: add `options: {{{S3_OPTION}: "
            f"s3://<bucket>/<prefix>}}` (a bucket in the model's region){_written(location)}"
        )
    if not isinstance(role, str) or not role.startswith("arn:"):
        return (
            f"Bedrock batch inference needs an IAM service role: add `options: {{{ROLE_OPTION}: "
            "arn:aws:iam::<account>:role/<name>}` (a role Bedrock can assume that reads and writes "
            f"{location}){_written(role)}"
        )
    return None


def _written(value: Any) -> str:
    return "" if value is None else f"; {value!r} is not one"


def priced_as(provider: str, name: str, options: Mapping[str, Any]) -> tuple[str, str]:
    """The provider and model whose price, token counter and context window a model block has:
    an Azure deployment is priced as the OpenAI model it serves (`options.model`, else a
    deployment named after its model)."""
    if provider == "azure":
        return "openai", str(options.get("model") or name)
    return provider, name
