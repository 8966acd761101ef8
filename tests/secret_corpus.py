"""Credential formats that must never be stored: (name, text containing it, the secret part).

The values are made up but shaped like the real thing. Shared by the unit tests of the scrubber
and the end-to-end test that pushes them through a hook and the worker into Neo4j.
"""

from __future__ import annotations

_B62 = "aB3dE5fG7hJ9kL2mN4pQ6rS8tU0vW1xY3zA5bC7dE9fG1hJ3kL5mN7pQ9rS1tU3vW5xY7zA9bC1dE3fG5hJ7kL9mN1pQ3rS5"
_HEX = "0123456789abcdef" * 5

SECRETS: list[tuple[str, str, str]] = [
    ("openai", "export OPENAI_KEY_X=1 and the key sk-" + _B62[:48], "sk-" + _B62[:48]),
    ("openai-project", "use sk-proj-" + _B62[:60] + " please", "sk-proj-" + _B62[:60]),
    ("anthropic", "key: sk-ant-api03-" + _B62[:80], "sk-ant-api03-" + _B62[:80]),
    ("openrouter", "sk-or-v1-" + _HEX[:64], "sk-or-v1-" + _HEX[:64]),
    ("aws-access-key", "aws id AKIAIOSFODNN7EXAMPLE in config", "AKIAIOSFODNN7EXAMPLE"),
    (
        "aws-secret",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG",
    ),
    ("github-classic", "token ghp_" + _B62[:36], "ghp_" + _B62[:36]),
    ("github-oauth", "gho_" + _B62[:36], "gho_" + _B62[:36]),
    ("github-fine-grained", "github_pat_11ABCDEFG0" + _B62[:60], "github_pat_11ABCDEFG0" + _B62[:60]),
    ("gitlab", "glpat-" + _B62[:20], "glpat-" + _B62[:20]),
    ("slack-bot", "xoxb-123456789012-1234567890123-" + _B62[:24], "xoxb-123456789012-1234567890123"),
    (
        "slack-webhook",
        "https://hooks.slack.com/services/T00000000/B00000000/" + _B62[:24],
        "T00000000/B00000000",
    ),
    ("google-api", "AIza" + _B62[:35], "AIza" + _B62[:35]),
    ("google-oauth-secret", "GOCSPX-" + _B62[:28], "GOCSPX-" + _B62[:28]),
    ("google-oauth-token", "ya29." + _B62[:60], "ya29." + _B62[:60]),
    ("stripe-live", "sk_live_" + _B62[:24], "sk_live_" + _B62[:24]),
    ("stripe-restricted", "rk_test_" + _B62[:24], "rk_test_" + _B62[:24]),
    ("stripe-webhook", "whsec_" + _B62[:32], "whsec_" + _B62[:32]),
    ("sendgrid", "SG." + _B62[:22] + "." + _B62[22:65], "SG." + _B62[:22]),
    ("twilio", "SK" + _HEX[:32], "SK" + _HEX[:32]),
    ("mailgun", "key-" + _B62[:32], "key-" + _B62[:32]),
    ("npm", "//registry.npmjs.org/:_authToken=npm_" + _B62[:36], "npm_" + _B62[:36]),
    ("pypi", "pypi-AgEIcHlwaS5vcmc" + _B62[:60], "pypi-AgEIcHlwaS5vcmc" + _B62[:60]),
    ("huggingface", "hf_" + _B62[:34], "hf_" + _B62[:34]),
    ("groq", "gsk_" + _B62[:52], "gsk_" + _B62[:52]),
    ("digitalocean", "dop_v1_" + _HEX[:64], "dop_v1_" + _HEX[:64]),
    ("databricks", "dapi" + _HEX[:32], "dapi" + _HEX[:32]),
    ("shopify", "shpat_" + _HEX[:32], "shpat_" + _HEX[:32]),
    ("atlassian", "ATATT3xFfGF0" + _B62[:60], "ATATT3xFfGF0" + _B62[:60]),
    ("vault", "hvs." + _B62[:90], "hvs." + _B62[:90]),
    (
        "age",
        "AGE-SECRET-KEY-1" + "QWERTYUIOPASDFGHJKLZXCVBNM0123456789QWERTYUIOPASDFGHJKLZXC",
        "AGE-SECRET-KEY-1QWERTY",
    ),
    (
        "jwt",
        "Cookie: session=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0"
        ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "eyJzdWIiOiIxMjM0NTY3ODkwIn0",
    ),
    (
        "private-key",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA" + _B62[:64] + "\n-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEA",
    ),
    (
        "private-key-in-json",
        '{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBg'
        + _B62[:40]
        + '\\n-----END PRIVATE KEY-----\\n"}',
        "MIIEvQIBADANBg",
    ),
    ("postgres-url", "DATABASE_URL=postgres://app:Sup3rS3cretPw@db.internal:5432/app", "Sup3rS3cretPw"),
    ("mongodb-url", "mongodb+srv://admin:Mongo-Pa55word@cluster0.example.net/db", "Mongo-Pa55word"),
    ("neo4j-url", "neo4j+s://neo4j:graphPassw0rd!@abc.databases.neo4j.io", "graphPassw0rd!"),
    ("bearer", "curl -H 'Authorization: Bearer " + _B62[:40] + "' https://api.example.com", _B62[:40]),
    (
        "basic-auth",
        "Authorization: Basic dXNlcjpodW50ZXIyLXN1cGVyLXNlY3JldA==",
        "dXNlcjpodW50ZXIyLXN1cGVyLXNlY3JldA",
    ),
    ("env-password", "DB_PASSWORD=hunter2-but-longer", "hunter2-but-longer"),
    ("env-secret-quoted", "export CLIENT_SECRET='c1i3nt-s3cr3t-value'", "c1i3nt-s3cr3t-value"),
    ("env-api-key", "DIFFBOT_TOKEN=" + _HEX[:32], _HEX[:32]),
    ("json-password", '{"username": "ana", "password": "correct-horse-battery"}', "correct-horse-battery"),
    ("yaml-api-key", "api_key: yml-" + _B62[:20], "yml-" + _B62[:20]),
    (
        "azure-storage",
        "DefaultEndpointsProtocol=https;AccountName=x;AccountKey=" + _B62[:60] + "==;",
        _B62[:60],
    ),
    ("connection-string-pwd", "Server=db;User Id=sa;Password=Azur3-Sql-Pw;", "Azur3-Sql-Pw"),
    ("telegram", "bot 123456789:AA" + _B62[:33], "AA" + _B62[:33]),
    ("postman", "PMAK-" + _HEX[:24] + "-" + _HEX[:34], "PMAK-" + _HEX[:24]),
]

#: Ordinary text that must come through untouched.
HARMLESS: list[str] = [
    "max_tokens: 1000",
    '{"max_tokens": 4096, "temperature": 0.2}',
    "The password reset flow lives in auth/reset.py.",
    "git clone https://github.com/acme/repo.git",
    "Use the token bucket algorithm for rate limiting.",
    "sk-learn is not a package name, scikit-learn is",
    "MATCH (n:Learning) WHERE n.status = 'approved' RETURN n",
]
