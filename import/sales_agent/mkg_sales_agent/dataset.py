"""The RoadFlex dataset: a deterministic book of 48 enterprise car-rental accounts.

RoadFlex sells corporate rental-car programs (business, premium, global, project pools), add-ons,
support plans and services to large companies. The dataset is what a sales or customer-success
team would have on its book: accounts with their size, health and trajectory, products in use with
contracted seats against monthly active users, contacts, the CSM who owns each account, a monthly
usage series and the renewal of each contract.

Every value comes from a random generator seeded per account (``SEED`` plus the account id, with a
suffix per concern), so the same as-of date always gives the same data and adding an account leaves
the others alone. Dates are relative to the as-of date (default: today), so renewals stay upcoming
whenever the demo runs.

Standard library only: ``python import/sales_agent/seed_data.py`` previews it without a database.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

SEED = 20260601
MONTHS_BACK = 24
RENEWAL_SOON_DAYS = 90

# (id, name, domain, industry, region, size class)
ACCOUNTS: tuple[tuple[str, str, str, str, str, str], ...] = (
    ("accenture", "Accenture", "accenture.com", "Professional Services", "Global", "strategic"),
    ("deloitte", "Deloitte", "deloitte.com", "Professional Services", "Global", "strategic"),
    ("pwc", "PwC", "pwc.com", "Professional Services", "Global", "strategic"),
    ("kpmg", "KPMG", "kpmg.com", "Professional Services", "Global", "strategic"),
    ("ey", "EY", "ey.com", "Professional Services", "Global", "strategic"),
    ("mckinsey", "McKinsey & Company", "mckinsey.com", "Consulting", "Global", "strategic"),
    ("bcg", "Boston Consulting Group", "bcg.com", "Consulting", "Global", "ent"),
    ("bain", "Bain & Company", "bain.com", "Consulting", "Global", "mid"),
    ("salesforce", "Salesforce", "salesforce.com", "Software", "Global", "strategic"),
    ("oracle", "Oracle", "oracle.com", "Software", "Global", "strategic"),
    ("sap", "SAP", "sap.com", "Software", "Global", "ent"),
    ("cisco", "Cisco", "cisco.com", "Technology", "Global", "strategic"),
    ("ibm", "IBM", "ibm.com", "Technology", "Global", "strategic"),
    ("microsoft", "Microsoft", "microsoft.com", "Technology", "Global", "strategic"),
    ("johnson-controls", "Johnson Controls", "johnsoncontrols.com", "Field Services", "NA", "strategic"),
    ("otis", "Otis", "otis.com", "Field Services", "NA", "ent"),
    ("schindler", "Schindler", "schindler.com", "Field Services", "NA", "mid"),
    (
        "stanley-black-decker",
        "Stanley Black & Decker",
        "stanleyblackanddecker.com",
        "Manufacturing",
        "NA",
        "ent",
    ),
    ("caterpillar", "Caterpillar", "caterpillar.com", "Manufacturing", "NA", "strategic"),
    ("abbott", "Abbott", "abbott.com", "Healthcare", "NA", "ent"),
    ("unitedhealth", "UnitedHealth Group", "unitedhealthgroup.com", "Healthcare", "NA", "strategic"),
    ("humana", "Humana", "humana.com", "Healthcare", "NA", "ent"),
    ("medtronic", "Medtronic", "medtronic.com", "MedTech", "Global", "ent"),
    ("thermo-fisher", "Thermo Fisher Scientific", "thermofisher.com", "Life Sciences", "Global", "ent"),
    ("pfizer", "Pfizer", "pfizer.com", "Pharmaceuticals", "Global", "strategic"),
    ("novartis", "Novartis", "novartis.com", "Pharmaceuticals", "Global", "ent"),
    ("merck", "Merck", "merck.com", "Pharmaceuticals", "Global", "ent"),
    ("astrazeneca", "AstraZeneca", "astrazeneca.com", "Pharmaceuticals", "Global", "ent"),
    ("allstate", "Allstate", "allstate.com", "Insurance", "NA", "ent"),
    ("state-farm", "State Farm", "statefarm.com", "Insurance", "NA", "strategic"),
    ("liberty-mutual", "Liberty Mutual", "libertymutual.com", "Insurance", "NA", "ent"),
    ("travelers", "Travelers", "travelers.com", "Insurance", "NA", "mid"),
    ("jpmorgan", "JPMorgan Chase", "jpmorganchase.com", "Financial Services", "Global", "strategic"),
    ("bank-of-america", "Bank of America", "bankofamerica.com", "Financial Services", "NA", "strategic"),
    ("wells-fargo", "Wells Fargo", "wellsfargo.com", "Financial Services", "NA", "ent"),
    ("walmart", "Walmart", "walmart.com", "Retail", "NA", "strategic"),
    ("target", "Target", "target.com", "Retail", "NA", "ent"),
    ("best-buy", "Best Buy", "bestbuy.com", "Retail", "NA", "mid"),
    ("home-depot", "The Home Depot", "homedepot.com", "Retail", "NA", "strategic"),
    ("lowes", "Lowe's", "lowes.com", "Retail", "NA", "mid"),
    ("shell", "Shell", "shell.com", "Energy", "Global", "strategic"),
    ("chevron", "Chevron", "chevron.com", "Energy", "Global", "strategic"),
    ("duke-energy", "Duke Energy", "duke-energy.com", "Utilities", "NA", "ent"),
    ("nextera-energy", "NextEra Energy", "nexteraenergy.com", "Utilities", "NA", "mid"),
    ("jacobs", "Jacobs", "jacobs.com", "Engineering", "Global", "ent"),
    ("aecom", "AECOM", "aecom.com", "Engineering", "Global", "mid"),
    ("turner", "Turner Construction", "turnerconstruction.com", "Construction", "NA", "mid"),
    ("bechtel", "Bechtel", "bechtel.com", "Construction", "Global", "strategic"),
)

# (name, share of the book)
CSMS: tuple[tuple[str, float], ...] = (
    ("Marcus Wei", 0.30),
    ("Priya Shah", 0.20),
    ("Diego Ramirez", 0.20),
    ("Sofia Müller", 0.15),
    ("Hannah Park", 0.15),
)


@dataclass(frozen=True)
class SizeClass:
    seats: tuple[int, int]  # contracted seats per product line
    products: tuple[int, int]
    employee_band: str
    program: str  # the program such an account normally buys
    support_attach: float
    services_attach: float
    contacts: int


SIZES = {
    "mid": SizeClass((40, 160), (2, 4), "201-1000", "roadflex-premium", 0.60, 0.30, 3),
    "ent": SizeClass((150, 650), (3, 6), "1001-5000", "roadflex-global", 0.85, 0.50, 3),
    "strategic": SizeClass((500, 1600), (4, 8), "5001+", "roadflex-global", 0.95, 0.70, 4),
}

# (sku, name, category, tier, list price per seat and year in USD, launched)
PRODUCTS: tuple[tuple[str, str, str, int, int, str], ...] = (
    ("roadflex-business", "RoadFlex Business", "program", 1, 1800, "2022-01-01"),
    ("roadflex-premium", "RoadFlex Premium", "program", 2, 3200, "2022-01-01"),
    ("roadflex-global", "RoadFlex Global", "program", 3, 6200, "2022-01-01"),
    ("roadflex-project-pool", "RoadFlex Project Pool", "program", 2, 4800, "2022-01-01"),
    ("damage-waiver", "Damage Waiver", "add-on", 0, 850, "2022-06-01"),
    ("liability-cover", "Liability Cover", "add-on", 0, 950, "2022-06-01"),
    ("airport-delivery", "Airport Delivery", "add-on", 0, 1200, "2022-06-01"),
    ("ev-hybrid-upgrade", "EV & Hybrid Upgrade", "add-on", 0, 1500, "2022-06-01"),
    ("fuel-service", "Fuel Service", "add-on", 0, 450, "2022-06-01"),
    ("mileage-package", "Mileage Package", "add-on", 0, 700, "2022-06-01"),
    ("corporate-billing", "Corporate Billing", "add-on", 0, 900, "2022-06-01"),
    ("driver-verification", "Driver Verification", "add-on", 0, 550, "2022-06-01"),
    ("roadside-plus", "Roadside Plus", "add-on", 0, 650, "2022-06-01"),
    ("one-way-rentals", "One-Way Rentals", "add-on", 0, 800, "2022-06-01"),
    ("chauffeur-network", "Chauffeur Network", "add-on", 0, 2200, "2022-06-01"),
    ("support-priority", "Priority Support", "support", 0, 1200, "2022-01-01"),
    ("support-247", "24/7 Support", "support", 0, 4200, "2022-01-01"),
    ("implementation-pack", "Implementation Pack", "services", 0, 3000, "2023-01-01"),
    ("travel-policy-design", "Travel Policy Design", "services", 0, 4500, "2023-01-01"),
    ("mobility-analytics", "Mobility Analytics", "services", 0, 5200, "2023-01-01"),
    ("beta-access", "Beta Access", "services", 0, 0, "2023-01-01"),
)
PROGRAM_LADDER = ("roadflex-business", "roadflex-premium", "roadflex-global")
ADD_ONS = tuple(p[0] for p in PRODUCTS if p[2] == "add-on")

# trajectory: (weight, MAU/seat ratio at the start, at the end of the series, health base)
TRAJECTORIES: dict[str, tuple[float, tuple[float, float], tuple[float, float] | None, int]] = {
    "expanding": (0.30, (0.45, 0.65), (1.05, 1.45), 84),
    "steady": (0.40, (0.60, 0.82), None, 73),  # ends near where it started
    "at_risk": (0.20, (0.75, 0.95), (0.28, 0.50), 38),
    "new": (0.10, (0.15, 0.30), (0.55, 0.80), 64),
}

ROLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("champion", ("Global Travel Manager", "Travel Program Lead", "Mobility Program Manager")),
    ("economic_buyer", ("VP Procurement", "Director of Indirect Procurement", "Head of Corporate Services")),
    ("technical", ("Travel Systems Administrator", "Expense Platform Owner", "IT Business Partner, Finance")),
    ("executive", ("Chief Procurement Officer", "CFO", "Chief Operating Officer")),
)
FIRST_NAMES = (
    "Alex", "Jordan", "Morgan", "Taylor", "Casey", "Riley", "Jamie", "Avery", "Quinn", "Rowan",
    "Elena", "Marco", "Aisha", "Kenji", "Lena", "Omar", "Grace", "Ravi", "Nora", "Felix",
    "Maya", "Lucas", "Ingrid", "Samuel",
)  # fmt: skip
LAST_NAMES = (
    "Bennett", "Okafor", "Lindqvist", "Moreau", "Tanaka", "Patel", "Garcia", "Novak", "Schmidt",
    "Kowalski", "Adeyemi", "Rossi", "Nguyen", "Fischer", "Haddad", "Brennan", "Costa", "Ivanova",
    "Sato", "Whitaker",
)  # fmt: skip


@dataclass
class Dataset:
    """Rows ready for Neo4j parameters or newline-delimited JSON (dates as ``date`` objects)."""

    as_of: date
    accounts: list[dict[str, Any]] = field(default_factory=list)
    products: list[dict[str, Any]] = field(default_factory=list)
    usage: list[dict[str, Any]] = field(default_factory=list)
    contacts: list[dict[str, Any]] = field(default_factory=list)
    renewals: list[dict[str, Any]] = field(default_factory=list)

    def latest_usage(self) -> list[dict[str, Any]]:
        """The newest month of each account's product lines."""
        newest = max(row["month"] for row in self.usage)
        return [row for row in self.usage if row["month"] == newest]

    def renewing_within(self, days: int = RENEWAL_SOON_DAYS) -> list[dict[str, Any]]:
        horizon = self.as_of + timedelta(days=days)
        return sorted(
            (a for a in self.accounts if a["renewal_date"] <= horizon),
            key=lambda a: a["renewal_date"],
        )


def _rng(account_id: str, concern: str) -> random.Random:
    return random.Random(f"{SEED}:{account_id}:{concern}")


def _month_starts(as_of: date, count: int) -> list[date]:
    months = []
    year, month = as_of.year, as_of.month
    for _ in range(count):
        months.append(date(year, month, 1))
        year, month = (year, month - 1) if month > 1 else (year - 1, 12)
    return months[::-1]


def _weighted(rng: random.Random, options: dict[str, float]) -> str:
    return rng.choices(list(options), weights=list(options.values()))[0]


def _arr_band(arr: float) -> str:
    for limit, band in (
        (100_000, "<100k"),
        (500_000, "100k-500k"),
        (1_000_000, "500k-1m"),
        (5_000_000, "1m-5m"),
    ):
        if arr < limit:
            return band
    return "5m+"


def _pick_products(account_id: str, size: SizeClass) -> list[str]:
    rng = _rng(account_id, "products")
    program = size.program
    if rng.random() < 0.22:  # one tier below what the size calls for: an upsell waiting to happen
        program = PROGRAM_LADDER[max(PROGRAM_LADDER.index(program) - 1, 0)]
    skus = [program]
    if rng.random() < size.support_attach:
        skus.append(
            "support-247" if size.program == "roadflex-global" and rng.random() < 0.6 else "support-priority"
        )
    if rng.random() < size.services_attach:
        skus.append(rng.choice(("implementation-pack", "travel-policy-design", "mobility-analytics")))
    wanted = rng.randint(*size.products)
    add_ons = list(ADD_ONS)
    rng.shuffle(add_ons)
    while len(skus) < wanted and add_ons:
        skus.append(add_ons.pop())
    return skus


def build_dataset(as_of: date | None = None, months_back: int = MONTHS_BACK) -> Dataset:
    """The whole book, deterministic for a given ``as_of`` (default: today)."""
    as_of = as_of or date.today()
    data = Dataset(as_of=as_of)
    prices = {sku: price for sku, _, _, _, price, _ in PRODUCTS}
    for sku, name, category, tier, price, launched in PRODUCTS:
        data.products.append(
            {
                "sku": sku,
                "name": name,
                "category": category,
                "tier": tier,
                "list_price_usd": price,
                "launched_at": date.fromisoformat(launched),
            }
        )
    months = _month_starts(as_of, months_back)
    csm_weights = dict(CSMS)
    for account_id, name, domain, industry, region, size_name in ACCOUNTS:
        size = SIZES[size_name]
        rng = _rng(account_id, "profile")
        trajectory = _weighted(rng, {key: value[0] for key, value in TRAJECTORIES.items()})
        _, start_band, end_band, health_base = TRAJECTORIES[trajectory]

        usage_rng = _rng(account_id, "usage")
        active_months = months[-usage_rng.randint(6, 10) :] if trajectory == "new" else months
        skus = _pick_products(account_id, size)
        churned = skus[-1] if trajectory == "at_risk" and len(skus) > 1 and usage_rng.random() < 0.5 else None
        latest: list[dict[str, Any]] = []
        for sku in skus:
            seats = usage_rng.randint(*size.seats)
            start = usage_rng.uniform(*start_band)
            end = usage_rng.uniform(*end_band) if end_band else start + usage_rng.uniform(-0.05, 0.08)
            discount = usage_rng.uniform(0.85, 1.0)
            for index, month in enumerate(active_months):
                share = index / max(len(active_months) - 1, 1)
                ratio = max((start + (end - start) * share) * usage_rng.uniform(0.95, 1.05), 0.0)
                gone = sku == churned and index >= len(active_months) - 2
                mau = 0 if gone else round(seats * ratio)
                revenue = 0.0 if gone else round(prices[sku] / 12 * seats * discount, 2)
                last_active = datetime(
                    month.year, month.month, usage_rng.randint(1, 28), usage_rng.randint(6, 20), 0, 0
                )
                row = {
                    "account_id": account_id,
                    "sku": sku,
                    "month": month,
                    "contracted_seats": seats,
                    "mau": mau,
                    "utilization": round(mau / seats, 3),
                    "monthly_revenue_usd": revenue,
                    "last_active_at": last_active,
                }
                data.usage.append(row)
            latest.append(row)

        seats_total = sum(r["contracted_seats"] for r in latest)
        avg_utilization = round(sum(r["mau"] for r in latest) / seats_total, 3)
        arr = round(12 * sum(r["monthly_revenue_usd"] for r in latest), 2)
        health_rng = _rng(account_id, "health")
        health = round(health_base + (avg_utilization - 0.8) * 15 + health_rng.randint(-5, 5))
        signed_at = (
            active_months[0]
            if trajectory == "new"
            else date(2022, 6, 1) + timedelta(days=rng.randint(0, 1100))
        )
        renewal_rng = _rng(account_id, "renewal")
        if trajectory == "at_risk":
            days, auto_renew = renewal_rng.randint(5, 75), renewal_rng.random() < 0.35
        elif trajectory == "new":
            days, auto_renew = renewal_rng.randint(180, 420), renewal_rng.random() < 0.8
        else:
            days, auto_renew = renewal_rng.randint(20, 360), renewal_rng.random() < 0.7
        renewal_date = as_of + timedelta(days=days)
        term = renewal_rng.choice((12, 12, 12, 24, 36))
        data.renewals.append(
            {
                "renewal_id": f"{account_id}-r1",
                "account_id": account_id,
                "contract_start": signed_at,
                "renewal_date": renewal_date,
                "term_months": term,
                "arr_usd": arr,
                "auto_renew": auto_renew,
                "status": "active",
            }
        )
        data.accounts.append(
            {
                "id": account_id,
                "name": name,
                "domain": domain,
                "industry": industry,
                "region": region,
                "size_class": size_name,
                "employee_count_band": size.employee_band,
                "trajectory": trajectory,
                "seats_total": seats_total,
                "avg_utilization": avg_utilization,
                "arr_usd": arr,
                "arr_band_usd": _arr_band(arr),
                "health_score": min(max(health, 5), 99),
                "signed_at": signed_at,
                "renewal_date": renewal_date,
                "owner_csm": _weighted(rng, csm_weights),
                "products": skus,
                "churned_sku": churned,
            }
        )
        contact_rng = _rng(account_id, "contacts")
        for n in range(size.contacts):
            role, titles = ROLES[n % len(ROLES)]
            first, last = contact_rng.choice(FIRST_NAMES), contact_rng.choice(LAST_NAMES)
            data.contacts.append(
                {
                    "contact_id": f"{account_id}-c{n + 1}",
                    "account_id": account_id,
                    "first_name": first,
                    "last_name": last,
                    "email": f"{first.lower()}.{last.lower()}@{domain}",
                    "title": contact_rng.choice(titles),
                    "role": role,
                    "is_decision_maker": role in ("economic_buyer", "executive"),
                    "is_champion": role == "champion",
                }
            )
    return data


def at_risk(account: dict[str, Any]) -> bool:
    """The renewal-risk play's test: declining, unhealthy, or a product line gone quiet."""
    return account["trajectory"] == "at_risk" or account["health_score"] < 50 or bool(account["churned_sku"])


def preview(data: Dataset) -> str:
    """A readable summary: counts, distributions, renewals soon, one sample account."""
    lines = [
        f"RoadFlex dataset as of {data.as_of.isoformat()} (seed {SEED})",
        f"  {len(data.accounts)} accounts, {len(data.products)} products, {len(data.contacts)} contacts, "
        f"{len(data.usage)} monthly usage rows, {len(data.renewals)} renewals",
    ]
    for title, key in (("size", "size_class"), ("trajectory", "trajectory"), ("CSM", "owner_csm")):
        counts = Counter(a[key] for a in data.accounts)
        lines.append(f"  by {title}: " + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    soon = data.renewing_within()
    lines.append(f"  renewing within {RENEWAL_SOON_DAYS} days: {len(soon)}")
    for account in soon:
        flag = "  AT RISK" if at_risk(account) else ""
        lines.append(
            f"    {account['renewal_date'].isoformat()}  {account['name']:<26}"
            f" health {account['health_score']:>2}  utilization {account['avg_utilization']:.2f}{flag}"
        )
    sample = next(a for a in data.accounts if a["id"] == "accenture")
    lines.append("  sample: " + ", ".join(f"{k}={v}" for k, v in sample.items()))
    return "\n".join(lines)
