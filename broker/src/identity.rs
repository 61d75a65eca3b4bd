//! What a data directory remembers about the broker itself, so a restart is the same cluster to
//! its clients: the cluster id (Kafka's `meta.properties`), written at the first start, and the
//! end of the last block of producer ids handed out (Kafka's controller records each block
//! before it uses one), so no producer id is ever given twice.
//!
//! Both are tiny files replaced atomically ([`write_atomically`]): a crash leaves the old content
//! or the new. One that exists but cannot be read stops the start with a message instead of
//! being replaced, since a new cluster id or a reused producer id is the very thing it prevents.

use std::io;
use std::path::Path;

use crate::durable::write_atomically;

/// '@' is not allowed in topic names, so no topic's folder can collide with these.
const META_FILE: &str = "@meta.properties";
const PRODUCER_IDS_FILE: &str = "@producer-ids";

/// A new cluster id: any stable string works for clients; Kafka's are base64 UUIDs.
pub fn new_cluster_id() -> String {
    format!("workshop-{}", uuid::Uuid::new_v4().simple())
}

/// The data directory's cluster id, created and recorded at its first start.
pub fn cluster_id(dir: &Path) -> io::Result<String> {
    match read_value(dir, META_FILE, "cluster.id")? {
        Some(id) => Ok(id),
        None => {
            let id = new_cluster_id();
            write_atomically(
                dir,
                META_FILE,
                format!("version=1\ncluster.id={id}\n").as_bytes(),
            )?;
            Ok(id)
        }
    }
}

/// The first producer id no block has covered yet (0 in a new data directory).
pub fn producer_id_high_water(dir: &Path) -> io::Result<i64> {
    match read_value(dir, PRODUCER_IDS_FILE, "next.block.start")? {
        None => Ok(0),
        Some(value) => value.parse().map_err(|_| {
            invalid(
                dir,
                PRODUCER_IDS_FILE,
                &format!("next.block.start={value} is not a number"),
            )
        }),
    }
}

/// Records that ids below `end` may have been handed out; returns once that is on disk.
pub fn record_producer_id_high_water(dir: &Path, end: i64) -> io::Result<()> {
    write_atomically(
        dir,
        PRODUCER_IDS_FILE,
        format!("next.block.start={end}\n").as_bytes(),
    )
}

/// `key`'s value in `dir/file` (lines `key=value`); `None` when the file does not exist.
fn read_value(dir: &Path, file: &str, key: &str) -> io::Result<Option<String>> {
    let text = match std::fs::read_to_string(dir.join(file)) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    text.lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
        .map(|value| Some(value.trim().to_string()))
        .filter(|value| value.as_ref().is_some_and(|v| !v.is_empty()))
        .ok_or_else(|| invalid(dir, file, &format!("it has no {key}")))
}

fn invalid(dir: &Path, file: &str, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "{} cannot be read ({why}); restore it, or remove it knowingly (a new cluster id, \
             or producer ids that may repeat)",
            dir.join(file).display()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_id_and_producer_id_high_water_survive_and_bad_files_are_refused() {
        let dir = std::env::temp_dir().join(format!("identity-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let id = cluster_id(&dir).unwrap();
        assert_eq!(cluster_id(&dir).unwrap(), id);
        assert_eq!(producer_id_high_water(&dir).unwrap(), 0);
        record_producer_id_high_water(&dir, 2000).unwrap();
        assert_eq!(producer_id_high_water(&dir).unwrap(), 2000);
        std::fs::write(dir.join(META_FILE), "").unwrap();
        let err = cluster_id(&dir).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("it has no cluster.id"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
