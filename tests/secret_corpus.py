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
    # -- shells, command lines and config files -------------------------------------------------
    ("shell-db-pass", "DB_PASS=Tr0ub4dor-and-3 ./manage.py migrate", "Tr0ub4dor-and-3"),
    ("curl-user", "curl -u deploy:Curl-Pa55-word https://ci.example.com/api", "Curl-Pa55-word"),
    ("curl-user-long", "curl --user 'ana:Wget-S3cret-99' -X POST https://x.example.com", "Wget-S3cret-99"),
    ("mysql-p", "mysql -h db.internal -u root -pMyS3cretPw app < dump.sql", "MyS3cretPw"),
    ("sshpass", "sshpass -p 'Ssh-Pa55word!' ssh deploy@10.0.0.5", "Ssh-Pa55word!"),
    ("docker-login", "docker login -u ana -p D0cker-Pa55 registry.example.com", "D0cker-Pa55"),
    ("secret-flag", "mytool sync --api-key Flag-S3cret-42 --verbose", "Flag-S3cret-42"),
    ("secret-flag-password", "mongosh --username admin --password 'M0ngo-Pw-77' app", "M0ngo-Pw-77"),
    ("redis-url-no-user", "REDIS_URL=redis://:R3dis-Passw0rd@cache.internal:6379/0", "R3dis-Passw0rd"),
    ("url-password-with-at", "pip install -i https://ana:P@ss-w0rd-9@pypi.example.com/simple x", "ss-w0rd-9"),
    ("amqp-url", "amqp://guest:Rabbit-S3cret@mq.internal:5672/", "Rabbit-S3cret"),
    ("jdbc-password", "jdbc:postgresql://db/app?user=app&password=Jdbc-S3cret-1", "Jdbc-S3cret-1"),
    (
        "azure-sas",
        "https://acct.blob.core.windows.net/c/f.txt?sv=2022-11-02&ss=b&sig=" + _B62[:43] + "%3D",
        _B62[:43],
    ),
    ("slack-app-token", "xapp-1-A0123456789-1234567890123-" + _HEX[:64], "A0123456789-1234567890123"),
    ("authorization-token", "Authorization: Token " + _HEX[:40], _HEX[:40]),
    ("authorization-ssws", "Authorization: SSWS 00" + _B62[:40], "00" + _B62[:40]),
    ("x-api-key-header", "curl -H 'X-Api-Key: " + _B62[:32] + "' https://api.example.com", _B62[:32]),
    ("cookie", "Cookie: sessionid=" + _B62[:32] + "; csrftoken=" + _HEX[:32], _B62[:32]),
    ("set-cookie", "Set-Cookie: __Host-auth=" + _B62[:40] + "; Path=/; Secure", _B62[:40]),
    (
        "discord-bot",
        "DISCORD=MTA" + _B62[:23] + ".Gh" + "Xy_a" + "." + _B62[:38],
        _B62[:38],
    ),
    (
        "discord-webhook",
        "https://discord.com/api/webhooks/123456789012345678/" + _B62[:68],
        _B62[:68],
    ),
    (
        "docker-auth",
        '{"auths": {"registry.example.com": {"auth": "ZGVwbG95OkQwY2tlci1TM2NyZXQ="}}}',
        "ZGVwbG95OkQwY2tlci1TM2NyZXQ",
    ),
    (
        "putty",
        "PuTTY-User-Key-File-3: ssh-rsa\nEncryption: none\nComment: k\nPublic-Lines: 1\n"
        + _B62[:60]
        + "\nPrivate-Lines: 1\nAAAAgQC"
        + _B62[:60]
        + "\nPrivate-MAC: "
        + _HEX[:64],
        "AAAAgQC" + _B62[:60],
    ),
    ("netrc", "machine api.example.com login ana password Netrc-S3cret-42", "Netrc-S3cret-42"),
    (
        "netrc-multiline",
        "machine git.example.com\n  login ci\n  password Netrc-Multi-77\n",
        "Netrc-Multi-77",
    ),
    ("pgpass", "db.internal:5432:app:appuser:Pgpass-S3cret-5", "Pgpass-S3cret-5"),
    (
        "k8s-base64-pem",
        "data:\n  tls.key: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlF" + _B62[:40] + "==\n",
        "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlF",
    ),
    ("rails-master-key", "RAILS_MASTER_KEY=" + _HEX[:32], _HEX[:32]),
    ("laravel-app-key", "APP_KEY=base64:" + _B62[:43] + "=", _B62[:43]),
    (
        "npmrc-auth",
        "//registry.example.com/:_auth=ZGVwbG95OnNlY3JldC1ucG0tcGFzcw==",
        "ZGVwbG95OnNlY3JldC1ucG0tcGFzcw",
    ),
    ("newrelic", "NRAK-" + "ABCDEFGHIJKLMNOPQRSTUVWXYZ0", "NRAK-ABCDEFGHIJKLMNOPQRSTUVWXYZ0"),
    ("grafana", "glsa_" + _B62[:32] + "_" + _HEX[:8], "glsa_" + _B62[:32]),
    ("sentry", "sntrys_" + _B62[:60], "sntrys_" + _B62[:60]),
    ("planetscale", "pscale_pw_" + _B62[:43], "pscale_pw_" + _B62[:43]),
    ("fly", "fo1_" + _B62[:43], "fo1_" + _B62[:43]),
    ("terraform", "abcdefghijklmn.atlasv1." + _B62[:70], _B62[:70]),
    ("doppler", "dp.st.dev." + _B62[:40], _B62[:40]),
    ("onepassword", "ops_" + _B62[:60], "ops_" + _B62[:60]),
    ("azure-client-secret", "abc8Q~" + _B62[:34], "abc8Q~" + _B62[:34]),
    ("twitter-bearer", "AAAAAAAAAAAAAAAAAAAAA" + _B62[:60], _B62[:60]),
    ("gitlab-trigger", "glptt-" + _HEX[:40], "glptt-" + _HEX[:40]),
    ("stripe-publishable", "pk_live_" + _B62[:24], "pk_live_" + _B62[:24]),
    (
        "service-account-json",
        '{"type": "service_account", "private_key_id": "' + _HEX[:40] + '", "private_key": '
        '"-----BEGIN PRIVATE KEY-----\\nMIIEvgIBADANBgkq' + _B62[:40] + '\\n-----END PRIVATE KEY-----\\n"}',
        "MIIEvgIBADANBgkq",
    ),
    ("yaml-secret-key", "secret_key_base: " + _HEX[:64], _HEX[:64]),
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
    "def connect(host: str, port: int = 5432) -> Connection:",
    "for (const item of items) { total += item.price * item.quantity; }",
    "git show 9fceb02d0ae598e95dc970b74767f19372d61af8",
    "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "request id 3f2b8c1e-5d4a-4e7b-9c2f-1a6d8e0b7c35 took 120 ms",
    "https://docs.python.org/3/library/urllib.parse.html?highlight=quote#urllib.parse.quote",
    "postgres://db.internal:5432/app",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGJ4bW9kZXZlbG9wZXJrZXlmb3J0ZXN0aW5n ana@laptop",
    "The bypass flag skips the cache; pass --verbose to see why.",
    "Authorization is checked in middleware/auth.py before the handler runs.",
    "cookie consent banner: see components/CookieBanner.tsx",
    "SELECT id, password_hash FROM users WHERE email = $1",
    "export NODE_ENV=production PORT=3000",
    "<p>Tom &amp; Jerry &lt;3</p>",
    '{"message": "done", "rows": [{"id": 1, "name": "Acme"}]}',
    "The primary_key is id and the sort_key is created_at.",
    "curl -s https://api.example.com/health | jq .status",
    "mysql -h db.internal -u root -p app",
    "machine learning models need tokenization first",
    "docker login -u ana --password-stdin < pw.txt",
    "pass --no-password and --token-file ./t to the CLI",
]
