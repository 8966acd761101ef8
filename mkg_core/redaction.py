"""What must never be stored: ``<private>`` spans and credentials. Standard library only.

This is the one scrubber. Every way into memory passes through it: the hook scrubs every key and
string of a payload before it reaches the local spool; the worker scrubs again what it reads from
elsewhere (transcripts), what an LLM answers (extraction, consolidation, error patterns), what an
MCP tool is asked to write, and what providers ingest. Nothing holds a secret that it missed.

Each rule has cheap literal triggers; its regular expression is compiled and run only when a
trigger occurs in the text, which keeps the hook fast on ordinary events. A secret hidden behind
escapes (``\\u003c``, ``&lt;``) or inside JSON carried in a string is found too: :func:`scrub`
looks again at the unescaped text, and :func:`scrub_value` scrubs JSON strings as the structure
they hold, keys included.

A scrubbed secret becomes ``[REDACTED:<rule>]``; for ``NAME=value`` style assignments the name
stays and only the value is replaced. A private span becomes ``[private]``; an unclosed
``<private>`` hides everything after it.
"""

from __future__ import annotations

import re

PRIVATE_MARK = "[private]"
_PRIVATE_RE = re.compile(r"<\s*private\b[^>]*>.*?(?:<\s*/\s*private\s*>|\Z)", re.IGNORECASE | re.DOTALL)

#: Names of variables or keys whose value is a credential (matched inside a longer name).
_SECRET_NAME = (
    r"(?:secret|token|passw(?:or)?d|passphrase|pwd|(?<![a-z])pass(?![a-z])|api[_-]?key|apikey"
    r"|access[_-]?key|private[_-]?key|client[_-]?secret|auth[_-]?token|credentials?|session[_-]?key"
    r"|signing[_-]?key|encryption[_-]?key|master[_-]?key|app[_-]?key|license[_-]?key|hmac[_-]?key"
    r"|jwt[_-]?key|deploy[_-]?key|secret[_-]?key|service[_-]?key|account[_-]?key|webhook[_-]?url)"
)
#: A quote, possibly escaped (JSON inside a JSON string, or a ``\u0022`` escape).
_QUOTE = r"(?:\\{0,3}[\"']|\\u0022|\\u0027)"
_Q = _QUOTE + "?"

# (rule name, literal triggers, pattern, replacement: a template, or the name of a function in
# _FUNCTIONS). Triggers are matched case-sensitively unless written in lower case, in which case the
# lowered text is searched.
_RULES: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    (
        "private-key",
        ("PRIVATE KEY",),
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
        r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
        "[REDACTED:private-key]",
    ),
    (
        "putty-key",
        ("PuTTY-User-Key-File",),
        r"PuTTY-User-Key-File-\d+:.*?(?:Private-MAC:[ \t]*[0-9a-fA-F]+|\Z)",
        "[REDACTED:private-key]",
    ),
    (
        "base64-private-key",
        ("LS0tLS1CRUdJTi",),
        r"LS0tLS1CRUdJTi[A-Za-z0-9+/=]{16,}(?:\s*[A-Za-z0-9+/=]{16,})*",
        "base64-pem",
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
        ("glpat-", "gldt-", "glrt-", "glptt-", "gloas-"),
        r"\bgl(?:pat|dt|rt|ptt|oas)-[A-Za-z0-9_\-]{20,}",
        "[REDACTED:gitlab-token]",
    ),
    (
        "slack-token",
        ("xox", "xapp-"),
        r"\b(?:xox[abposre]|xapp)-[A-Za-z0-9\-]{10,}",
        "[REDACTED:slack-token]",
    ),
    (
        "slack-webhook",
        ("hooks.slack.com",),
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]+",
        "[REDACTED:slack-webhook]",
    ),
    (
        "discord-webhook",
        ("/api/webhooks/",),
        r"https://(?:\w+\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_\-]+",
        "[REDACTED:discord-webhook]",
    ),
    (
        "discord-bot-token",
        ("discord",),
        r"\b[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}\b",
        "[REDACTED:discord-token]",
    ),
    ("google-api-key", ("AIza",), r"\bAIza[0-9A-Za-z_\-]{35}", "[REDACTED:google-api-key]"),
    ("google-oauth-secret", ("GOCSPX-",), r"\bGOCSPX-[A-Za-z0-9_\-]{20,}", "[REDACTED:google-oauth]"),
    ("google-oauth-token", ("ya29.",), r"\bya29\.[0-9A-Za-z_\-]{20,}", "[REDACTED:google-oauth]"),
    (
        "stripe-key",
        ("_live_", "_test_"),
        r"\b(?:sk|rk|pk)_(?:live|test)_[0-9a-zA-Z]{16,}",
        "[REDACTED:stripe-key]",
    ),
    ("stripe-webhook", ("whsec_",), r"\bwhsec_[A-Za-z0-9]{24,}", "[REDACTED:stripe-key]"),
    (
        "sendgrid-key",
        ("SG.",),
        r"\bSG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{16,64}",
        "[REDACTED:sendgrid-key]",
    ),
    ("twilio-key", ("SK", "AC"), r"\b(?:SK|AC)[0-9a-f]{32}\b", "[REDACTED:twilio-key]"),
    ("mailgun-key", ("key-",), r"\bkey-[0-9a-zA-Z]{32}\b", "[REDACTED:mailgun-key]"),
    ("npm-token", ("npm_",), r"\bnpm_[A-Za-z0-9]{36}\b", "[REDACTED:npm-token]"),
    ("npmrc-auth", ("_auth",), r"(?i)(\b_auth\s*=\s*)(\S{8,})", r"\1[REDACTED:secret]"),
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
    ("newrelic-key", ("NRAK-", "NRII-"), r"\bNR(?:AK|II)-[A-Z0-9]{27}\b", "[REDACTED:api-key]"),
    ("grafana-token", ("glsa_", "glc_"), r"\bgl(?:sa|c)_[A-Za-z0-9_+/=\-]{32,}", "[REDACTED:api-key]"),
    ("sentry-token", ("sntrys_", "sntryu_"), r"\bsntry[su]_[A-Za-z0-9_+/=\-]{40,}", "[REDACTED:api-key]"),
    (
        "planetscale-token",
        ("pscale_",),
        r"\bpscale_(?:pw|tkn|oauth)_[A-Za-z0-9_\-.]{32,}",
        "[REDACTED:api-key]",
    ),
    ("fly-token", ("fo1_", "fm2_"), r"\bf(?:o1|m2)_[A-Za-z0-9_\-+/=]{40,}", "[REDACTED:api-key]"),
    (
        "terraform-token",
        (".atlasv1.",),
        r"\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_\-]{60,}",
        "[REDACTED:api-key]",
    ),
    (
        "doppler-token",
        ("dp.",),
        r"\bdp\.(?:st|ct|sa|scim|audit|pt)\.[A-Za-z0-9_\-.]{40,}",
        "[REDACTED:api-key]",
    ),
    ("onepassword-token", ("ops_",), r"\bops_[A-Za-z0-9_\-]{40,}", "[REDACTED:api-key]"),
    (
        "azure-client-secret",
        ("Q~",),
        r"\b[A-Za-z0-9_~.\-]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}",
        "[REDACTED:azure-secret]",
    ),
    ("twitter-bearer", ("AAAAAAAAAAAAAAAAAAAA",), r"\bA{20,}[A-Za-z0-9%]{30,}", "[REDACTED:api-key]"),
    (
        "jwt",
        ("eyJ",),
        r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        "[REDACTED:jwt]",
    ),
    (
        "url-password",
        ("://",),
        # scheme://user:password@ (the user may be empty: redis://:pw@host); the password runs to
        # the last @ before the host, so one holding an @ is hidden whole.
        r"(\b[a-zA-Z][a-zA-Z0-9+.\-]{1,20}://[^\s/:@\"'<>]{0,128}:)[^\s/\"'<>]{1,256}(@)",
        r"\1[REDACTED:password]\2",
    ),
    (
        "azure-sas",
        ("sig=",),
        r"(?i)([?&]sig=)[A-Za-z0-9%+/=]{10,}",
        r"\1[REDACTED:signature]",
    ),
    (
        "auth-header",
        ("bearer", "basic ", "authorization", "ssws "),
        r"(?i)(\b(?:authorization|proxy-authorization)\s*[:=]\s*"
        + _Q
        + r"(?:token|bearer|basic|digest|apikey|api-key|key|ssws|negotiate|aws4-hmac-sha256)?\s*)"
        r"(?!\[REDACTED)[^\s\"'\\,;]{8,}"
        r"|(\b(?:bearer|basic|ssws)\s+)(?!\[REDACTED)[A-Za-z0-9._~+/\-]{16,}=*",
        "auth-header",
    ),
    (
        "cookie-header",
        ("cookie",),
        r"(?i)(\b(?:set-)?cookie\s*:\s*)(?!\[REDACTED)[^\s\"\\][^\r\n\"\\]{3,}",
        r"\1[REDACTED:cookie]",
    ),
    (
        "docker-auth",
        ('"auth', "\\u0022auth"),
        "(" + _QUOTE + r"auth" + _QUOTE + r"\s*:\s*" + _QUOTE + r")[A-Za-z0-9+/=]{8,}",
        r"\1[REDACTED:secret]",
    ),
    (
        "curl-user",
        ("-u", "--user"),
        r"(\b(?:curl|wget|http)\b[^\n]{0,400}?\s(?:-u|--user|--http-user)[\s=]+[\"']?[^\s:\"']+:)[^\s\"']+",
        r"\1[REDACTED:password]",
    ),
    (
        "mysql-password",
        ("mysql", "mariadb"),
        r"(\b(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n]{0,400}?\s-p)(?!\s)[\"']?[^\s\"']+[\"']?",
        r"\1[REDACTED:password]",
    ),
    (
        "sshpass",
        ("sshpass",),
        r"(\bsshpass\b[^\n]{0,400}?\s-p\s*)[\"']?[^\s\"']+[\"']?",
        r"\1[REDACTED:password]",
    ),
    (
        "docker-login",
        ("docker", "podman", "helm"),
        r"(\b(?:docker|podman|helm(?:\s+registry)?)\s+login\b[^\n]{0,400}?\s-p\s+)[\"']?(?!\[REDACTED)[^\s\"']+[\"']?",
        r"\1[REDACTED:password]",
    ),
    (
        "secret-flag",
        ("-pass", "-token", "-api", "-secret", "-access"),  # the flag's last word follows a "-"
        r"(?i)((?<![A-Za-z0-9-])--(?:[a-z0-9]+-)*(?:password|passwd|pass|token|api-key|apikey|secret"
        r"|client-secret|access-key|secret-key)\s+)[\"']?(?!\[REDACTED)(?!-)[^\s\"']{4,}[\"']?",
        r"\1[REDACTED:secret]",
    ),
    (
        "netrc",
        ("machine",),
        r"(?i)(\bmachine\s+\S+\s+(?:login\s+\S+\s+)?(?:account\s+\S+\s+)?password\s+)(?!\[REDACTED)\S+",
        r"\1[REDACTED:password]",
    ),
    (
        "pgpass",
        (":5432:", ":5433:", ":*:"),
        r"(?m)(?:^|(?<=\s))([^\s:#]+:(?:\d+|\*):[^\s:]+:[^\s:]+:)(?!\[REDACTED)\S+(?=\s|$)",
        r"\1[REDACTED:password]",
    ),
    (
        "connection-string",
        ("accountkey=", "sharedaccesskey=", "password=", "pwd="),
        r"(?i)(\b(?:AccountKey|SharedAccessKey|Password|Pwd)=)(?!\[REDACTED)([^;\s\"'&\\]{3,})",
        r"\1[REDACTED:password]",
    ),
    (
        "secret-assignment",
        (
            "secret",
            "token",
            "pass",
            "pwd",
            "api_key",
            "api-key",
            "apikey",
            "_key",
            "-key",
            "access_key",
            "credential",
            "webhook_url",
        ),
        # NAME=value, NAME: value, "name": "value" (JSON/YAML, also escaped inside a JSON string),
        # export NAME='value'.
        r"(?i)((?<![A-Za-z0-9])"
        + _Q
        + r"[A-Za-z0-9_.\-]*"
        + _SECRET_NAME
        + r"[A-Za-z0-9_.\-]*"
        + _Q
        + r"\s*[:=]\s*"
        + _Q
        + r")(?!\[REDACTED)(?!(?:true|false|null|none)\b)(?![0-9]+\b)([^\s\"',;}{)\]\\]{4,})",
        r"\1[REDACTED:secret]",
    ),
)

_compiled: dict[str, re.Pattern[str]] = {}


def _pattern(name: str, source: str) -> re.Pattern[str]:
    pattern = _compiled.get(name)
    if pattern is None:
        pattern = _compiled[name] = re.compile(source, re.DOTALL)
    return pattern


def _base64_pem(match: re.Match[str]) -> str:
    """A base64 block that decodes to a PEM private key (a Kubernetes secret, say) goes whole."""
    import base64
    import binascii

    blob = re.sub(r"\s+", "", match.group(0))
    head = blob[: len(blob) - len(blob) % 4][:120]
    try:
        decoded = base64.b64decode(head + "=" * (-len(head) % 4), validate=False)
    except (binascii.Error, ValueError):
        return match.group(0)
    return "[REDACTED:private-key]" if b"PRIVATE KEY" in decoded else match.group(0)


def _auth_header(match: re.Match[str]) -> str:
    prefix = match.group(1) if match.group(1) is not None else match.group(2)
    return f"{prefix}[REDACTED:auth]"


_FUNCTIONS = {"base64-pem": _base64_pem, "auth-header": _auth_header}


def rule_names() -> list[str]:
    """The names of every credential rule, for documentation and tests."""
    return [rule[0] for rule in _RULES]


def strip_private(text: str) -> str:
    """Replace each ``<private>...</private>`` span (any case, with attributes or spaces inside the
    tags) with ``[private]``."""
    if _PRIVATE_WORD.search(text) is None:
        return text
    return _PRIVATE_RE.sub(PRIVATE_MARK, text)


def _case_sensitive(trigger: str) -> bool:
    return not trigger.islower() and any(ch.isalpha() for ch in trigger)


_PRIVATE_WORD = re.compile("private", re.IGNORECASE)
#: Each rule with its triggers split once: searched as written, or in the lowered text.
_PLAN = tuple(
    (
        name,
        tuple(t for t in triggers if _case_sensitive(t)),
        tuple(t for t in triggers if not _case_sensitive(t)),
        source,
        replacement,
    )
    for name, triggers, source, replacement in _RULES
)


def redact_secrets(text: str) -> str:
    """Replace every credential the rules recognise with a ``[REDACTED:<rule>]`` marker."""
    lowered: str | None = None
    for name, exact, folded, source, replacement in _PLAN:
        hit = False
        for trigger in exact:
            if trigger in text:
                hit = True
                break
        if not hit and folded:
            if lowered is None:
                lowered = text.lower()
            for trigger in folded:
                if trigger in lowered:
                    hit = True
                    break
        if hit:
            function = _FUNCTIONS.get(replacement)
            text = _pattern(name, source).sub(function or replacement, text)
            lowered = None
    return text


# -- escaped text ----------------------------------------------------------------------------------

_ESCAPED_RE = re.compile(
    r"\\u([0-9a-fA-F]{4})|&(?:#([0-9]{1,7})|#[xX]([0-9a-fA-F]{1,6})|(lt|gt|quot|apos|amp|#39));"
)
_ENTITIES = {"lt": "<", "gt": ">", "quot": '"', "apos": "'", "amp": "&", "#39": "'"}


def _unescape_one(match: re.Match[str]) -> str:
    hexa, decimal, hex_entity, named = match.groups()
    if named:
        return _ENTITIES[named]
    try:
        code = int(hexa, 16) if hexa else int(decimal) if decimal else int(hex_entity, 16)
        char = chr(code)
    except (ValueError, OverflowError):
        return match.group(0)
    # A JSON escape of a quote, a backslash or a control character stays: decoding it could break
    # JSON carried in the text.
    if hexa and (char in '"\\' or code < 0x20 or 0xD800 <= code <= 0xDFFF):
        return match.group(0)
    return char


def unescape(text: str) -> str:
    """``\\uXXXX`` escapes and HTML character references decoded (for looking, not for storing)."""
    return _ESCAPED_RE.sub(_unescape_one, text)


def scrub(text: str) -> str:
    """Private spans first, then credentials. Text with ``\\u`` escapes or HTML character references
    is looked at unescaped too, so a span or a secret written that way is found (such text is then
    kept unescaped, with the marks in place)."""
    if "\\u" in text or "&" in text:
        decoded = unescape(text)
        if decoded != text:
            cleaned = redact_secrets(strip_private(decoded))
            if cleaned != decoded:
                return cleaned
    return redact_secrets(strip_private(text))


#: JSON carried in a string is scrubbed as structure up to this size (larger: as text only).
_EMBEDDED_JSON_LIMIT = 1024 * 1024
#: How deep JSON strings inside JSON strings are followed.
_EMBEDDED_JSON_DEPTH = 3


SECRET_MARK = "[REDACTED:secret]"
#: An object key that names a credential: the name ends the key (``password``, ``DB_PASSWORD``,
#: ``X-Api-Key``, ``clientSecret``, Docker's ``auth``), so ``tokenizer`` or ``token_type`` do not.
_SECRET_KEY = re.compile(r"(?:^|[^a-z])(?:auth|authorization|" + _SECRET_NAME + r")$")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
#: A word every name :data:`_SECRET_KEY` matches holds one of these.
_KEY_WORDS = ("pass", "pwd", "secret", "token", "key", "auth", "credential", "webhook")


def is_secret_entry(key: object, item: object) -> bool:
    """Whether ``key: item`` of an object holds a credential as its value: a key that names one
    and a value that can be one (a string of 4 or more characters, not a boolean or a number, not
    already redacted), as the ``NAME=value`` rule judges it in text."""
    if not isinstance(key, str) or not isinstance(item, str) or len(item.strip()) < 4 or len(key) > 80:
        return False
    folded = key.lower()
    if not any(word in folded for word in _KEY_WORDS):  # most keys: no regular expression run
        return False
    value = item.strip()
    if value.startswith("[REDACTED") or value.lower() in ("true", "false", "null", "none") or value.isdigit():
        return False
    return _SECRET_KEY.search(_CAMEL.sub("_", key).lower()) is not None


def scrub_value(value: object, *, _depth: int = 0) -> object:
    """Scrub every string of a JSON-like value, dict keys included; a string held under a key that
    names a credential (:func:`is_secret_entry`) is replaced whole; a string that holds a JSON
    object or array is scrubbed as that structure (and written back only when something changed)."""
    if isinstance(value, str):
        return scrub(_scrub_embedded_json(value, _depth))
    if isinstance(value, dict):
        return {
            (scrub(key) if isinstance(key, str) else key): (
                SECRET_MARK if is_secret_entry(key, item) else scrub_value(item, _depth=_depth)
            )
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [scrub_value(item, _depth=_depth) for item in value]
    return value


def _scrub_embedded_json(text: str, depth: int) -> str:
    if depth >= _EMBEDDED_JSON_DEPTH or len(text) > _EMBEDDED_JSON_LIMIT or len(text) < 2:
        return text
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[" or stripped[-1] not in "}]":
        return text
    import json

    try:
        parsed = json.loads(stripped)
    except (ValueError, RecursionError):
        return text
    if not isinstance(parsed, (dict, list)):
        return text
    cleaned = scrub_value(parsed, _depth=depth + 1)
    if cleaned == parsed:
        return text
    return json.dumps(cleaned, ensure_ascii=False)
