"""Real MCP servers for the MCP-source tests (built on the SDK's low-level `Server`)."""
