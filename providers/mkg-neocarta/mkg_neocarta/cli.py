"""``mkg neocarta``: load a data catalog with neocarta and see what the tools need."""

from __future__ import annotations

import json
from pathlib import Path

import click

from mkg_core.cli import App, pass_app
from mkg_core.errors import ConfigError, MkgError
from mkg_core.settings import Settings


def _settings(app: App) -> Settings:
    """The settings as ``mkg`` resolved them (its --db-url and the other connection flags count)."""
    try:
        return app.settings()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


@click.group("neocarta")
def neocarta_group() -> None:
    """The neocarta data catalog: load it into Neo4j, check what its tools need."""


@neocarta_group.command("load")
@click.option(
    "--csv",
    "csv_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Load a catalog described in neocarta's CSV files instead of the BigQuery dataset.",
)
@pass_app
def load_command(app: App, csv_dir: Path | None) -> None:
    """Catalog GCP_PROJECT_ID.BIGQUERY_DATASET_ID (or --csv DIR) into Neo4j, embeddings included.

    Idempotent: run it again after the schema changed.
    """
    from .catalog import load_bigquery, load_csv

    settings = _settings(app)
    say = lambda line: click.echo(line, err=True)  # noqa: E731
    try:
        summary = load_csv(settings, csv_dir, say) if csv_dir else load_bigquery(settings, say)
    except MkgError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(json.dumps(summary, indent=2, default=str))


@neocarta_group.command("status")
@pass_app
def status_command(app: App) -> None:
    """Say whether the neocarta_* tools mount, and what is missing if not."""
    from .locate import command
    from .tools import missing

    settings = _settings(app)
    lacking = missing(settings)
    server = command("neocarta-mcp", settings)
    click.echo(f"neocarta-mcp: {' '.join(server) if server else 'not found'}")
    if lacking:
        click.echo("the neocarta_* tools are not mounted; missing:")
        for item in lacking:
            click.echo(f"  - {item}")
        raise SystemExit(1)
    click.echo("the neocarta_* tools are mounted")
