"""The PostgreSQL store's ``?schema=`` takes any PostgreSQL schema name (quoted, so a
reserved word, capitals or punctuation work), and refuses one PostgreSQL would cut short."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from store_fixtures import POSTGRES_URL, drop, postgres_url

from stenograph.stores import open_store
from stenograph.stores.base import StoreError


@pytest.mark.parametrize("schema", ["select", "Team Notes-1", 'quo"te', "ünïcode"])
def test_any_schema_name_holds_sessions(schema):
    base = postgres_url("t_schema_probe")  # skips when the server is unreachable
    url = base.replace("schema=t_schema_probe", f"schema={quote(schema)}")
    drop(url)
    try:
        store = open_store(url)
        storage = store.session("s")
        storage.append([{"op": "append", "entry": {"role": "user", "content": "hi"}}], None)
        store.close()
        again = open_store(url)
        records, _ = again.session("s").read(0)
        assert [r["entry"]["content"] for r in records] == ["hi"]
        assert again.sessions() == ["s"]
        again.close()
    finally:
        drop(url)


def test_a_schema_name_postgresql_would_cut_short_is_refused():
    with pytest.raises(StoreError, match=r"schema 'xxx.*63 bytes"):
        open_store(f"{POSTGRES_URL}?schema={'x' * 64}")
