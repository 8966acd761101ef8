"""The optional warehouse copy of the dataset (BigQuery) and its catalog (neocarta).

Neither is needed for the demo. Each step first checks its configuration and says exactly what is
missing; ``seed_all`` runs them only when that check passes.

- BigQuery: ``GCP_PROJECT_ID``, ``BIGQUERY_DATASET_ID`` and a Google credential
  (``GOOGLE_APPLICATION_CREDENTIALS``, inline ``GCP_SERVICE_ACCOUNT_JSON`` or application-default
  credentials), plus the ``google-cloud-bigquery`` package (``pip install mkg-sales-agent[bigquery]``).
  Five tables are replaced with the current dataset: accounts, products, account_product_usage,
  account_contacts, account_renewals.
- neocarta: the BigQuery settings above, the ``neocarta`` command, and the embedding provider's key;
  it catalogs the seeded dataset into Neo4j (``neocarta bigquery schema --embeddings``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

from mkg_core.settings import Settings

from .dataset import Dataset

ADC_FILE = Path("~/.config/gcloud/application_default_credentials.json")

# table -> (dataset attribute, description, {column: description})
TABLES: dict[str, tuple[str, str, dict[str, str]]] = {
    "accounts": (
        "accounts",
        "One row per customer account of the RoadFlex enterprise rental book.",
        {
            "id": "Account slug, the join key across tables (e.g. 'accenture').",
            "name": "Company name.",
            "domain": "Primary web domain.",
            "industry": "Industry.",
            "region": "'Global' or 'NA'.",
            "size_class": "'mid', 'ent' or 'strategic'.",
            "employee_count_band": "Employee count band.",
            "trajectory": "'expanding', 'steady', 'at_risk' or 'new'.",
            "seats_total": "Contracted seats over all product lines (latest month).",
            "avg_utilization": "Monthly active users over contracted seats (latest month).",
            "arr_usd": "Annual recurring revenue in USD.",
            "arr_band_usd": "ARR band.",
            "health_score": "Customer health, 5 to 99.",
            "signed_at": "First contract date.",
            "renewal_date": "Next renewal date.",
            "owner_csm": "Customer-success manager who owns the account.",
        },
    ),
    "products": (
        "products",
        "The RoadFlex catalog: programs, add-ons, support plans and services.",
        {
            "sku": "Product key.",
            "name": "Product name.",
            "category": "'program', 'add-on', 'support' or 'services'.",
            "tier": "Program tier (1 Business, 2 Premium/Project Pool, 3 Global); 0 otherwise.",
            "list_price_usd": "List price per seat and year in USD.",
            "launched_at": "Launch date.",
        },
    ),
    "account_product_usage": (
        "usage",
        "Monthly usage per account and product line.",
        {
            "account_id": "Account slug.",
            "sku": "Product key.",
            "month": "First day of the month.",
            "contracted_seats": "Seats under contract.",
            "mau": "Monthly active users.",
            "utilization": "mau / contracted_seats.",
            "monthly_revenue_usd": "Revenue recognised for the month in USD.",
            "last_active_at": "Last activity in the month.",
        },
    ),
    "account_contacts": (
        "contacts",
        "Stakeholders at each account.",
        {
            "contact_id": "Contact key.",
            "account_id": "Account slug.",
            "first_name": "First name.",
            "last_name": "Last name.",
            "email": "Work email.",
            "title": "Job title.",
            "role": "'champion', 'economic_buyer', 'technical' or 'executive'.",
            "is_decision_maker": "Signs or approves the contract.",
            "is_champion": "Advocates RoadFlex internally.",
        },
    ),
    "account_renewals": (
        "renewals",
        "The current contract of each account and its renewal.",
        {
            "renewal_id": "Renewal key.",
            "account_id": "Account slug.",
            "contract_start": "Contract start date.",
            "renewal_date": "Renewal date.",
            "term_months": "Contract term in months.",
            "arr_usd": "ARR under the contract in USD.",
            "auto_renew": "Renews automatically unless cancelled.",
            "status": "Contract status.",
        },
    ),
}


def _google_credentials(settings: Settings) -> str | None:
    if settings.get("GCP_SERVICE_ACCOUNT_JSON"):
        return "GCP_SERVICE_ACCOUNT_JSON"
    credentials = settings.get("GOOGLE_APPLICATION_CREDENTIALS")
    if credentials:
        path = Path(credentials).expanduser()
        return "GOOGLE_APPLICATION_CREDENTIALS" if path.is_file() else None
    return "application-default credentials" if ADC_FILE.expanduser().is_file() else None


def bigquery_problems(settings: Settings) -> list[str]:
    """What stops the BigQuery seeder; empty when it can run."""
    problems = []
    for name, value in (
        ("GCP_PROJECT_ID", settings.get("GCP_PROJECT_ID")),
        ("BIGQUERY_DATASET_ID", settings.get("BIGQUERY_DATASET_ID")),
    ):
        if not value:
            problems.append(f"{name} is not set")
    if settings.get("GOOGLE_APPLICATION_CREDENTIALS") and _google_credentials(settings) is None:
        problems.append(
            "GOOGLE_APPLICATION_CREDENTIALS points to a missing file: "
            f"{settings.get('GOOGLE_APPLICATION_CREDENTIALS')}"
        )
    elif _google_credentials(settings) is None:
        problems.append(
            "no Google credential: set GOOGLE_APPLICATION_CREDENTIALS or GCP_SERVICE_ACCOUNT_JSON, "
            "or run `gcloud auth application-default login`"
        )
    try:
        import google.cloud.bigquery  # type: ignore[import-not-found, import-untyped, unused-ignore]  # noqa: F401
    except ImportError:
        problems.append(
            "the google-cloud-bigquery package is missing: pip install 'mkg-sales-agent[bigquery]'"
        )
    return problems


def neocarta_problems(settings: Settings) -> list[str]:
    """What stops the catalog seeder; empty when it can run."""
    problems = [p for p in bigquery_problems(settings) if "google-cloud-bigquery" not in p]
    try:
        from mkg_neocarta.catalog import problems as catalog_problems
    except ImportError:
        return [*problems, "mkg-neocarta is not installed: pip install mkg-neocarta"]
    return problems + [p for p in catalog_problems(settings, bigquery=True) if p not in problems]


def rows_for(data: Dataset, table: str) -> list[dict[str, Any]]:
    """A table's rows as JSON-ready dicts (dates as ISO strings), columns as declared."""
    attribute, _, columns = TABLES[table]
    return [{column: _json_value(row.get(column)) for column in columns} for row in getattr(data, attribute)]


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    return value


def _bq_type(column: str, sample: Any) -> str:
    if isinstance(sample, bool):
        return "BOOL"
    if isinstance(sample, int):
        return "INT64"
    if isinstance(sample, float):
        return "FLOAT64"
    if isinstance(sample, datetime):
        return "DATETIME"
    if isinstance(sample, date):
        return "DATE"
    return "STRING"


@contextlib.contextmanager
def google_credentials_file(settings: Settings) -> Iterator[None]:
    """Inline service-account JSON becomes a private temporary file for the Google clients."""
    inline = settings.get("GCP_SERVICE_ACCOUNT_JSON")
    if inline is None:
        yield
        return
    fd, path = tempfile.mkstemp(prefix="mkg-sa-", suffix=".json")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(inline)
        previous = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
        os.environ["GOOGLE_APPLICATION_CREDENTIALS"] = path
        try:
            yield
        finally:
            if previous is None:
                os.environ.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
            else:
                os.environ["GOOGLE_APPLICATION_CREDENTIALS"] = previous
    finally:
        Path(path).unlink(missing_ok=True)


def seed_bigquery(settings: Settings, data: Dataset, say: Callable[[str], None]) -> None:
    """Replace the five tables of ``GCP_PROJECT_ID.BIGQUERY_DATASET_ID`` with the dataset."""
    from google.cloud import bigquery  # type: ignore[import-not-found, import-untyped, unused-ignore]

    project, dataset = settings.get("GCP_PROJECT_ID"), settings.get("BIGQUERY_DATASET_ID")
    assert project and dataset
    with google_credentials_file(settings):
        client = bigquery.Client(project=settings.get("GCP_BILLING_PROJECT_ID") or project)
        dataset_ref = bigquery.Dataset(f"{project}.{dataset}")
        dataset_ref.location = settings.get("BIGQUERY_REGION") or "US"
        dataset_ref.description = "RoadFlex enterprise rental book (MKG sales-agent demo)"
        client.create_dataset(dataset_ref, exists_ok=True)
        for table, (attribute, description, columns) in TABLES.items():
            source = getattr(data, attribute)
            schema = [
                bigquery.SchemaField(name, _bq_type(name, source[0].get(name)), description=text)
                for name, text in columns.items()
            ]
            config = bigquery.LoadJobConfig(
                schema=schema,
                source_format=bigquery.SourceFormat.NEWLINE_DELIMITED_JSON,
                write_disposition=bigquery.WriteDisposition.WRITE_TRUNCATE,
            )
            table_id = f"{dataset_ref.dataset_id}.{table}"
            rows = rows_for(data, table)
            client.load_table_from_json(rows, f"{project}.{table_id}", job_config=config).result()
            bq_table = client.get_table(f"{project}.{table_id}")
            bq_table.description = description
            client.update_table(bq_table, ["description"])
            say(f"bigquery: {table_id} <- {len(rows)} rows")


def run_neocarta(settings: Settings, say: Callable[[str], None]) -> None:
    """Catalog the seeded dataset into Neo4j with neocarta (through mkg-neocarta), embeddings included."""
    from mkg_neocarta.catalog import load_bigquery

    load_bigquery(settings, say)
