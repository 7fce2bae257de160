"""A2A (Agent2Agent) in ``runner serve``: every served agent and workflow is an A2A agent (docs/a2a.md).

``door.py`` (the routes and who the caller is), ``card.py`` (the Agent Card), ``executor.py`` (a task
is one request run of the chat door's machinery), ``tasks.py`` (the bounded task store),
``direct.py`` (a blocking ``SendMessage`` of a new task without the SDK's ``ActiveTask``),
``fast.py`` (a plain one parsed and answered without the SDK's JSON-RPC dispatcher). The wire is
the official ``a2a-sdk``'s; this package is imported only when the server starts.
"""

import os

# The a2a-sdk wraps every call in an OpenTelemetry span when opentelemetry is installed (a third of
# a SendMessage's time); runner turns that off unless the user asked for it (docs/a2a.md).
os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")
