//! Where a stored batch's bytes are: in memory (no data directory), or at a position in a
//! segment file. With a data directory the broker keeps only the index in memory and reads
//! fetched batches from the files (the kernel's page cache keeps the recent ones), so memory is
//! bounded by the number of batches indexed, not by their bytes.

use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::file_pool::FileSlot;

#[derive(Debug, Clone)]
pub enum Stored {
    Memory(Bytes),
    File { slot: Arc<FileSlot>, position: u64 },
}

/// The bytes of `batches` (each with its length), in order. Batches that follow each other in
/// one file are read with one `pread` and handed out as slices of its buffer.
pub fn load(batches: &[(usize, Stored)]) -> io::Result<Vec<Bytes>> {
    let mut loaded = Vec::with_capacity(batches.len());
    let mut at = 0;
    while at < batches.len() {
        match &batches[at].1 {
            Stored::Memory(data) => {
                loaded.push(data.clone());
                at += 1;
            }
            Stored::File { slot, position } => {
                // The run: the batches right after this one in the same file.
                let mut end = at + 1;
                let mut next = position + batches[at].0 as u64;
                while let Some((
                    len,
                    Stored::File {
                        slot: s,
                        position: p,
                    },
                )) = batches.get(end)
                {
                    if !Arc::ptr_eq(s, slot) || *p != next {
                        break;
                    }
                    next += *len as u64;
                    end += 1;
                }
                let mut buffer = BytesMut::zeroed((next - position) as usize);
                slot.file()?.read_exact_at(&mut buffer, *position)?;
                let mut buffer = buffer.freeze();
                for (len, _) in &batches[at..end] {
                    loaded.push(buffer.split_to(*len));
                }
                at = end;
            }
        }
    }
    Ok(loaded)
}
