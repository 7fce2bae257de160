"""Adapters that run agents inside other tools: ``openwebui`` (an Open WebUI pipe on the serve engine)."""
