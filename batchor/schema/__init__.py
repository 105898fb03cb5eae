"""The JSON-schema toolkit: check a step's output schema, validate and parse answers against it,
adapt it to what each provider accepts, and make sample answers for the offline mock.

Used by plan (checks, token estimates), engine (parsing answers), providers (mock samples) and
outputs (column names); it imports none of them, so none of them import each other through it.
"""
