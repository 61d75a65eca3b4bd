//! Writing small files so that a crash leaves either the old content or the new one: write a
//! temporary file, sync it, rename it over the target, sync the directory (the rename is an
//! entry of the directory, not of the file).

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

/// The temporary files' suffix; '@' is not allowed in topic names, so none can collide.
const TEMPORARY: &str = "@writing";

/// Replaces `dir/name` with `content` atomically and durably.
pub fn write_atomically(dir: &Path, name: &str, content: &[u8]) -> io::Result<()> {
    let temporary = dir.join(format!("{name}{TEMPORARY}"));
    {
        let mut file = File::create(&temporary)?;
        file.write_all(content)?;
        file.sync_all()?;
    }
    std::fs::rename(&temporary, dir.join(name))?;
    sync_dir(dir)
}

/// Makes the creations, renames and removals of entries in `dir` durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// True for a temporary file that a crash left behind in the middle of [`write_atomically`].
pub fn is_temporary(name: &str) -> bool {
    name.ends_with(TEMPORARY)
}
