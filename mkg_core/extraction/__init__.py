"""Memory extraction at Stop: distil a session's new events into learnings and a timeline entry.

Run as the ``extraction`` worker job after a Stop event is stored (never at SessionEnd, never in
the hook). For the session (and its subagents), a **window** is the events no earlier run has
processed. Per window:

1. a corpus within ``MKG_EXTRACTION_CORPUS_TOKENS``: the latest turns whole, older turns condensed
   to one line, the oldest left out with a marker; recalled-memory blocks stripped (memory is never
   re-learned from itself) and credentials scrubbed again;
2. the closest existing learnings of the project and the user;
3. one extraction call (:data:`EXTRACTION_PROMPT`): create / update / ignore actions over
   ``:Learning``, each scoped ``project`` or ``user``;
4. one observation call (:data:`OBSERVATION_PROMPT`): 1-3 episodic ``:Observation`` records;
5. one write transaction: the ``:ProjectProcessing`` record, the learnings, the observations
   chained on the project's timeline, and ``PROCESSED_EVENT`` on every event of the window. A run
   killed before it commits leaves the window unprocessed; a committed window is never taken again.

Without a usable LLM the window waits (a ``waiting`` record says why) and is taken again by a later
run once an LLM answers, unless ``MKG_EXTRACTION_RETRY_SKIPPED=0``, in which case it is marked
processed as skipped. A failed call leaves the window waiting too.

::

    (:Project)-[:HAS_PROCESSING]->(:ProjectProcessing)<-[:HAS_PROCESSING]-(:Session)
    (:ProjectProcessing)-[:PROCESSED_EVENT]->(:SessionEvent)
    (:ProjectProcessing)-[:PRODUCED_LEARNING|UPDATED_LEARNING]->(:Learning)
    (:ProjectProcessing)-[:PRODUCED_OBSERVATION]->(:Observation)-[:FROM_SESSION]->(:Session)
    (:Project)-[:HAS_OBSERVATION]->(:Observation)-[:NEXT]->(:Observation)
    (:Project)-[:LATEST_OBSERVATION]->(:Observation)

The package: :mod:`.prompts` (the two calls and their answers), :mod:`.corpus` (the window as text),
:mod:`.rows` (answers as rows to write), :mod:`.store` (the window and the records it writes, their
Cypher) and :mod:`.job` (the run and the worker job).
"""

from .corpus import build_corpus, event_blocks
from .job import ExtractionJob, Extractor, WindowResult
from .rows import observation_text

__all__ = ["ExtractionJob", "Extractor", "WindowResult", "build_corpus", "event_blocks", "observation_text"]
