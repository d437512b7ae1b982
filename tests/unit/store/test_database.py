"""URL normalisation, SQLite pragmas, driver-error descriptions, handle prefixes (pure)."""

from __future__ import annotations

import pytest

from core.errors import ConfigurationError, StoreError
from core.store.database import describe, is_memory_sqlite, normalize_url, sqlite_pragmas, translate_errors
from core.store.handles import handle_prefix


@pytest.mark.parametrize(
    ("url", "driver"),
    [
        ("postgres://u:p@db/baton", "postgresql+psycopg"),
        ("postgresql://u@db:5433/baton", "postgresql+psycopg"),
        ("postgresql+psycopg://u@db/baton", "postgresql+psycopg"),
        ("sqlite:///./.baton/baton.db", "sqlite"),
    ],
)
def test_normalize_url_picks_psycopg3_for_postgres(url: str, driver: str) -> None:
    assert normalize_url(url).drivername == driver


def test_normalize_url_keeps_credentials_and_database() -> None:
    parsed = normalize_url("postgres://ana:s3cret@db.example:5433/baton")
    assert (parsed.username, parsed.password, parsed.host, parsed.port, parsed.database) == (
        "ana",
        "s3cret",
        "db.example",
        5433,
        "baton",
    )


@pytest.mark.parametrize("url", ["mysql://u@h/db", "not a url"])
def test_unsupported_urls_name_the_setting_without_the_password(url: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        normalize_url(url)
    assert "BATON_DATABASE_URL" in info.value.message
    assert "sqlite:///" in info.value.hint


def test_password_is_not_echoed_in_configuration_errors() -> None:
    with pytest.raises(ConfigurationError) as info:
        normalize_url("mysql://u:hunter2@h/db")
    assert "hunter2" not in info.value.message


@pytest.mark.parametrize(
    ("url", "memory"), [("sqlite://", True), ("sqlite:///:memory:", True), ("sqlite:///x.db", False)]
)
def test_is_memory_sqlite(url: str, memory: bool) -> None:
    assert is_memory_sqlite(normalize_url(url)) is memory


def test_sqlite_pragmas_set_busy_timeout_before_wal() -> None:
    pragmas = sqlite_pragmas("FULL")
    assert pragmas[0] == "PRAGMA busy_timeout = 10000"
    assert pragmas[1:] == [
        "PRAGMA journal_mode = WAL",
        "PRAGMA synchronous = FULL",
        "PRAGMA foreign_keys = ON",
    ]


def test_sqlite_pragmas_refuse_other_synchronous_levels() -> None:
    with pytest.raises(ValueError, match="NORMAL or FULL"):
        sqlite_pragmas("OFF")  # type: ignore[arg-type]


def test_describe_is_one_line_without_sql() -> None:
    import sqlalchemy.exc as sa_exc

    exc = sa_exc.OperationalError("UPDATE runs SET x=?", {"x": 1}, ValueError("disk I/O error\nmore detail"))
    assert describe(exc) == "ValueError: disk I/O error"


def test_translate_errors_raises_store_error_from_the_driver_error() -> None:
    import sqlalchemy.exc as sa_exc

    with pytest.raises(StoreError) as info, translate_errors("read a run"):
        raise sa_exc.OperationalError("SELECT 1", {}, ConnectionError("server closed the connection"))
    assert (
        info.value.message
        == "The run store could not read a run (ConnectionError: server closed the connection)."
    )
    assert isinstance(info.value.__cause__, sa_exc.OperationalError)
    assert "BATON_DATABASE_URL" in info.value.hint


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("args:3F9A1C2B", "3f9a1c2b"),
        ("3f9a1c2b", "3f9a1c2b"),
        (" args:ab ", "ab"),
        ("args:", None),
        ("zz", None),
    ],
)
def test_handle_prefix(text: str, expected: str | None) -> None:
    assert handle_prefix(text) == expected


def test_a_postgresql_engine_gives_the_indexes_their_postgresql_options() -> None:
    """The partial index's WHERE and the prefix indexes' text_pattern_ops are set when a
    PostgreSQL engine is opened (not at import, which would load the PostgreSQL dialect)."""
    from sqlalchemy.dialects import postgresql
    from sqlalchemy.schema import CreateIndex

    from core.store.database import open_engine
    from core.store.tables import BLOBS, RUNS

    open_engine(normalize_url("postgresql://u@localhost:1/baton")).dispose()  # connects lazily: never here
    indexes = (*RUNS.indexes, *BLOBS.indexes)
    ddl = {i.name: str(CreateIndex(i).compile(dialect=postgresql.dialect())) for i in indexes}
    assert ddl["ix_runs_origin_event"].endswith("(origin_event) WHERE origin_event IS NOT NULL")
    assert ddl["ix_runs_id_prefix"].endswith("(id text_pattern_ops)")
    assert ddl["ix_blobs_digest_prefix"].endswith("(digest text_pattern_ops)")
