"""Sandbox surfaces of started task runs under the run token (SPEC §5.2) and playground seeding."""
