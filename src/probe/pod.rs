//! Map values and ring-buffer records as bytes, and back: the one place
//! where sockscope's BPF loaders (the tracer in [`super::bpf`], the relay's
//! sockmap in `serve/relay/sockmap.rs`) reinterpret memory.
//!
//! Only the plain structs the skeleton generator emits from src/bpf/*.h may
//! cross: a loader opts each one in with `unsafe impl Plain`. Those structs
//! are `repr(C)`, hold only integers, byte arrays, nested plain structs and
//! the generator's explicit `__pad_N` fields, so every byte of them is
//! initialised and every bit pattern is a valid value.

use std::mem::{MaybeUninit, size_of};

/// A type that may be viewed as bytes and read back from any bytes of its
/// size.
///
/// # Safety
/// The type must be `repr(C)` (or `repr(transparent)` over such a type),
/// have no implicit padding, and be valid for every bit pattern: integers,
/// arrays of them and other `Plain` types only (no pointers, bools, enums
/// of Rust's own kind or references).
pub unsafe trait Plain: Copy {}

// SAFETY: plain integers.
unsafe impl Plain for u32 {}
// SAFETY: plain integers.
unsafe impl Plain for u64 {}

/// The bytes of `v`, to write into a map.
pub fn as_bytes<T: Plain>(v: &T) -> &[u8] {
    // SAFETY: T: Plain has no uninitialised bytes, so all size_of::<T>()
    // bytes behind the reference may be read as u8 for its lifetime.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) }
}

/// A `T` from the start of `bytes` (a map value or a record), or None when
/// `bytes` is too short. `bytes` need not be aligned.
pub fn read<T: Plain>(bytes: &[u8]) -> Option<T> {
    if bytes.len() < size_of::<T>() {
        return None;
    }
    // SAFETY: length checked; T: Plain is valid for any bit pattern.
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

/// Like [`read`], straight onto the heap, for records too large to copy
/// through the stack (a per-thread table is 12 KiB).
pub fn read_boxed<T: Plain>(bytes: &[u8]) -> Option<Box<T>> {
    if bytes.len() < size_of::<T>() {
        return None;
    }
    let mut b: Box<MaybeUninit<T>> = Box::new_uninit();
    // SAFETY: copies exactly size_of::<T>() bytes (length checked) into
    // the fresh allocation; T: Plain is valid for any bit pattern, so the
    // value is initialised afterwards.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), b.as_mut_ptr().cast::<u8>(), size_of::<T>());
        Some(b.assume_init())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    struct Rec {
        a: u32,
        b: u32,
        c: u64,
    }
    // SAFETY: repr(C) integers without padding.
    unsafe impl Plain for Rec {}

    #[test]
    fn round_trips_and_refuses_short_input() {
        let r = Rec { a: 1, b: 2, c: 3 };
        let bytes = as_bytes(&r).to_vec();
        assert_eq!(bytes.len(), 16);
        assert_eq!(read::<Rec>(&bytes), Some(r));
        assert_eq!(*read_boxed::<Rec>(&bytes).unwrap(), r);
        // Unaligned input is fine.
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&bytes);
        assert_eq!(read::<Rec>(&shifted[1..]), Some(r));
        assert_eq!(read::<Rec>(&bytes[..15]), None);
        assert!(read_boxed::<Rec>(&bytes[..15]).is_none());
    }
}
