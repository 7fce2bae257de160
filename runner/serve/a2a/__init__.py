"""A2A (Agent2Agent) in ``runner serve``: every served agent and workflow is an A2A agent (docs/a2a.md).

``door.py`` (the routes and who the caller is), ``card.py`` (the Agent Card), ``executor.py`` (a task
is one request run of the chat door's machinery), ``tasks.py`` (the bounded task store). The wire is
the official ``a2a-sdk``'s; this package is imported only when the server starts.
"""
