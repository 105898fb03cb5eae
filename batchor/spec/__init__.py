"""Spec stage: YAML -> validated JobSpec, templates and input rows."""
