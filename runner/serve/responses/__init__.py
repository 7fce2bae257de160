"""The OpenAI Responses API on ``runner serve`` (``/v1/responses``): a door over the chat door's runs.

- ``items``: a request body as the chat door's ``ChatRequest`` (input items → chat messages);
- ``events``: a run's pieces as a response object and its stream of events;
- ``store``: stored responses (the conversation at each one, owned by a key's digest);
- ``prior``: a stored conversation checked and converted once, for its continuations;
- ``writes``: a stored response's record written once its answer is sent (and at shutdown);
- ``listing``: the input items of a stored response, paginated;
- ``door``: the routes (``door(state) -> Door``).
"""

from __future__ import annotations

from runner.serve.responses.door import door

__all__ = ["door"]
