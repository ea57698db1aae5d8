from pathlib import Path

import pytest

from gr_core.paths import DataNotFoundError, data_file, data_root, outputs_root, repo_root


def test_repo_root_is_found_from_a_subfolder():
    root = repo_root()
    assert (root / "pyproject.toml").is_file()
    assert repo_root(root / "notebooks") == root


def test_data_root_defaults_to_shared_data_beside_the_repo(monkeypatch):
    monkeypatch.delenv("GR_DATA_DIR", raising=False)
    assert data_root() == (repo_root().parent / "shared" / "data").resolve()


def test_data_root_follows_the_environment_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("GR_DATA_DIR", str(tmp_path))
    assert data_root() == tmp_path.resolve()


def test_missing_data_root_error_names_where_it_looked(monkeypatch, tmp_path):
    missing = tmp_path / "nowhere"
    monkeypatch.setenv("GR_DATA_DIR", str(missing))
    with pytest.raises(DataNotFoundError, match=str(missing)) as err:
        data_root()
    assert "GR_DATA_DIR" in str(err.value)


def test_missing_data_file_error_names_the_file(monkeypatch, tmp_path):
    monkeypatch.setenv("GR_DATA_DIR", str(tmp_path))
    with pytest.raises(DataNotFoundError, match="metaqa/kb.txt"):
        data_file("metaqa", "kb.txt")


def test_outputs_root_follows_the_environment_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("GR_OUTPUTS_DIR", str(tmp_path))
    assert outputs_root("smoke") == tmp_path / "smoke"
    assert Path(tmp_path / "smoke").is_dir()
