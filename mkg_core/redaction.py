"""What must never be stored: ``<private>`` spans and credentials. Standard library only.

The hook scrubs every string of a payload before it reaches the local spool, so neither the spool
nor the graph ever holds them. Each rule has cheap literal triggers; its regular expression is
compiled and run only when a trigger occurs in the text, which keeps the hook fast on ordinary
events.

A scrubbed secret becomes ``[REDACTED:<rule>]``; for ``NAME=value`` style assignments the name
stays and only the value is replaced. A private span becomes ``[private]``; an unclosed
``<private>`` hides everything after it.
"""

from __future__ import annotations

import re

PRIVATE_MARK = "[private]"
_PRIVATE_RE = re.compile(r"<private>.*?(?:</private>|\Z)", re.IGNORECASE | re.DOTALL)

#: Names of variables or keys whose value is a credential (matched inside a longer name).
_SECRET_NAME = (
    r"(?:secret|token|passw(?:or)?d|passphrase|pwd|api[_-]?key|apikey|access[_-]?key|private[_-]?key"
    r"|client[_-]?secret|auth[_-]?token|credentials?|session[_-]?key|signing[_-]?key|encryption[_-]?key)"
)

# (rule name, literal triggers, pattern, replacement template). Triggers are matched
# case-sensitively unless written in lower case, in which case the lowered text is searched.
_RULES: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    (
        "private-key",
        ("PRIVATE KEY",),
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
        r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
        "[REDACTED:private-key]",
    ),
    (
        "anthropic-key",
        ("sk-ant-",),
        r"sk-ant-[A-Za-z0-9]{2,10}-[A-Za-z0-9_\-]{20,}",
        "[REDACTED:anthropic-key]",
    ),
    (
        "openai-key",
        ("sk-",),
        r"\bsk-(?:proj-|svcacct-|admin-|or-v1-)?[A-Za-z0-9_\-]{20,}",
        "[REDACTED:api-key]",
    ),
    (
        "aws-access-key",
        ("AKIA", "ASIA", "ABIA", "ACCA"),
        r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",
        "[REDACTED:aws-key]",
    ),
    ("github-token", ("gh",), r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b", "[REDACTED:github-token]"),
    ("github-pat", ("github_pat_",), r"\bgithub_pat_[A-Za-z0-9_]{22,255}", "[REDACTED:github-token]"),
    (
        "gitlab-token",
        ("glpat-", "gldt-", "glrt-"),
        r"\bgl(?:pat|dt|rt)-[A-Za-z0-9_\-]{20,}",
        "[REDACTED:gitlab-token]",
    ),
    ("slack-token", ("xox",), r"\bxox[abposre]-[A-Za-z0-9\-]{10,}", "[REDACTED:slack-token]"),
    (
        "slack-webhook",
        ("hooks.slack.com",),
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]+",
        "[REDACTED:slack-webhook]",
    ),
    ("google-api-key", ("AIza",), r"\bAIza[0-9A-Za-z_\-]{35}", "[REDACTED:google-api-key]"),
    ("google-oauth-secret", ("GOCSPX-",), r"\bGOCSPX-[A-Za-z0-9_\-]{20,}", "[REDACTED:google-oauth]"),
    ("google-oauth-token", ("ya29.",), r"\bya29\.[0-9A-Za-z_\-]{20,}", "[REDACTED:google-oauth]"),
    (
        "stripe-key",
        ("_live_", "_test_"),
        r"\b(?:sk|rk)_(?:live|test)_[0-9a-zA-Z]{16,}",
        "[REDACTED:stripe-key]",
    ),
    ("stripe-webhook", ("whsec_",), r"\bwhsec_[A-Za-z0-9]{24,}", "[REDACTED:stripe-key]"),
    (
        "sendgrid-key",
        ("SG.",),
        r"\bSG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{16,64}",
        "[REDACTED:sendgrid-key]",
    ),
    ("twilio-key", ("SK",), r"\bSK[0-9a-f]{32}\b", "[REDACTED:twilio-key]"),
    ("mailgun-key", ("key-",), r"\bkey-[0-9a-zA-Z]{32}\b", "[REDACTED:mailgun-key]"),
    ("npm-token", ("npm_",), r"\bnpm_[A-Za-z0-9]{36}\b", "[REDACTED:npm-token]"),
    ("pypi-token", ("pypi-",), r"\bpypi-AgE[A-Za-z0-9_\-]{50,}", "[REDACTED:pypi-token]"),
    ("huggingface-token", ("hf_",), r"\bhf_[A-Za-z0-9]{30,}\b", "[REDACTED:huggingface-token]"),
    ("groq-key", ("gsk_",), r"\bgsk_[A-Za-z0-9]{40,}\b", "[REDACTED:api-key]"),
    ("xai-key", ("xai-",), r"\bxai-[A-Za-z0-9]{40,}\b", "[REDACTED:api-key]"),
    ("replicate-token", ("r8_",), r"\br8_[A-Za-z0-9]{30,}\b", "[REDACTED:api-key]"),
    ("perplexity-key", ("pplx-",), r"\bpplx-[A-Za-z0-9]{40,}\b", "[REDACTED:api-key]"),
    (
        "digitalocean-token",
        ("dop_v1_", "doo_v1_"),
        r"\bdo[op]_v1_[a-f0-9]{64}\b",
        "[REDACTED:digitalocean-token]",
    ),
    ("databricks-token", ("dapi",), r"\bdapi[a-f0-9]{32}(?:-\d)?\b", "[REDACTED:databricks-token]"),
    (
        "shopify-token",
        ("shpat_", "shpss_", "shpca_", "shppa_"),
        r"\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}\b",
        "[REDACTED:shopify-token]",
    ),
    ("atlassian-token", ("ATATT",), r"\bATATT[A-Za-z0-9_\-=]{40,}", "[REDACTED:atlassian-token]"),
    ("linear-key", ("lin_api_",), r"\blin_api_[A-Za-z0-9]{32,}\b", "[REDACTED:api-key]"),
    ("notion-token", ("ntn_", "secret_"), r"\b(?:ntn|secret)_[A-Za-z0-9]{40,}\b", "[REDACTED:notion-token]"),
    ("vault-token", ("hvs.", "hvb."), r"\bhv[sb]\.[A-Za-z0-9_\-]{24,}", "[REDACTED:vault-token]"),
    ("postman-key", ("PMAK-",), r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}\b", "[REDACTED:postman-key]"),
    ("age-key", ("AGE-SECRET-KEY-",), r"AGE-SECRET-KEY-1[0-9A-Z]{58}", "[REDACTED:age-key]"),
    ("telegram-token", (":AA",), r"\b\d{8,10}:AA[A-Za-z0-9_\-]{33}\b", "[REDACTED:telegram-token]"),
    (
        "jwt",
        ("eyJ",),
        r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        "[REDACTED:jwt]",
    ),
    (
        "url-password",
        ("://",),
        r"(\b[a-zA-Z][a-zA-Z0-9+.\-]{1,20}://[^\s/:@\"'<>]{1,128}:)[^\s/@\"'<>]{1,256}(@)",
        r"\1[REDACTED:password]\2",
    ),
    (
        "auth-header",
        ("bearer", "basic "),
        r"(?i)(\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/\-]{16,}=*",
        r"\1[REDACTED:auth]",
    ),
    (
        "connection-string",
        ("accountkey=", "sharedaccesskey=", "password=", "pwd="),
        r"(?i)(\b(?:AccountKey|SharedAccessKey|Password|Pwd)=)([^;\s\"']{3,})",
        r"\1[REDACTED:password]",
    ),
    (
        "secret-assignment",
        (
            "secret",
            "token",
            "passw",
            "pwd",
            "api_key",
            "api-key",
            "apikey",
            "access_key",
            "access-key",
            "private_key",
            "credential",
            "session_key",
            "signing_key",
            "encryption_key",
        ),
        # NAME=value, NAME: value, "name": "value" (JSON/YAML), export NAME='value'.
        r"(?i)((?<![A-Za-z0-9])[\"']?[A-Za-z0-9_.\-]*"
        + _SECRET_NAME
        + r"[A-Za-z0-9_.\-]*[\"']?\s*[:=]\s*[\"']?)"
        r"(?!\[REDACTED)(?!(?:true|false|null|none)\b)(?![0-9]+\b)([^\s\"',;}{)\]]{4,})",
        r"\1[REDACTED:secret]",
    ),
)

_compiled: dict[str, re.Pattern[str]] = {}


def _pattern(name: str, source: str) -> re.Pattern[str]:
    pattern = _compiled.get(name)
    if pattern is None:
        pattern = _compiled[name] = re.compile(source, re.DOTALL)
    return pattern


def rule_names() -> list[str]:
    """The names of every credential rule, for documentation and tests."""
    return [rule[0] for rule in _RULES]


def strip_private(text: str) -> str:
    """Replace each ``<private>...</private>`` span (case-insensitive) with ``[private]``."""
    if "<private" not in text and "<PRIVATE" not in text and "<private" not in text.lower():
        return text
    return _PRIVATE_RE.sub(PRIVATE_MARK, text)


def redact_secrets(text: str) -> str:
    """Replace every credential the rules recognise with a ``[REDACTED:<rule>]`` marker."""
    lowered: str | None = None
    for name, triggers, source, replacement in _RULES:
        hit = False
        for trigger in triggers:
            if trigger.islower() or not any(ch.isalpha() for ch in trigger):
                if lowered is None:
                    lowered = text.lower()
                if trigger in lowered:
                    hit = True
                    break
            elif trigger in text:
                hit = True
                break
        if hit:
            text = _pattern(name, source).sub(replacement, text)
            lowered = None
    return text


def scrub(text: str) -> str:
    """Both: private spans first, then credentials."""
    return redact_secrets(strip_private(text))
