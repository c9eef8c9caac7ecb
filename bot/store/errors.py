"""The store's exception tree.

StoreError                 anything the store cannot do, with what, where and how to fix it
├── StoreOpenError         the database file or its folder cannot be opened or created
├── SchemaTooNewError      the file was written by a newer version of the program
└── StoreClosedError       an operation arrived after `Store.aclose()`
"""

from __future__ import annotations


class StoreError(Exception):
    """The durable store cannot do what was asked."""


class StoreOpenError(StoreError):
    """The database file or its folder cannot be opened or created."""


class SchemaTooNewError(StoreError):
    """The database was written by a newer program; this one cannot safely use it."""


class StoreClosedError(StoreError):
    """The store was closed before this operation ran."""
