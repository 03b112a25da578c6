"""MOSS-TTS Delay's process-local handoff: the module-level ``PreparedRequestQueue``.

Preprocessing begins, prepares and publishes each request here; the AR stage pops it
(``omni_models.common.queued``). In any other process the queue is empty, so a forbidden split
fails with an error naming the edge.
"""

from __future__ import annotations

from omni_models.common.queue import PreparedRequestQueue

MODEL = "moss_tts_delay"

PREPARED_QUEUE = PreparedRequestQueue(MODEL, src="preprocessing", dst="tts_engine")
