"""The MCP server (SPEC §8)."""
