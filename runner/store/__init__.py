"""What a session writes and reads back: transcripts and cassettes (JSONL), beside the session layer.

Module map:

- ``transcript``: ``TranscriptWriter`` (appended, flushed, secrets redacted), ``Transcript`` (read
  back: the history a resume restores), provenance (sha256, git state).
- ``disk``: files written whole or not at all (``LineFile``, ``replace_atomically``), a folder
  checked writable before anything is spent, disk errors as ``StorageError`` naming the path.
- ``cassette``: recorded model requests and responses; ``replay``: ``RecordingModel`` and
  ``ReplayModel`` behind the ``Model`` protocol.

The store knows messages, not the loop: the session writes through it.
"""
