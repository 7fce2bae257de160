"""``runner serve``: agents as models behind an OpenAI-compatible API (SPEC section 11).

    catalog.py    which agents are served (files and folders, team members)
    reload.py     --watch: a new catalog swapped in when agent files change
    protocol.py   the request body: parsing, validation, OpenAI-shaped errors, limits that only lower
    details.py    the ``<details type="tool_calls">`` blocks that show executed tools in the content
    history.py    the request's messages as the history a session restores
    models.py     one model client per model configuration, shared by all requests
    engine.py     one request's run: a session in its own task, its events as pieces, cancellation
    sse.py        pieces as chat.completion chunks (seed 002 rules) or one chat.completion
    app.py        the Starlette app (the only module that imports starlette)

Everything but ``app.py`` imports only the core dependencies, so the Open WebUI pipe
(``runner.integrations.openwebui``) shares the engine and the rendering rules.
"""
