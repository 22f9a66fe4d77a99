"""Every test gets its own results store (MATRIXRUN_STORE under its tmp_path), so no test
writes to the user's store ($XDG_DATA_HOME/matrixrun/store.sqlite) and no test's runs lend
their noise to another's (`verify.noise_from: auto`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from store_backends import store_url  # noqa: F401 - a fixture for the store's tests


@pytest.fixture(autouse=True)
def _own_results_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    store = tmp_path / "results-store.sqlite"
    monkeypatch.setenv("MATRIXRUN_STORE", str(store))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    return store
