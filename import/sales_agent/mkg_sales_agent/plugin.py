"""The mkg-sales-agent plugin: the RoadFlex seeders, their schema and the ``mkg demo`` command."""

from __future__ import annotations

import click

from mkg_core import hookimpl
from mkg_core.contrib import SchemaStatement, SeedContext, Seeder, Setting
from mkg_core.identity import resolve_project
from mkg_core.settings import Settings


def _project() -> tuple[str, str]:
    """The project the bootstrap learnings belong to: ``MKG_PROJECT_ID``, else the current folder's."""
    project = resolve_project()
    return project.id, project.name


def _all(context: SeedContext) -> None:
    from .seeders import seed_all

    seed_all(context, *_project())


def _graph(context: SeedContext) -> None:
    from .dataset import build_dataset
    from .seeders import seed_graph

    data = build_dataset()
    counts = seed_graph(context.graph, data)
    context.progress(
        f"{counts['accounts']} accounts, {counts['products']} products, {counts['contacts']} contacts, "
        f"{counts['csms']} CSMs, {counts['product_lines']} product lines (as of {data.as_of.isoformat()})"
    )


def _learnings(context: SeedContext) -> None:
    from .seeders import seed_learnings

    project_id, project_name = _project()
    rows = seed_learnings(context.graph, context, project_id, project_name)
    context.progress(f"{len(rows)} bootstrap learnings in project {project_id!r}")


def _system_prompt(context: SeedContext) -> None:
    from .seeders import seed_system_prompt

    project_id, _ = _project()
    written, version, chars = seed_system_prompt(context.graph, project_id)
    action = "written" if written else "unchanged"
    context.progress(
        f"system prompt of project {project_id!r}: {action}, version {version}, {chars} characters"
    )


def _bigquery(context: SeedContext) -> None:
    from .seeders import seed_warehouse

    seed_warehouse(context, required=True)


def _neocarta(context: SeedContext) -> None:
    from .seeders import seed_catalog

    seed_catalog(context, required=True)


@hookimpl
def mkg_register_settings() -> list[Setting]:
    """The warehouse the demo seeds (optional: the demo runs on the graph alone)."""
    return [
        Setting("BIGQUERY_DATASET_ID", "the BigQuery dataset the demo seeds"),
        Setting("BIGQUERY_REGION", "the dataset's location", default="US"),
        Setting("GCP_BILLING_PROJECT_ID", "the project billed for seeding (default: GCP_PROJECT_ID)"),
        Setting("GCP_PROJECT_ID", "the Google Cloud project of the BigQuery dataset"),
        Setting("GCP_SERVICE_ACCOUNT_JSON", "an inline service-account key (JSON)", secret=True),
        Setting(
            "GOOGLE_APPLICATION_CREDENTIALS",
            "a service-account key file (else default credentials)",
        ),
    ]


@hookimpl
def mkg_register_seeders(config: Settings) -> list[Seeder]:
    return [
        Seeder(
            "sales-agent",
            "RoadFlex demo: accounts graph, bootstrap learnings and persona; "
            "BigQuery and neocarta when configured",
            _all,
        ),
        Seeder("sales-agent-graph", "RoadFlex accounts, products, contacts, CSMs and usage", _graph),
        Seeder("sales-agent-learnings", "RoadFlex bootstrap learnings for the current project", _learnings),
        Seeder(
            "sales-agent-prompt",
            "the RoadFlex sales persona as the current project's system prompt",
            _system_prompt,
        ),
        Seeder(
            "sales-agent-bigquery", "the RoadFlex tables in BigQuery, then their neocarta catalog", _bigquery
        ),
        Seeder("sales-agent-neocarta", "the neocarta catalog of the RoadFlex BigQuery dataset", _neocarta),
    ]


@hookimpl
def mkg_register_schema_statements(config: Settings) -> list[SchemaStatement]:
    from .seeders import SCHEMA

    return list(SCHEMA)


@hookimpl
def mkg_register_commands(cli: click.Group) -> None:
    from .demo import demo_command

    cli.add_command(demo_command)
