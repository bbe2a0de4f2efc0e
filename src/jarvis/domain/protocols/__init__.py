"""How tools are offered and replies read: native function calling, the text protocols
(ReAct, structured), code blocks."""
