"""The Cypher the memory viewer owns: reads for its pages, as named constants with parameters.

Every write the viewer makes goes through the functions the CLI and the MCP tools use
(:mod:`mkg_core.review`, :mod:`mkg_core.system_prompt`, :func:`mkg_core.learnings.restore`); none
is here. Lists are paged by a cursor (the last row's time and id), never by ``SKIP``, so a late page
costs what the first one does. A learning scoped to a user is visible only to that user
(``$user_id``); project memory is visible to whoever opens the project.
"""

from __future__ import annotations

#: What a project's learnings are for this viewer: the project's own, and the user's facts that
#: were learned in it. A CASE, not an OR: an OR would make the planner split the index seek in two
#: and lose the index's order.
_MINE = "CASE l.scope WHEN 'project' THEN true WHEN 'user' THEN l.user_id = $user_id ELSE false END"

#: Counts by status are answered by the (project_id, status) index alone, so they cost the same at
#: any size; they count every learning recorded in the project, a teammate's facts about
#: themselves included (which the lists never show).
_PROJECT_FIELDS = """
RETURN p.id AS id, p.name AS name, p.repo_root AS root, p.remote AS remote, at AS last_activity,
       COUNT { (p)-[:HAS_SESSION]->() } AS sessions,
       COUNT { (p)-[:HAS_OBSERVATION]->() } AS observations,
       COUNT { MATCH (l:Learning) WHERE l.project_id = p.id AND l.status = 'approved' } AS approved,
       COUNT { MATCH (l:Learning) WHERE l.project_id = p.id AND l.status = 'candidate' } AS candidate,
       COUNT { MATCH (l:Learning) WHERE l.project_id = p.id AND l.status = 'rejected' } AS rejected,
       COUNT { MATCH (l:Learning)
               WHERE l.project_id = p.id AND l.status = 'candidate' AND l.scope = 'project'
                 AND l.consistency_status IN ['ambiguous', 'held'] } AS waiting
"""

PROJECTS = (
    """
MATCH (p:Project)
WITH p, coalesce(p.last_activity_at, p.updated_at, p.created_at) AS at
ORDER BY at DESC, p.id
SKIP $skip LIMIT $limit
"""
    + _PROJECT_FIELDS
)

PROJECT = (
    """
MATCH (p:Project {id: $project_id})
WITH p, coalesce(p.last_activity_at, p.updated_at, p.created_at) AS at
"""
    + _PROJECT_FIELDS
)

PROJECT_COUNT = "MATCH (p:Project) RETURN count(p) AS n"

#: The user's facts waiting for a human (every project's review queue shows them).
MY_WAITING_FACTS = """
MATCH (l:Learning) WHERE l.user_id = $user_id AND l.scope = 'user' AND l.status = 'candidate'
RETURN count(l) AS n
"""

_LEARNING_FIELDS = """
RETURN l.id AS id, l.text AS text, l.status AS status, l.scope AS scope, l.kind AS kind,
       l.confidence AS confidence, l.source AS source, l.consistency_status AS consistency_status,
       l.created_at AS created_at, l.use_count AS use_count, l.user_id AS user_id
"""

#: One page of a project's learnings, newest first, filtered; ``$status`` 'held' means candidates
#: held for review because they read like instructions. Ordered as the (project_id, created_at)
#: index is, so a page reads its rows and stops, at any size; a learning without ``created_at``
#: (none is written without one) would not be listed.
LEARNINGS = (
    f"""
MATCH (l:Learning)
WHERE l.project_id = $project_id
  AND l.created_at <= coalesce(datetime($before_at), datetime('9999-12-31T00:00:00Z'))
  AND ($before_at IS NULL OR NOT (l.created_at = datetime($before_at) AND l.id >= $before_id))
  AND {_MINE}
  AND ($status IS NULL OR ($status <> 'held' AND l.status = $status)
       OR ($status = 'held' AND l.status = 'candidate' AND l.consistency_status = 'held'))
  AND ($scope IS NULL OR l.scope = $scope)
  AND ($kind IS NULL OR l.kind = $kind)
  AND ($entity IS NULL OR EXISTS {{ MATCH (l)--(:Entity {{id: $entity}}) }})
WITH l ORDER BY l.project_id DESC, l.created_at DESC, l.id DESC LIMIT $limit
"""
    + _LEARNING_FIELDS
    + ", l.created_at AS cursor_at"
)

#: Rows for learnings a search found (``$ids``), with what the search does not return.
LEARNINGS_BY_ID = (
    f"""
UNWIND $ids AS lid
MATCH (l:Learning {{id: lid}})
WHERE {_MINE}
  AND ($kind IS NULL OR l.kind = $kind)
  AND ($entity IS NULL OR EXISTS {{ MATCH (l)--(:Entity {{id: $entity}}) }})
"""
    + _LEARNING_FIELDS
)

#: Learnings recall never returns (tombstones, or candidates held because they read like
#: instructions) whose words match, through the same index and scoped query recall uses.
UNRECALLED_SEARCH = """
CALL db.index.fulltext.queryNodes('project_learning_fulltext', $query, {limit: $limit * 4})
YIELD node AS l, score
WHERE l.project_id = $project_id
  AND (l.scope = 'project' OR (l.scope = 'user' AND l.user_id = $user_id))
  AND (($status = 'rejected' AND l.status = 'rejected')
       OR ($status = 'held' AND l.status = 'candidate' AND l.consistency_status = 'held'))
RETURN l.id AS id, score ORDER BY score DESC LIMIT $limit
"""

OBSERVATIONS = """
MATCH (:Project {id: $project_id})-[:HAS_OBSERVATION]->(o:Observation)
WITH o, coalesce(o.ended_at, o.created_at) AS at
WHERE $before_at IS NULL OR at < datetime($before_at) OR (at = datetime($before_at) AND o.id < $before_id)
RETURN o.id AS id, o.type AS type, o.title AS title, o.narrative AS narrative, o.facts AS facts,
       o.session_id AS session_id, at, at AS cursor_at
ORDER BY at DESC, id DESC LIMIT $limit
"""

SESSIONS = """
MATCH (:Project {id: $project_id})-[:HAS_SESSION]->(s:Session)
WITH s, coalesce(s.last_event_at, s.created_at) AS at
WHERE $before_at IS NULL OR at < datetime($before_at)
   OR (at = datetime($before_at) AND s.session_id < $before_id)
WITH s, at ORDER BY at DESC, s.session_id DESC LIMIT $limit
RETURN s.session_id AS id, s.client AS client, s.agent_kind AS agent_kind, s.agent_type AS agent_type,
       s.user_id AS user_id, s.created_at AS started_at, at AS last_event_at, at AS cursor_at,
       COUNT { (s)-[:HAS_EVENT]->() } AS events,
       COUNT { (s)-[:HAS_EVENT]->(:SessionEvent {event_name: 'UserPromptSubmit'}) } AS prompts
"""

ERROR_PATTERNS = """
MATCH (:Project {id: $project_id})-[:HAS_TOOL_ERROR_PROFILE]->(:ToolErrorProfile)
      -[:HAS_ERROR_PATTERN]->(e:QueryErrorPattern)
RETURN e.id AS id, e.title AS title, e.tool_key AS tool_key, e.error_signature AS signature,
       e.root_cause AS root_cause, e.resolution AS resolution, e.status AS status,
       coalesce(e.use_count, 0) AS use_count, e.last_seen_at AS last_seen_at,
       COUNT { (e)-[:DERIVED_FROM]->() } AS failures
ORDER BY e.last_seen_at DESC, e.id LIMIT $limit
"""

#: An entity this user may see: the project's, or one of the user's own (never another user's).
_MY_ENTITY = "(coalesce(e.scope, 'project') <> 'user' OR e.user_id = $user_id)"

#: The entities a project centres on, when the graph has any (most mentioned, then most connected).
ENTITIES = f"""
MATCH (e:Entity {{project_id: $project_id}}) WHERE {_MY_ENTITY}
WITH e, COUNT {{ (e)--(:Learning) }} AS learnings, COUNT {{ (e)--() }} AS degree
RETURN e.id AS id, coalesce(e.name, e.id) AS name, coalesce(e.kind, e.type) AS type, learnings, degree
ORDER BY coalesce(e.mentions, 0) DESC, degree DESC, name LIMIT $limit
"""

# -- a session ----------------------------------------------------------------------------------------

SESSION = """
MATCH (s:Session {session_id: $session_id})
OPTIONAL MATCH (p:Project)-[:HAS_SESSION]->(s)
WITH s, collect(DISTINCT {id: p.id, name: p.name}) AS projects
OPTIONAL MATCH (s)-[:SUBAGENT_OF]->(parent:Session)
RETURN s.session_id AS id, s.client AS client, s.agent_kind AS agent_kind, s.agent_type AS agent_type,
       s.user_id AS user_id, s.model AS model, s.created_at AS started_at, s.last_event_at AS last_event_at,
       [x IN projects WHERE x.id IS NOT NULL] AS projects, parent.session_id AS parent_id,
       COUNT { (s)-[:HAS_EVENT]->() } AS events,
       [(s)-[:HAS_SUBAGENT]->(c:Session) | {id: c.session_id, type: c.agent_type,
                                             events: COUNT { (c)-[:HAS_EVENT]->() }}] AS subagents,
       [(s)-[:INJECTED]->(i:SystemPromptInjection) | {id: i.injection_id, prompt: i.prompt_name,
          summary: i.summary, source: i.source, chars: i.char_count, at: i.timestamp,
          session_source: i.session_source}] AS prompts,
       [(l:Learning)-[:FROM_SESSION]->(s) WHERE l.scope = 'project' OR l.user_id = $user_id |
          {id: l.id, text: l.text, status: l.status, scope: l.scope}] AS produced
"""

_EVENT_FIELDS = """
OPTIONAL MATCH (l:Learning)-[a:INJECTED_AT]->(e)
WITH e, l, a ORDER BY coalesce(a.rank, 1000), l.id
WITH e, collect(CASE WHEN l IS NULL OR (l.scope = 'user' AND l.user_id <> $user_id) THEN null ELSE
       {id: l.id, text: l.text, status: l.status, scope: l.scope, score: a.score, sources: a.sources,
        rank: a.rank} END) AS injected
RETURN e {.event_id, .event_name, .source_event, .timestamp, .session_id, .timeline_session_id, .project_id,
          .client, .source, .model, .prompt, .tool_name, .tool_key, .tool_use_id, .tool_input, .tool_response,
          .tool_error, .error, .is_interrupt, .last_assistant_message, .agent_kind, .agent_id, .agent_type,
          .spawned_agent_id, .truncated_fields, .turn_id} AS event,
       [x IN injected WHERE x IS NOT NULL] AS injected,
       [(c:Session)-[:STARTED_AT|ENDED_AT|TRIGGERED_BY]->(e) | c.session_id] AS subagents,
       toString(e.timestamp) AS cursor_at
ORDER BY e.timestamp, e.event_id
"""

#: A session's events after a cursor, in the order the hooks received them.
EVENTS = (
    """
MATCH (:Session {session_id: $session_id})-[:HAS_EVENT]->(e:SessionEvent)
WHERE $after_at IS NULL OR e.timestamp > datetime($after_at)
   OR (e.timestamp = datetime($after_at) AND e.event_id > $after_id)
WITH e ORDER BY e.timestamp, e.event_id LIMIT $limit
"""
    + _EVENT_FIELDS
)

#: Events of every session (or one project's) after a cursor: sessions are found by their latest
#: event's time, then their events after the cursor.
RECENT_EVENTS = (
    """
MATCH (s:Session) WHERE s.last_event_at >= datetime($after_at)
  AND ($project_id IS NULL OR EXISTS { MATCH (:Project {id: $project_id})-[:HAS_SESSION]->(s) })
MATCH (s)-[:HAS_EVENT]->(e:SessionEvent)
WHERE e.timestamp > datetime($after_at) OR (e.timestamp = datetime($after_at) AND e.event_id > $after_id)
WITH e ORDER BY e.timestamp, e.event_id LIMIT $limit
"""
    + _EVENT_FIELDS
)

#: The newest events (for the live page's first rows), newest last.
LATEST_EVENTS = (
    """
MATCH (s:Session)
WHERE $project_id IS NULL OR EXISTS { MATCH (:Project {id: $project_id})-[:HAS_SESSION]->(s) }
WITH s ORDER BY s.last_event_at DESC LIMIT $limit
MATCH (s)-[:HAS_EVENT]->(e:SessionEvent)
WITH e ORDER BY e.timestamp DESC, e.event_id DESC LIMIT $limit
WITH e ORDER BY e.timestamp, e.event_id
"""
    + _EVENT_FIELDS
)

NOW = "RETURN toString(datetime()) AS now"

# -- a learning ---------------------------------------------------------------------------------------

LEARNING = """
MATCH (l:Learning {id: $id})
WHERE l.scope = 'project' OR (l.scope = 'user' AND l.user_id = $user_id)
OPTIONAL MATCH (p:Project) WHERE p.id = l.project_id
RETURN l {.id, .text, .previous_text, .status, .scope, .kind, .confidence, .source, .created_at,
          .updated_at, .approved_at, .rejected_at, .rejected_reason, .superseded_at, .superseded_by,
          .consistency_status, .consistency_reason, .consistency_checked_at, .held_reason, .reviewed_by,
          .reviewed_at, .review_reason, .use_count, .last_used_at, .support_count, .project_id, .user_id,
          .task_pattern, .restored_at, .already_learned_from, .demoted_at} AS learning,
       l.embedding IS NOT NULL AS embedded, p.name AS project_name
"""

#: What replaced it and what it replaced (transitively), and its other decided relations.
LEARNING_RELATIONS = """
MATCH (l:Learning {id: $id})
RETURN
  [p = (newer:Learning)-[:SUPERSEDES*1..12]->(l) | {id: newer.id, text: newer.text, status: newer.status,
      depth: length(p)}] AS superseded_by,
  [p = (l)-[:SUPERSEDES*1..12]->(older:Learning) | {id: older.id, text: older.text, status: older.status,
      depth: length(p)}] AS supersedes,
  [(l)-[r:CONTRADICTS|CONTRADICTED_BY|ALREADY_LEARNED_FROM]-(o:Learning)
      WHERE o.scope = 'project' OR o.user_id = $user_id |
      {id: o.id, text: o.text, status: o.status, type: type(r), outgoing: startNode(r) = l,
       resolution: r.resolution, reason: r.reason}] AS related,
  [(l)-[f:FROM_SESSION]->(s:Session) | {id: s.session_id, client: s.client, at: f.created_at,
      via: f.via}] AS sessions,
  [(run:ProjectProcessing)-[r:PRODUCED_LEARNING|UPDATED_LEARNING]->(l) | {id: run.id, type: type(r),
      model: r.llm_model, at: coalesce(r.created_at, r.updated_at)}] AS runs,
  COUNT { (l)-[:INJECTED_AT]->() } AS injection_count,
  COUNT { (l)-[:INJECTED_IN]->() } AS injected_sessions
"""

#: Every injection of a learning, newest first: the event (prompt) it was injected at and why.
LEARNING_INJECTIONS = """
MATCH (:Learning {id: $id})-[a:INJECTED_AT]->(e:SessionEvent)
RETURN e.event_id AS event_id, e.event_name AS event_name, e.session_id AS session_id,
       e.timeline_session_id AS timeline, e.prompt AS prompt, coalesce(a.injected_at, e.timestamp) AS at,
       a.score AS score, a.sources AS sources, a.rank AS rank
ORDER BY at DESC LIMIT $limit
"""

# -- the graph view -----------------------------------------------------------------------------------

CENTRE_LEARNING = """
MATCH (c:Learning {id: $id}) WHERE c.scope = 'project' OR c.user_id = $user_id
"""
CENTRE_SESSION = "MATCH (c:Session {session_id: $id})\n"
CENTRE_ENTITY = """
MATCH (c:Entity {id: $id}) WHERE coalesce(c.scope, 'project') <> 'user' OR c.user_id = $user_id
"""

#: A node's neighbourhood: at most ``$per_type`` neighbours per relationship type (so a session's
#: hundreds of events do not crowd out its project, learnings and subagents), other users' facts left
#: out. Embeddings are never read.
NEIGHBOURHOOD = """
CALL (c) {
  MATCH (c)-[r]-(n)
  WHERE NOT (n:Learning AND n.scope = 'user' AND n.user_id <> $user_id)
  WITH type(r) AS kind, r, n LIMIT 2000
  WITH kind, collect({r: r, n: n})[..$per_type] AS rows
  UNWIND rows AS row
  RETURN row.r AS r, row.n AS n
}
WITH c, collect({
  rel: elementId(r), type: type(r), source: elementId(startNode(r)), target: elementId(endNode(r)),
  node: elementId(n), labels: labels(n),
  key: coalesce(n.id, n.session_id, n.event_id, n.name, n.injection_id),
  caption: coalesce(n.title, n.name, n.text, n.event_name, n.session_id, n.id, n.injection_id),
  status: n.status, event: n.event_name}) AS around
RETURN elementId(c) AS centre, labels(c) AS labels,
       coalesce(c.id, c.session_id) AS key, coalesce(c.title, c.name, c.text, c.session_id, c.id) AS caption,
       c.status AS status, around
"""
