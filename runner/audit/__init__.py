"""``runner audit``: what an agent file will run or reach, listed without running any of it.

Module map: ``report`` (the data: ``AgentAudit`` and its entries, the ``--json`` shape), ``collect``
(``audit_agent``: from a loaded ``AgentConfig`` and an ``AuditContext``), ``modules`` (where a Python
module resolves, found without importing it), ``envscan`` (every ``${VAR}`` of the file and its
``extends`` chain), ``load`` (loading a file without importing its modules), ``text`` (the listing
and serve's one-line summary).
"""

from __future__ import annotations

from runner.audit.collect import AuditContext, audit_agent, find_repository, mask_url_passwords
from runner.audit.load import audit_context, load_for_audit, summary_of
from runner.audit.report import JSON_VERSION, AgentAudit
from runner.audit.text import listing, summary

__all__ = [
    "JSON_VERSION",
    "AgentAudit",
    "AuditContext",
    "audit_agent",
    "audit_context",
    "find_repository",
    "listing",
    "load_for_audit",
    "mask_url_passwords",
    "summary",
    "summary_of",
]
