"""The artifact store and the task registry of a taskctx database on Postgres.

:class:`PgArtifactStore` and :class:`PgTaskRegistry` are the Postgres twins of
:class:`context.sqlite_store.ArtifactStore` and the SQLite registry; :class:`context.pg_store.PgStores`
opens them on its pooled connection (``db``: anything with ``run(fn)``, ``fn(conn, attempt)``).
"""

from __future__ import annotations

from typing import Any

from .artifact_refs import make_ref, parse_ref, slice_lines
from .errors import ArtifactNotFoundError
from .secrets import masked_bytes
from .store import checked_artifact, packed, registry_spec
from .text import json_text

__all__ = ["PgArtifactStore", "PgTaskRegistry"]


class PgArtifactStore:
    """Content-addressed store of bytes (``artifact://sha256:<hex>``) on Postgres.

    Secrets are masked at ``put`` as in :class:`context.sqlite_store.ArtifactStore`.
    """

    def __init__(self, db: Any):
        self._db = db

    def put(self, data: bytes | str) -> str:
        """Store bytes with their secrets masked; bytes already there are not written again.

        (``ON CONFLICT DO NOTHING``: they are masked and compressed again first.)

        Args:
            data: The bytes; a ``str`` is stored as UTF-8, losslessly (a lone surrogate as its
                ``surrogatepass`` bytes: :func:`context.text.to_bytes`).

        Returns:
            The ref of what was stored (``artifact://sha256:<hex>`` of the masked bytes).
        """
        raw = masked_bytes(data)
        ref = make_ref(raw)
        self._db.run(
            lambda conn, _: conn.execute(
                "INSERT INTO taskctx_artifacts VALUES (%s, %s, %s) ON CONFLICT (digest) DO NOTHING",
                (ref.digest, len(raw), packed(raw)),
            )
        )
        return str(ref)

    def _row(self, ref: str, col: str) -> tuple[Any, Any]:
        r = parse_ref(ref)
        row = self._db.run(
            lambda conn, _: conn.execute(
                f"SELECT {col} FROM taskctx_artifacts WHERE digest = %s", (r.digest,)
            ).fetchone()
        )
        if row is None:
            raise ArtifactNotFoundError(f"{ref} is not in the artifact store of {self._db.path}; check --db")
        return r, row

    def get(self, ref: str) -> bytes:
        """The bytes stored for a ref (secrets masked at ``put``), or its line slice.

        Args:
            ref: ``artifact://sha256:<hex>``, optionally with ``#L<a>-<b>``.

        Returns:
            The bytes, or lines ``a..b`` of them.

        Raises:
            InvalidRefError: ``ref`` is not a ref.
            ArtifactNotFoundError: Nothing is stored for it.
            DamagedStoreError: The bytes stored do not match the ref's hash.
        """
        r, row = self._row(ref, "data, size")
        data = checked_artifact(r, row[0], self._db.path, row[1])
        return data if r.start is None else slice_lines(data, r.start, r.end or r.start)

    def size(self, ref: str) -> int:
        """The recorded size of a ref's bytes.

        Args:
            ref: The artifact ref.

        Returns:
            The size in bytes, as recorded at ``put``.

        Raises:
            ArtifactNotFoundError: Nothing is stored for it.
        """
        return int(self._row(ref, "size")[1][0])


class PgTaskRegistry:
    """How each task was started (JSON spec), so ``resume`` can rebuild the same graph."""

    def __init__(self, db: Any):
        self._db = db

    def register(self, task_id: str, spec: dict[str, object]) -> None:
        """Record (or replace) how a task was started.

        Args:
            task_id: The task.
            spec: Its start spec (JSON-serialisable).
        """
        self._db.run(
            lambda conn, _: conn.execute(
                "INSERT INTO taskctx_tasks VALUES (%s, %s) ON CONFLICT (task_id) DO UPDATE SET spec = EXCLUDED.spec",
                (task_id, json_text(spec, sort_keys=True)),
            )
        )

    def unregister(self, task_id: str) -> None:
        """Remove a task's row (a fork that failed takes back what it wrote); none is fine.

        Args:
            task_id: The task.
        """
        self._db.run(lambda conn, _: conn.execute("DELETE FROM taskctx_tasks WHERE task_id = %s", (task_id,)))

    def get(self, task_id: str) -> dict[str, object] | None:
        """How a task was started.

        Args:
            task_id: The task.

        Returns:
            Its spec, or None when it was not registered.

        Raises:
            DamagedStoreError: Its row is not a JSON object.
        """
        row = self._db.run(
            lambda conn, _: conn.execute("SELECT spec FROM taskctx_tasks WHERE task_id = %s", (task_id,)).fetchone()
        )
        return None if row is None else registry_spec(task_id, row[0])

    def task_ids(self) -> list[str]:
        """Ids of the registered tasks, sorted."""
        rows = self._db.run(
            lambda conn, _: conn.execute("SELECT task_id FROM taskctx_tasks ORDER BY task_id").fetchall()
        )
        return [r[0] for r in rows]
