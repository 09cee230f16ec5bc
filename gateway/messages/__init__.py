"""Messages: the socket methods scripts and the MCP tools call (`methods`), one message's life
(`trace`), and an urgent message's ladder (`urgent`)."""
