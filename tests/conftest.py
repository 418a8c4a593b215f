"""Shared fixtures and markers. Strict msgpack is on for every test (a moved class must fail loudly)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")

REPO = Path(__file__).resolve().parents[1]
TRAJECTORIES = Path(os.environ.get("TASKCTX_TRAJECTORIES", REPO.parent / "shared" / "data" / "trajectories"))


@pytest.fixture(autouse=True)
def _cwd_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test runs in its own ``tmp_path``: a command's default paths (``.taskctx/runs``,
    ``.taskctx/taskctx.sqlite``, a relative --out) land there, never in the user's checkout.
    Tests that need a repository file name it through ``REPO``."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


_MISSING = f"shared trajectories not found at {TRAJECTORIES} (clone beside ../shared or set TASKCTX_TRAJECTORIES)"


@pytest.fixture(scope="session")
def trajectories_dir() -> Path:
    """The folder of the recorded trajectories: ``$TASKCTX_TRAJECTORIES``, else
    ``../shared/data/trajectories`` beside the repository. Skips when it holds no ``.jsonl``.
    Every test that reads recorded data gets it from here (or from ``trajectory_file``)."""
    if not TRAJECTORIES.is_dir() or not list(TRAJECTORIES.glob("*.jsonl")):
        pytest.skip(_MISSING)
    return TRAJECTORIES


@pytest.fixture(scope="session")
def long_trajectories_dir() -> Path:
    """The folder of the long recorded runs (70-129 steps): ``$TASKCTX_TRAJECTORIES_LONG``, else
    ``trajectories-long`` beside the trajectories folder. Skips when it holds no ``.jsonl``."""
    d = Path(os.environ.get("TASKCTX_TRAJECTORIES_LONG", TRAJECTORIES.parent / "trajectories-long"))
    if not d.is_dir() or not list(d.glob("*.jsonl")):
        pytest.skip(f"long trajectories not found at {d} (set TASKCTX_TRAJECTORIES_LONG)")
    return d


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that takes ``trajectory_file`` runs once per recorded trajectory in
    ``trajectories_dir`` (one skipped case when there are none)."""
    if "trajectory_file" in metafunc.fixturenames:
        files = sorted(TRAJECTORIES.glob("*.jsonl")) if TRAJECTORIES.is_dir() else []
        if files:
            metafunc.parametrize("trajectory_file", files, ids=[f.stem for f in files])
        else:
            metafunc.parametrize("trajectory_file", [pytest.param(None, marks=pytest.mark.skip(reason=_MISSING))])


# --- Postgres (tests/e2e/test_postgres.py, tests/e2e/test_server.py) -------------------------
PG_URL = os.environ.get("TASKCTX_TEST_PG", "")


@pytest.fixture(scope="session")
def pg_url() -> str:
    """The URL of a throwaway Postgres server (``.ci/run`` starts one and sets TASKCTX_TEST_PG)."""
    if not PG_URL:
        pytest.skip(
            "TASKCTX_TEST_PG is not set: no Postgres server to test against (.ci/run starts one; "
            "see ../shared/RUNBOOK.md and set TASKCTX_TEST_PG=postgresql://postgres@127.0.0.1:5433/postgres)"
        )
    try:
        import psycopg
    except ImportError:
        pytest.skip("psycopg is not installed: pip install -e '.[dev]' (or '.[postgres]')")
    try:
        with psycopg.connect(PG_URL, connect_timeout=5):
            pass
    except psycopg.Error as exc:
        pytest.fail(f"TASKCTX_TEST_PG={PG_URL} is set but the server cannot be reached: {exc}")
    return PG_URL


@pytest.fixture
def pg_db(pg_url: str) -> Iterator[str]:
    """A fresh, empty database on the test server (its URL); dropped after the test."""
    import uuid
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    name = f"taskctx_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(pg_url)
    yield urlunsplit(parts._replace(path="/" + name))
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The stores of a fresh database: a SQLite file, then (``[postgres]``) a fresh Postgres
    database, which skips without TASKCTX_TEST_PG. For tests of what both stores must do alike."""
    if request.param == "sqlite":
        from context import SqliteStores

        s: Any = SqliteStores(tmp_path / "taskctx.sqlite")
    else:
        from context.pg_store import PgStores

        s = PgStores(request.getfixturevalue("pg_db"))
    yield s
    s.close()


# --- markers: postgres and browser tests skip when their server or browser is missing ------------
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: Set by .ci/run: there a missing browser is a failure, not a skip.
REQUIRE_CHROMIUM = os.environ.get("TASKCTX_REQUIRE_CHROMIUM", "") not in ("", "0", "false")


def pytest_configure(config: pytest.Config) -> None:
    """``--collect-only`` runs no test, so syrupy would count every prompt snapshot as unused and
    exit 1: there, unused snapshots are only a warning."""
    if config.option.collectonly and hasattr(config.option, "warn_unused_snapshots"):
        config.option.warn_unused_snapshots = True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse a test that reaches Postgres (the ``pg_url`` fixture, or a parameter ``"postgres"``)
    without the ``postgres`` marker: ``-m "not postgres"`` must leave out every one of them."""
    unmarked = [
        item.nodeid
        for item in items
        if item.get_closest_marker("postgres") is None
        and (
            "pg_url" in getattr(item, "fixturenames", ())
            or "postgres" in getattr(getattr(item, "callspec", None), "params", {}).values()
        )
    ]
    if unmarked:
        raise pytest.UsageError("tests that use Postgres without @pytest.mark.postgres: " + ", ".join(unmarked))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A ``browser`` test skips without Chromium, unless TASKCTX_REQUIRE_CHROMIUM makes it fail."""
    if item.get_closest_marker("browser") is not None and CHROMIUM is None and not REQUIRE_CHROMIUM:
        pytest.skip("chromium not installed (apt-get install -y chromium); .ci/run installs it, so CI runs this test")
