//! What the SQLite test files share: a database file in a temporary directory.

use std::path::PathBuf;

use clawless_local::sqlite::SqliteDb;

/// A temporary directory with a database file path in it; removed on drop.
pub(crate) struct DbFile {
    _dir: tempfile::TempDir,
    pub(crate) path: PathBuf,
}

impl DbFile {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let path = dir.path().join("clawless.sqlite");
        Self { _dir: dir, path }
    }

    pub(crate) fn open(&self) -> SqliteDb {
        SqliteDb::open(&self.path).expect("open the database")
    }
}
