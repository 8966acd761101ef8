"""Persist system_prompt.md, the RoadFlex persona, as (:SystemPrompt {name: 'default'}).

The same as ``mkg seed sales-agent-prompt``; idempotent. Neo4j settings come from the environment and .env
files as for every MKG command.
"""

from mkg_core.cli import main

if __name__ == "__main__":
    main(["seed", "sales-agent-prompt"])
