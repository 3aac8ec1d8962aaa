"""The MCP front end: the memory's verbs as tools, over streamable HTTP and stdio."""
