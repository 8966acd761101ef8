"""Private spans and credentials are scrubbed from text before anything is stored."""

from __future__ import annotations

import pytest
from secret_corpus import HARMLESS, SECRETS

from mkg_core.redaction import redact_secrets, rule_names, scrub, strip_private


def test_the_corpus_covers_at_least_thirty_formats() -> None:
    assert len(SECRETS) >= 30
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
