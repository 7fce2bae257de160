"""``runner serve``: agents as models behind an OpenAI-compatible API (SPEC section 11).

Module map:

    catalog.py    which agents are served (files and folders, team members) and team files' workflows
    reload.py     CatalogHolder: the catalog and one RuntimeHost per agent; --watch swaps changes in
    pools.py      one WorkflowAgents pool per served workflow, shared by its requests
    protocol.py   the request body: parsing, validation, OpenAI-shaped errors, limits that only lower
    request.py    a body from bytes to history: valid text, bounded depth and message count
    text.py       valid Unicode in and out (lone surrogates become U+FFFD)
    details.py    the ``<details type="tool_calls">`` blocks that show executed tools in the content
    history.py    the request's messages as the history a session restores
    engine.py     one request: a Session on the agent's shared runtime, its events as pieces
    workflow_run.py  one request to a workflow: the workflow run once, steps as reasoning, its output
    sse.py        pieces as chat.completion chunks (seed 002 rules) or one chat.completion
    outward.py    what the server says of its own accord (descriptions, errors), secrets masked
    guard.py      which Host and Origin headers are answered (ASGI middleware; CORS in app.py)
    state.py      ServeState: the catalog, keys and ``authorize``, limits, runs in flight
    http.py       the HTTP pieces every door shares: JSON responses, bodies within limits (starlette)
    conversations.py  conversations a door continues by id: owned by a key, exact ids, idle expiry
    door_spec.py  Door: one protocol's routes and lifespan (a leaf the door modules import)
    doors.py      the protocol doors beside Chat Completions (each a module of its own: routes, lifespan)
    responses/    the OpenAI Responses API: /v1/responses, stored responses, its event stream
    mcp/          the agents as MCP tools: runner mcp (stdio) and /mcp (streamable HTTP), mcp SDK
    a2a/          every agent an A2A agent: cards, the a2a-sdk handler at 1.0 and 0.3
    app.py        the Starlette app: health, models, Chat Completions, and every door's routes
    server.py     uvicorn's protocol with a header read timeout and a connection cap

Each agent's runtime (tool sources, model client) is built on its first request and kept; every
request is a new ``Session`` on it, run with ``Session.run``. Everything but ``app.py``, ``http.py``,
``doors.py``, the door modules and ``server.py`` imports only the core dependencies, so the Open
WebUI pipe (``runner.integrations.openwebui``) shares them.
"""
