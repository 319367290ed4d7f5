//! Memory handled by hand: buffers aligned for O_DIRECT (std allocates to the type's alignment
//! only), CPU prefetches (an intrinsic), glibc's allocator parameters (`mallopt`,
//! `malloc_trim`), the page size, and an allocator that counts live bytes for memory tests (a
//! `GlobalAlloc` is an unsafe trait).

use std::alloc::{alloc_zeroed, dealloc, GlobalAlloc, Layout, System};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicIsize, Ordering};

/// O_DIRECT needs buffers aligned to the logical block size; a page covers every disk in use.
pub const DIRECT_IO_ALIGN: usize = 4096;

/// A zero-filled heap buffer aligned to [`DIRECT_IO_ALIGN`], for O_DIRECT. Owned by one thread.
#[derive(Debug)]
pub struct AlignedBuffer {
    ptr: NonNull<u8>,
    len: usize,
}

impl AlignedBuffer {
    /// A zeroed buffer of `len` bytes; `len` must be a positive multiple of [`DIRECT_IO_ALIGN`].
    pub fn new(len: usize) -> AlignedBuffer {
        assert!(
            len > 0 && len.is_multiple_of(DIRECT_IO_ALIGN),
            "O_DIRECT buffer length {len}"
        );
        // SAFETY: the layout has a non-zero size (asserted above).
        let ptr = unsafe { alloc_zeroed(Self::layout(len)) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(Self::layout(len)));
        AlignedBuffer { ptr, len }
    }

    /// The buffer's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always `false`: a buffer holds at least one block.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The bytes.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` points to `len` initialised (zeroed) bytes owned by `self`, and the
        // `&mut self` borrow makes this the only access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, to read.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` points to `len` initialised bytes owned by `self`, and the `&self`
        // borrow keeps every `&mut` access out while this one lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The start of the bytes, for the kernel to read or write (`crate::uring`).
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len, DIRECT_IO_ALIGN).expect("valid layout")
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this very layout, freed once.
        unsafe { dealloc(self.ptr.as_ptr(), Self::layout(self.len)) }
    }
}

/// Prefetches cover at most this many bytes of one object: its first cache lines.
pub const PREFETCH_BYTES_MAX: usize = 1024;

/// Asks the CPU to start loading the object an `Rc` points to, its counts included (at most
/// [`PREFETCH_BYTES_MAX`]), so that a pass over many cold objects overlaps their cache misses
/// instead of waiting for each in turn (docs/decisions/0026, per-batch cost across many partitions).
pub fn prefetch_rc<T>(value: &std::rc::Rc<T>) {
    // An `Rc`'s allocation holds its strong and weak counts, then the value.
    let counts_bytes = 2 * std::mem::size_of::<usize>();
    prefetch(
        std::rc::Rc::as_ptr(value).cast::<u8>().wrapping_sub(counts_bytes),
        counts_bytes + std::mem::size_of::<T>(),
    );
}

/// Asks the CPU to start loading `*value` (see [`prefetch_rc`]).
pub fn prefetch_value<T>(value: &T) {
    prefetch((value as *const T).cast(), std::mem::size_of::<T>());
}

/// Asks the CPU to start loading the cache lines of `[start, start + bytes)`, at most
/// [`PREFETCH_BYTES_MAX`] of them (x86-64 only: elsewhere it does nothing).
pub(crate) fn prefetch(start: *const u8, bytes: usize) {
    const CACHE_LINE_BYTES: usize = 64;
    for at in (0..bytes.min(PREFETCH_BYTES_MAX)).step_by(CACHE_LINE_BYTES) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is a hint to the cache: it dereferences nothing and never faults
        // (an address that maps no memory is ignored), so any address is sound here.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                start.wrapping_add(at).cast(),
            )
        };
    }
}

/// The page size, asked once.
pub fn page_bytes() -> u64 {
    static PAGE_BYTES: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *PAGE_BYTES.get_or_init(|| {
        u64::try_from(crate::sysconf(libc::_SC_PAGESIZE))
            .ok()
            .filter(|bytes| bytes.is_power_of_two())
            .unwrap_or(4096)
    })
}

/// The machine's physical memory in bytes (0 when the system cannot tell).
pub fn physical_memory_bytes() -> u64 {
    let pages = u64::try_from(crate::sysconf(libc::_SC_PHYS_PAGES)).unwrap_or(0);
    pages.saturating_mul(page_bytes())
}

/// Largest allocation glibc's malloc serves from its heaps instead of a mapping of its own: 32 MiB,
/// glibc's own upper bound for the threshold it otherwise adjusts at run time.
const MALLOC_MMAP_THRESHOLD_BYTES: i32 = 32 << 20;
/// Free memory at the top of a heap that glibc keeps instead of handing back to the kernel.
const MALLOC_TRIM_THRESHOLD_BYTES: i32 = 1 << 30;

/// Makes glibc's malloc keep the memory the process frees for its next allocations instead of
/// handing it back to the kernel. The broker allocates and frees request frames at the rate
/// requests arrive. glibc gave their memory back and `recv` then faulted fresh, zeroed pages in
/// again: 16–29 k page faults per 2 GB produced, where a virtio balloon with free page reporting
/// adds a host fault to each (docs/decisions/0008). With these thresholds it is ~2 k, and the
/// peak RSS stays the same, because the in-flight bounds already cap what is allocated at once.
/// Does nothing where the C library is not glibc.
pub fn keep_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets allocator parameters; called at start, before the shards run
    // (glibc documents it as safe at any time in any case).
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD_BYTES);
        libc::mallopt(libc::M_TRIM_THRESHOLD, MALLOC_TRIM_THRESHOLD_BYTES);
    }
}

/// Hands the free memory glibc's malloc holds back to the kernel (all arenas). Does nothing
/// where the C library is not glibc.
pub fn release_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only returns free heap pages to the kernel; glibc documents it as safe
    // to call at any time from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The system allocator, counting the bytes live: a test that installs it as the
/// `#[global_allocator]` measures what a piece of code keeps on the heap.
#[derive(Debug)]
pub struct CountingAllocator {
    live: AtomicIsize,
}

impl CountingAllocator {
    /// An allocator that has counted nothing yet.
    pub const fn new() -> CountingAllocator {
        CountingAllocator {
            live: AtomicIsize::new(0),
        }
    }

    /// Bytes allocated through this allocator and not yet freed.
    pub fn live_bytes(&self) -> isize {
        self.live.load(Ordering::Relaxed)
    }
}

impl Default for CountingAllocator {
    fn default() -> CountingAllocator {
        CountingAllocator::new()
    }
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counter only adds.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.live.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.live.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract for `dealloc` is passed on as is.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.live
            .fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract for `realloc` is passed on as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_aligned_buffer_is_zeroed_and_aligned() {
        let mut buffer = AlignedBuffer::new(2 * DIRECT_IO_ALIGN);
        assert_eq!(buffer.len(), 2 * DIRECT_IO_ALIGN);
        assert_eq!(buffer.as_mut_ptr() as usize % DIRECT_IO_ALIGN, 0);
        assert!(buffer.as_mut_slice().iter().all(|&byte| byte == 0));
        buffer.as_mut_slice()[8191] = 7;
        assert_eq!(buffer.as_mut_slice()[8191], 7);
    }

    #[test]
    #[should_panic(expected = "O_DIRECT buffer length")]
    fn an_aligned_buffer_holds_whole_blocks() {
        AlignedBuffer::new(100);
    }

    #[test]
    fn the_page_size_is_a_power_of_two() {
        assert!(page_bytes().is_power_of_two() && page_bytes() >= 4096);
    }
}
