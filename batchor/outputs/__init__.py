"""Output stage: validate structured answers against their JSON schema and export results."""
