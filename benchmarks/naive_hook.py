"""The baseline a hook is compared with: import the Neo4j driver and write the event directly.

This is what a straightforward implementation does on every event, inside the agent's turn.
"""

from __future__ import annotations

import json
import os
import sys

import neo4j


def main() -> None:
    payload = json.loads(sys.stdin.buffer.read() or b"{}")
    auth = (os.environ.get("NEO4J_USERNAME", "neo4j"), os.environ.get("NEO4J_PASSWORD", "password"))
    with neo4j.GraphDatabase.driver(os.environ["NEO4J_URI"], auth=auth) as driver:
        driver.execute_query(
            "CREATE (:NaiveEvent {session_id: $sid, name: $name, payload: $payload})",
            sid=str(payload.get("session_id")),
            name=str(payload.get("hook_event_name")),
            payload=json.dumps(payload)[:4000],
        )


if __name__ == "__main__":
    main()
