"""Private spans and credentials are scrubbed from text before anything is stored."""

from __future__ import annotations

import html
import json

import pytest
from secret_corpus import HARMLESS, SECRETS

from mkg_core.payload import sanitize
from mkg_core.redaction import redact_secrets, rule_names, scrub, scrub_value, strip_private, unescape


def test_the_corpus_covers_at_least_seventy_formats() -> None:
    assert len(SECRETS) >= 70
    assert len({name for name, _, _ in SECRETS}) == len(SECRETS)


@pytest.mark.parametrize(("name", "text", "secret"), SECRETS, ids=[name for name, _, _ in SECRETS])
def test_every_credential_format_is_redacted(name: str, text: str, secret: str) -> None:
    cleaned = redact_secrets(text)
    assert secret not in cleaned
    assert "[REDACTED:" in cleaned


@pytest.mark.parametrize("text", HARMLESS)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_secrets(text) == text


def test_assignment_keeps_the_name_and_hides_the_value() -> None:
    assert redact_secrets("DB_PASSWORD=hunter2-but-longer") == "DB_PASSWORD=[REDACTED:secret]"
    assert redact_secrets("postgres://app:pw-123456@db/app") == "postgres://app:[REDACTED:password]@db/app"


def test_redaction_is_idempotent() -> None:
    once = redact_secrets(" ".join(text for _, text, _ in SECRETS))
    assert redact_secrets(once) == once


def test_private_spans_are_removed() -> None:
    text = "keep <private>my diary</private> this <PRIVATE>and\nthat</Private> too"
    assert strip_private(text) == "keep [private] this [private] too"


def test_an_unclosed_private_span_hides_everything_after_it() -> None:
    assert strip_private("visible <private>hidden forever") == "visible [private]"


def test_scrub_does_both() -> None:
    assert scrub("<private>x</private> sk-ant-api03-" + "a" * 40) == "[private] [REDACTED:anthropic-key]"


def test_rules_have_unique_names() -> None:
    names = rule_names()
    assert len(names) == len(set(names)) >= 30


# -- every placement a payload can hide a secret in -----------------------------------------------


def _unicode_escaped(text: str) -> str:
    """Every character but letters and digits as ``\\uXXXX``, the way some JSON encoders write
    markup-sensitive characters."""
    return "".join(ch if ch.isalnum() else f"\\u{ord(ch):04x}" for ch in text)


PLACEMENTS = {
    "prompt": lambda t: {"prompt": t},
    "tool-command": lambda t: {"tool_input": {"command": t}},
    "inside-a-command-line": lambda t: {"tool_input": {"command": f"echo {t} | tee out.txt"}},
    "tool-output": lambda t: {"tool_response": f"output:\n{t}\n"},
    "json-in-a-string": lambda t: {"tool_response": json.dumps({"stdout": t})},
    "json-in-json-in-a-string": lambda t: {
        "tool_response": json.dumps({"content": [{"type": "text", "text": json.dumps({"out": t})}]})
    },
    "dict-key": lambda t: {"tool_input": {t: "value"}},
    "unicode-escaped": lambda t: {"tool_response": _unicode_escaped(t)},
    "html-escaped": lambda t: {"tool_response": html.escape(t)},
}


def _everything_visible(value: object) -> str:
    """The stored value as a reader would see it, escapes decoded."""
    text = json.dumps(value, ensure_ascii=False)
    decoded = json.loads(json.dumps(text))  # a plain str: nested JSON's own escapes stay
    return "\n".join({text, unescape(text), html.unescape(text), decoded.replace('\\"', '"')})


@pytest.mark.parametrize("placement", sorted(PLACEMENTS))
@pytest.mark.parametrize(("name", "text", "secret"), SECRETS, ids=[name for name, _, _ in SECRETS])
def test_no_placement_hides_a_secret_from_the_hooks_scrubber(
    placement: str, name: str, text: str, secret: str
) -> None:
    truncated: list[str] = []
    stored = sanitize(PLACEMENTS[placement](text), truncated)
    visible = _everything_visible(stored)
    assert secret not in visible
    assert secret not in unescape(visible).replace('\\"', '"')
    assert "[REDACTED:" in visible


@pytest.mark.parametrize("placement", sorted(PLACEMENTS))
def test_ordinary_text_survives_every_placement(placement: str) -> None:
    for text in HARMLESS:
        payload = PLACEMENTS[placement](text)
        assert sanitize(payload, []) == payload


@pytest.mark.parametrize(
    "text",
    [
        'keep <private id="1">my diary</private> this',
        "keep < private >my diary</ private > this",
        "keep <private\n>my diary</private\n> this",
        "keep &lt;private&gt;my diary&lt;/private&gt; this",
        "keep \\u003cprivate\\u003emy diary\\u003c/private\\u003e this",
    ],
    ids=["attributes", "spaces", "newline", "html-escaped", "unicode-escaped"],
)
def test_private_spans_are_found_however_they_are_written(text: str) -> None:
    cleaned = scrub(text)
    assert "diary" not in cleaned
    assert cleaned.startswith("keep") and cleaned.endswith("this")


def test_scrub_value_scrubs_keys_and_keeps_json_strings_valid() -> None:
    token = "ghp_" + "a1B2" * 9
    value = {token: "x", "out": json.dumps({"rows": [{"password": "hunter2-hunter2"}], "n": 1})}
    cleaned = scrub_value(value)
    assert isinstance(cleaned, dict)
    assert token not in json.dumps(cleaned)
    inner = json.loads(cleaned["out"])
    assert inner == {"rows": [{"password": "[REDACTED:secret]"}], "n": 1}
    untouched = {"out": '{"rows": [1, 2]}'}
    assert scrub_value(untouched) == untouched  # written back only when something changed


def test_a_value_under_a_key_that_names_a_credential_is_redacted() -> None:
    secrets = {
        "password": "Tr0ub4dor&3xyz",
        "DB_PASSWORD": "Db-Pa55-word",
        "clientSecret": "abcdEFGH1234",
        "token": "opaque-token-value",
        "headers": {"X-Api-Key": "k3y-value-1"},
        "auths": {"registry.example.com": {"auth": "ZGVwbG95OkQw"}},
    }
    harmless = {
        "tokenizer": "bert",
        "token_type": "Bearer",
        "max_tokens": "4096",
        "password": "true",
        "passthrough": "yes please",
        "author": "Ana Lopez",
        "oauth": "enabled",
        "credentials_file": "~/.aws/credentials",
    }
    payload = {"session_id": "s", "tool_input": secrets, "tool_response": {"structuredContent": harmless}}
    for cleaned in (sanitize(payload, []), scrub_value(payload)):
        assert isinstance(cleaned, dict)
        text = json.dumps(cleaned)
        for value in ("Tr0ub4dor", "Db-Pa55", "abcdEFGH", "opaque-token", "k3y-value", "ZGVwbG95"):
            assert value not in text
        assert cleaned["tool_input"]["password"] == "[REDACTED:secret]"
        assert cleaned["tool_input"]["headers"] == {"X-Api-Key": "[REDACTED:secret]"}
        assert cleaned["tool_response"] == {"structuredContent": harmless}
