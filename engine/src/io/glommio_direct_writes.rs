//! O_DIRECT writes of a [`GlommioFile`]: segment `.log` appends through the shard's ring
//! (`direct_appends.rs`), every other write through glommio's `DmaFile`, whole blocks at a time
//! (docs/decisions/0048, 0049).

use super::{GlommioFile, DIRECT_IO_ALIGN};
use crate::task_wakers::once_per_wake;
use glommio::io::{BufferedFile, DmaFile};
use std::io;

impl GlommioFile {
    async fn write_direct(
        &self,
        file: &DmaFile,
        reader: &BufferedFile,
        pos: u64,
        parts: &[&[u8]],
    ) -> io::Result<()> {
        let align = file.alignment();
        let start = file.align_down(pos);
        let end = pos + parts.iter().map(|p| p.len() as u64).sum::<u64>();
        let aligned_end = file.align_up(end);
        let mut buf = file.alloc_dma_buffer((aligned_end - start) as usize);
        let bytes = buf.as_bytes_mut();
        // Only what no copy below covers is zeroed: the head's unread part and the padding
        // after `end` (zeroing the whole buffer was a second pass over every appended byte).
        bytes[(end - start) as usize..].fill(0);
        let len = self.len.get();
        // The head block before `pos` must keep its old bytes.
        if pos > start {
            let head = (pos - start) as usize;
            if start == file.align_down(len) && self.tail_block.borrow().len() >= head {
                bytes[..head].copy_from_slice(&self.tail_block.borrow()[..head]);
            } else {
                let old = once_per_wake(reader.read_at(start, align as usize)).await?;
                let n = head.min(old.len());
                bytes[..n].copy_from_slice(&old[..n]);
                bytes[n..head].fill(0);
            }
        }
        // Overwriting inside the file: the block after `end` must keep its old bytes too.
        if end < len && aligned_end > end {
            let block = aligned_end - align;
            let old = once_per_wake(reader.read_at(block, align as usize)).await?;
            let from = (end - block) as usize;
            let upto = old.len().min(align as usize);
            if upto > from {
                let at = (end - start) as usize;
                bytes[at..at + (upto - from)].copy_from_slice(&old[from..upto]);
            }
        }
        let mut at = (pos - start) as usize;
        for part in parts {
            bytes[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        let new_len = len.max(end);
        let tail_start = file.align_down(new_len);
        // Only a write reaching the last block changes the bytes kept of it.
        if tail_start >= start && new_len <= aligned_end {
            let from = (tail_start - start) as usize;
            let upto = (new_len - start) as usize;
            *self.tail_block.borrow_mut() = bytes[from..upto].to_vec();
        }
        let want = buf.len();
        let written = once_per_wake(file.write_at(buf, start)).await?;
        if written != want {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "short O_DIRECT write"));
        }
        self.len.set(new_len);
        Ok(())
    }

    /// Direct mode: waits until every byte appended is written (nothing for other files).
    pub(super) async fn drain_appends(&self) -> io::Result<()> {
        match &self.appends {
            Some(appends) => appends.drain().await,
            None => Ok(()),
        }
    }

    /// Direct mode: an append to a segment `.log` file is staged and written on the shard's
    /// ring; any other write of one waits for those first and is written as other files'.
    pub(super) async fn write_direct_file(
        &self,
        file: &DmaFile,
        reader: &BufferedFile,
        pos: u64,
        parts: &[&[u8]],
    ) -> io::Result<()> {
        let Some(appends) = &self.appends else {
            return self.write_direct(file, reader, pos, parts).await;
        };
        if pos == self.len.get() {
            appends.append(pos, parts).await?;
            self.len.set(appends.end());
            return Ok(());
        }
        // Rare (appends go at the end): the tails each path keeps are read from the disk.
        appends.drain().await?;
        *self.tail_block.borrow_mut() = read_tail(reader, self.len.get(), file.alignment()).await?;
        self.write_direct(file, reader, pos, parts).await?;
        appends.cut_cached(pos);
        let len = self.len.get();
        appends.reset(len, &read_tail(reader, len, DIRECT_IO_ALIGN as u64).await?);
        Ok(())
    }
}

/// The bytes of the `align`-sized block holding the end of a file of `len` bytes,
/// `[align_down(len), len)`.
pub(super) async fn read_tail(reader: &BufferedFile, len: u64, align: u64) -> io::Result<Vec<u8>> {
    let tail_start = len - len % align;
    if len == tail_start {
        return Ok(Vec::new());
    }
    let tail = once_per_wake(reader.read_at(tail_start, (len - tail_start) as usize)).await?;
    Ok(tail.to_vec())
}
