"""What only this plugin can do, where the AI works: MCP tools for a postgres palace.

* :mod:`~mempalace_pg.mcp_tools.tools`: the tools themselves (graph-aware recall, facts with their
  evidence, entities for a question, hybrid search, atomic filing), plain functions over
  :class:`~mempalace_pg.retrieval.PalaceSearch` and :func:`~mempalace_pg.atomic.unit_of_work`, with
  their inputs checked as MemPalace's own tools check theirs;
* :mod:`~mempalace_pg.mcp_tools.server`: ``mempalace-pg mcp``, a stdio MCP server on the official
  ``mcp`` SDK serving them, to add next to MemPalace's own server in a client's configuration;
* :mod:`~mempalace_pg.mcp_tools.in_mempalace`: the same tools inside MemPalace's own server (so over
  ``mempalace serve``, its HTTP team server), when ``MEMPALACE_PG_MCP_TOOLS=1`` is set.
"""
