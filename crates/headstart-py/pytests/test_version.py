"""The package's version: Cargo's spelling read as Python's, and an extension of another version refused."""

from importlib import metadata

import pytest

import headstart
from headstart import _native, _version


def test_cargo_versions_read_as_python_writes_them() -> None:
    assert _version.pep440("0.1.0") == "0.1.0"
    assert _version.pep440("0.1.0+dirty") == "0.1.0+dirty"
    assert _version.pep440("0.2.0-rc.1") == "0.2.0rc1"
    assert _version.pep440("1.0.0-alpha.3+dirty") == "1.0.0a3+dirty"
    assert _version.pep440("1.0.0-beta.2") == "1.0.0b2"


def test_the_package_says_its_extensions_version() -> None:
    assert headstart.__version__ == _version.pep440(_native.__version__)


def test_an_extension_of_another_version_is_refused_naming_both(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metadata, "version", lambda name: "9.9.9")
    with pytest.raises(ImportError, match=r"headstart 9\.9\.9 found its native extension at version 0\.1\.0"):
        _version.installed_version("0.1.0")


def test_a_source_tree_without_a_distribution_has_its_extensions_version(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    assert _version.installed_version("0.3.0-rc.2") == "0.3.0rc2"
