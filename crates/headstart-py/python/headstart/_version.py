"""The package's version, and the check that its extension is its own build.

A wheel's ``_native`` and its Python code are built together, but an install can still mix them (a stale extension
copied over, a second distribution on the path). An extension of another version may not speak the package's
protocol, so importing ``headstart`` refuses it, naming both versions.
"""

import re
from importlib import metadata

from . import _native

_PRERELEASE = re.compile(r"-(alpha|beta|rc)\.?(\d+)")
_PEP440_TAG = {"alpha": "a", "beta": "b", "rc": "rc"}


def pep440(cargo_version: str) -> str:
    """A Cargo version (``0.2.0-rc.1+dirty``) written as Python writes it (``0.2.0rc1+dirty``), as maturin does."""
    return _PRERELEASE.sub(lambda match: _PEP440_TAG[match[1]] + match[2], cargo_version)


def installed_version(extension_version: str) -> str:
    """The distribution's version, checked against the extension's; an ``ImportError`` naming both if they differ.

    A package imported from a source tree, with no distribution installed, has only its extension's version.
    """
    native = pep440(extension_version)
    try:
        distribution = metadata.version("headstart")
    except metadata.PackageNotFoundError:
        return native
    if distribution != native:
        raise ImportError(
            f"headstart {distribution} found its native extension at version {native} "
            f"({_native.__file__}); reinstall the package: pip install --force-reinstall headstart=={distribution}"
        )
    return distribution


__version__ = installed_version(_native.__version__)
