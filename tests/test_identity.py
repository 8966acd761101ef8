"""Project and user identity, on real git repositories."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mkg_core.harness import HarnessAdapter
from mkg_core.identity import normalize_remote_url, resolve_project, resolve_user


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_repo(path: Path, remote: str | None = None) -> Path:
    path.mkdir(parents=True)
    git("init", "-q", cwd=path)
    if remote:
        git("remote", "add", "origin", remote, cwd=path)
    return path


def test_same_named_folders_in_different_repositories_get_different_ids(tmp_path: Path) -> None:
    a = make_repo(tmp_path / "a" / "api")
    b = make_repo(tmp_path / "b" / "api")
    pa = resolve_project({"cwd": str(a)}, {})
    pb = resolve_project({"cwd": str(b)}, {})
    assert pa.id != pb.id
    assert pa.id.startswith("api-") and pb.id.startswith("api-")
    assert pa.name == pb.name == "Api"


def test_same_named_folders_with_different_remotes_get_different_ids(tmp_path: Path) -> None:
    a = make_repo(tmp_path / "a" / "api", "git@github.com:acme/api.git")
    b = make_repo(tmp_path / "b" / "api", "git@github.com:other/api.git")
    assert resolve_project({"cwd": str(a)}, {}).id != resolve_project({"cwd": str(b)}, {}).id


def test_two_clones_of_one_repository_share_an_id(tmp_path: Path) -> None:
    ssh = make_repo(tmp_path / "one" / "billing", "git@github.com:Acme/Billing.git")
    https = make_repo(tmp_path / "two" / "billing", "https://github.com/acme/billing")
    first = resolve_project({"cwd": str(ssh)}, {})
    assert first.id == resolve_project({"cwd": str(https)}, {}).id
    assert first.remote == "git@github.com:Acme/Billing.git"


def test_id_is_stable_and_walks_up_to_the_git_root(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "billing-api")
    (repo / "src" / "deep").mkdir(parents=True)
    top = resolve_project({"cwd": str(repo)}, {})
    inner = resolve_project({"cwd": str(repo / "src" / "deep")}, {})
    assert top == inner
    assert top.root == str(repo.resolve())
    assert top.name == "Billing Api"
    assert top.source == "payload.cwd"


def test_a_folder_without_git_is_its_own_project(tmp_path: Path) -> None:
    (tmp_path / "x" / "notes").mkdir(parents=True)
    (tmp_path / "y" / "notes").mkdir(parents=True)
    a = resolve_project({"cwd": str(tmp_path / "x" / "notes")}, {})
    assert a.root == str((tmp_path / "x" / "notes").resolve())
    assert a.id != resolve_project({"cwd": str(tmp_path / "y" / "notes")}, {}).id


def test_worktrees_share_the_main_repositorys_remote(tmp_path: Path) -> None:
    main = make_repo(tmp_path / "main", "https://example.com/team/tool.git")
    git("-c", "user.email=a@b.c", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "x", cwd=main)
    git("worktree", "add", "-q", str(tmp_path / "wt"), cwd=main)
    worktree = resolve_project({"cwd": str(tmp_path / "wt")}, {})
    assert worktree.remote == "https://example.com/team/tool.git"
    assert worktree.id.split("-")[-1] == resolve_project({"cwd": str(main)}, {}).id.split("-")[-1]


def test_mkg_project_id_pins_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    pinned = resolve_project({"cwd": str(repo)}, {"MKG_PROJECT_ID": "My Project", "MKG_PROJECT_NAME": "Mine"})
    assert (pinned.id, pinned.name, pinned.source) == ("my-project", "Mine", "env.MKG_PROJECT_ID")


def test_candidate_order(tmp_path: Path) -> None:
    first = make_repo(tmp_path / "first")
    second = make_repo(tmp_path / "second")
    payload = {"project_dir": str(first), "cwd": str(second)}
    assert resolve_project(payload, {}).root == str(first.resolve())
    assert resolve_project({}, {"CLAUDE_PROJECT_DIR": str(second)}).root == str(second.resolve())
    assert resolve_project({"cwd": str(first)}, {"CLAUDE_PROJECT_DIR": str(second)}).root == str(
        first.resolve()
    )


def test_a_plugin_cache_is_never_the_project(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "work")
    plugin = tmp_path / "home" / ".claude" / "plugins" / "cache" / "mkg" / "meta-knowledge-graph" / "0.1.0"
    plugin.mkdir(parents=True)
    (plugin / ".git").mkdir()
    env = {"CLAUDE_PLUGIN_ROOT": str(plugin), "CLAUDE_PROJECT_DIR": str(repo)}
    assert resolve_project({"cwd": str(plugin / "hooks")}, env).root == str(repo.resolve())
    # Even without the variable, a folder inside a harness's plugin cache is skipped.
    assert resolve_project({"cwd": str(plugin)}, {"CODEX_WORKSPACE_ROOT": str(repo)}).root == str(
        repo.resolve()
    )


def test_the_process_cwd_is_the_last_resort(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo(tmp_path / "here")
    monkeypatch.chdir(repo)
    assert resolve_project({}, {}).root == str(repo.resolve())
    assert resolve_project({}, {}).source == "cwd"


@pytest.mark.parametrize(
    "url",
    [
        "git@github.com:Acme/Repo.git",
        "ssh://git@github.com/acme/repo",
        "https://user:token@GitHub.com/Acme/Repo.git/",
        "https://github.com:443/acme/repo",
        "git://github.com/acme/repo.git",
    ],
)
def test_remote_spellings_normalize_alike(url: str) -> None:
    assert normalize_remote_url(url) == "github.com/acme/repo"


# -- users -------------------------------------------------------------------------------------


def _account(name: str, email: str | None, *, fails: bool = False) -> HarnessAdapter:
    """An adapter whose harness account is ``email`` (or whose account file cannot be read)."""

    def account_email(self: HarnessAdapter, environ: object) -> str | None:
        if fails:
            raise ValueError("unreadable account file")
        return email

    return type(f"{name}Adapter", (HarnessAdapter,), {"name": name, "account_email": account_email})()


ACCOUNTS = [_account("claude", "Claude@Example.com"), _account("codex", "codex@example.com")]


def test_mkg_user_id_wins() -> None:
    user = resolve_user({"MKG_USER_ID": " Me@Example.com "}, adapters=ACCOUNTS)
    assert (user.id, user.source) == ("me@example.com", "env")


def test_harness_account_follows_the_active_harness() -> None:
    env = {"HOME": "/nonexistent"}
    assert resolve_user(env, adapters=ACCOUNTS).id == "claude@example.com"
    assert resolve_user(env, client="codex", adapters=ACCOUNTS) == resolve_user(
        {**env, "MKG_CLIENT": "codex"}, adapters=ACCOUNTS
    )
    codex_user = resolve_user(env, client="codex", adapters=ACCOUNTS)
    assert (codex_user.id, codex_user.source) == ("codex@example.com", "codex")
    assert resolve_user(env, adapters=ACCOUNTS).source == "claude_code"


def test_unreadable_accounts_are_ignored(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    git("config", "user.email", "Git@Example.com", cwd=repo)
    adapters = [_account("claude", None, fails=True), _account("codex", None)]
    user = resolve_user({"HOME": str(tmp_path)}, project_root=str(repo), adapters=adapters)
    assert (user.id, user.source) == ("git@example.com", "git")


def test_os_login_is_the_last_resort(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    user = resolve_user({"HOME": str(empty)}, project_root=str(empty))
    assert user.source == "os"
    assert user.id and " " not in user.id
