"""What a session writes and reads back: transcripts and cassettes (JSONL), beside the session layer.

Module map:

- ``transcript``: ``TranscriptWriter`` (appended, flushed, secrets redacted), ``Transcript`` (read
  back: the history a resume restores), provenance (sha256, git state).
- ``cassette``: recorded model requests and responses; ``replay``: ``RecordingModel`` and
  ``ReplayModel`` behind the ``Model`` protocol.

The store knows messages, not the loop: the session writes through it.
"""
