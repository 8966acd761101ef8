"""The mkg-neocarta plugin: the ``neocarta_*`` data-catalog tools, and ``mkg neocarta load``.

The tools are neocarta's own, each as ``neocarta_<its name>`` (:mod:`mkg_neocarta.remote`), and
three stable searches that use the best search neocarta offers (:mod:`mkg_neocarta.tools`). They
mount when ``GCP_PROJECT_ID``, ``BIGQUERY_DATASET_ID`` and the embedding model's key are set and
neocarta's MCP server can be run (see :mod:`mkg_neocarta.locate`).
"""

from __future__ import annotations

import click

from mkg_core import hookimpl
from mkg_core.contrib import Setting, ToolGroup
from mkg_core.settings import Settings


@hookimpl
def mkg_register_settings() -> list[Setting]:
    return [
        Setting("NEOCARTA_BIN", "the folder of the neocarta commands (else PATH, else uvx)"),
        Setting("BIGQUERY_DATASET_ID", "the BigQuery dataset to catalogue"),
        Setting("BIGQUERY_REGION", "the dataset's location", default="US"),
        Setting("GCP_BILLING_PROJECT_ID", "the project billed for queries (default: GCP_PROJECT_ID)"),
        Setting("GCP_PROJECT_ID", "the Google Cloud project of the BigQuery dataset"),
        Setting("GCP_SERVICE_ACCOUNT_JSON", "an inline service-account key (JSON)", secret=True),
        Setting(
            "GOOGLE_APPLICATION_CREDENTIALS",
            "a service-account key file (else default credentials)",
        ),
    ]


@hookimpl
def mkg_register_tool_groups(config: Settings) -> list[ToolGroup]:
    from .tools import tool_group

    return [tool_group()]


@hookimpl
def mkg_register_commands(cli: click.Group) -> None:
    from .cli import neocarta_group

    cli.add_command(neocarta_group)
