"""Moving a memory's content as JSON Lines: the format, export, and import.

An export is the memory's content, for moving it between machines, schema
revisions, vector widths or database backends, or for merging one memory into
another. (A backup, the database file itself, is app.db.backup.)

- format: the records (pydantic models: the format's one definition), writing
  them, and reading and checking a whole file;
- export: the records of a memory, from one read snapshot;
- importer: restoring into a fresh memory or merging into a used one.
"""

from app.services.transfer.export import Record, export_memory
from app.services.transfer.format import ExportFile, FactRecord, read_export, write_records
from app.services.transfer.importer import ImportReport, import_memory, is_fresh

__all__ = [
    "ExportFile",
    "FactRecord",
    "ImportReport",
    "Record",
    "export_memory",
    "import_memory",
    "is_fresh",
    "read_export",
    "write_records",
]
