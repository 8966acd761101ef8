"""A local plugin the capture tests load into real worker processes through ``MKG_PLUGINS``.

``MKG_PROBE_MODE`` picks what its context provider does: ``echo`` answers with the event's name
and prompt, ``slow`` sleeps ``MKG_PROBE_SLEEP`` seconds first, ``fail`` raises. Its two capture
handlers run on every event: the first always raises, the second marks the event in the graph.
"""

from __future__ import annotations

import os
import time

from mkg_core import hookimpl
from mkg_core.contrib import CaptureHandler, ContextProvider


class Probe(ContextProvider):
    name = "probe"

    def provide(self, event, context):
        mode = os.environ.get("MKG_PROBE_MODE", "echo")
        if mode == "fail":
            raise RuntimeError("probe provider failed")
        if mode == "slow":
            time.sleep(float(os.environ.get("MKG_PROBE_SLEEP", "5")))
        return f"probe saw {event.event}: {event.prompt or event.source or ''}"


class Exploding(CaptureHandler):
    name = "exploding"

    def handle(self, event, context):
        raise RuntimeError("probe handler exploded")


class Marker(CaptureHandler):
    name = "marker"

    def handle(self, event, context):
        context.graph.write(
            "MERGE (m:ProbeMark {session_id: $session, event: $event, at: $at})",
            {"session": event.session_id, "event": event.event, "at": event.raw.get("probe_at", "")},
        )


@hookimpl
def mkg_register_context_providers(config):
    return [Probe()]


@hookimpl
def mkg_register_capture_handlers(config):
    return [Exploding(), Marker()]
