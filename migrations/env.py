"""Alembic environment for Baton.

Programmatic use (`core.store.migration.upgrade`, called by `SqlStore.migrate()`) passes
an open connection in `config.attributes["connection"]`; the caller holds the
migration lock and owns the transaction. From the command line, the URL comes from
`alembic -x url=...`, then `sqlalchemy.url` in alembic.ini, then BATON_DATABASE_URL.
"""

from __future__ import annotations

import os
from logging.config import fileConfig

from alembic import context
from sqlalchemy.engine import Connection

from core.store.database import normalize_url, open_engine
from core.store.tables import metadata

config = context.config


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        transactional_ddl=True,
    )


def _command_line_url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    url = url or os.environ.get("BATON_DATABASE_URL", "sqlite:///./.baton/baton.db")
    return url


def run_offline() -> None:
    context.configure(
        url=normalize_url(_command_line_url()).render_as_string(hide_password=False),
        target_metadata=metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        context.run_migrations()
        return
    if config.config_file_name:
        fileConfig(config.config_file_name, disable_existing_loggers=False)
    engine = open_engine(normalize_url(_command_line_url()))
    try:
        with engine.connect() as conn:
            _configure(conn)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
