"""What the structured-output tests of ``runner serve`` share: a tool, an output schema, its answer."""

from __future__ import annotations

ADD_TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''

SUM_OUTPUT = """
output:
  type: object
  properties:
    total: {type: integer}
    note: {type: string}
  required: [total, note]
  additionalProperties: false
"""

SUM = {"total": 5, "note": "2 + 3"}
QUESTION = [{"role": "user", "content": "What is 2 + 3?"}]
