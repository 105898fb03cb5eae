"""`batchor draft`: a model (or, offline, a template) turns one sentence and a data file into a
spec and its output schema, checked like any spec and rehearsed before anything is written."""

from batchor.draft.core import Attempt, Draft, DraftRequest, draft, drafter_for

__all__ = ["Attempt", "Draft", "DraftRequest", "draft", "drafter_for"]
