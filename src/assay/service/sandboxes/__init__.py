"""Sandbox surfaces of started task runs under the run token (docs/api.md) and playground seeding."""
