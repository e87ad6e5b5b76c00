//! User-space unwinding of a sample's copied stack with framehop (samply's
//! unwinder): each module's `.eh_frame` (indexed by `.eh_frame_hdr`) or
//! `.debug_frame`, and frame pointers where a module has no unwind
//! information. Stack reads outside the copied bytes fail, so a stack
//! deeper than the copy ends as incomplete rather than as invented frames.
//! A frame in a module that has CFI but none for that address
//! (`-fno-asynchronous-unwind-tables` code) ends the walk too: framehop
//! would go on by frame pointers, and code built without CFI is mostly
//! built without frame pointers as well, so `rbp` is any value and the
//! frames it leads to are made up.

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, Module, Unwinder};

use super::modules::{Cfi, MappingKind, ProcessMaps, SectionData};
use super::sample::UserRegs;

/// The most user frames unwound per sample.
pub const MAX_FRAMES: usize = 128;

/// One unwound user frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UserFrame {
    /// The instruction pointer (first frame) or return address.
    pub addr: u64,
    /// The address to look up: a return address minus one, which lies in
    /// the call instruction (a call can be a function's last instruction).
    pub lookup: u64,
}

/// A sample's user frames, innermost first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unwound {
    /// The frames.
    pub frames: Vec<UserFrame>,
    /// True when the unwinder reached the outermost frame (a return address
    /// of 0, or a frame whose unwind information marks the end, such as
    /// `_start` and `clone3`), false when it stopped for want of stack
    /// bytes, unwind information or frames.
    pub ended: bool,
    /// True when it stopped at a frame its module's CFI does not cover.
    pub uncovered: bool,
}

/// Entries of [`ProcessUnwinder`]'s cache of CFI-uncovered addresses: a
/// power of two, `1 << COVER_BITS`.
const COVER_BITS: u32 = 9;
const COVER_SLOTS: usize = 1 << COVER_BITS;

/// One process's unwinder: its modules' unwind sections and a rule cache.
pub struct ProcessUnwinder {
    unwinder: UnwinderX86_64<SectionData>,
    cache: CacheX86_64,
    /// Lookup address -> whether it is CFI-uncovered, direct-mapped: the
    /// same return addresses come back sample after sample, and each
    /// check is a search of the module's `.eh_frame_hdr` and a parse of
    /// an FDE. Valid for the mappings this unwinder was made from.
    covered: Box<[(u64, bool); COVER_SLOTS]>,
}

impl ProcessUnwinder {
    /// An unwinder over the modules of `maps`.
    pub fn new(maps: &ProcessMaps) -> Self {
        let mut unwinder = UnwinderX86_64::new();
        for m in &maps.mappings {
            let MappingKind::File(file) = &m.kind else {
                continue;
            };
            let Some(elf) = &file.elf else {
                continue;
            };
            let Some(bias) = elf.bias(m.start, m.offset) else {
                continue;
            };
            let info = ExplicitModuleSectionInfo {
                base_svma: elf.base_svma,
                text_svma: elf.text.clone(),
                got_svma: elf.got.clone(),
                eh_frame_svma: elf.eh_frame.as_ref().map(|s| s.svma.clone()),
                eh_frame: elf.eh_frame.as_ref().map(|s| s.data.clone()),
                eh_frame_hdr_svma: elf.eh_frame_hdr.as_ref().map(|s| s.svma.clone()),
                eh_frame_hdr: elf.eh_frame_hdr.as_ref().map(|s| s.data.clone()),
                debug_frame: elf.debug_frame.as_ref().map(|s| s.data.clone()),
                ..Default::default()
            };
            unwinder.add_module(Module::new(
                file.name.to_string(),
                m.start..m.end,
                elf.base_svma.wrapping_add(bias),
                info,
            ));
        }
        Self {
            unwinder,
            cache: CacheX86_64::new(),
            covered: Box::new([(0, false); COVER_SLOTS]),
        }
    }

    /// Unwinds from `regs` over `stack`, the bytes from `regs.sp` upward;
    /// `maps` are the mappings this unwinder was made from.
    pub fn unwind(&mut self, maps: &ProcessMaps, regs: UserRegs, stack: &[u8]) -> Unwound {
        let sp = regs.sp;
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            let off = usize::try_from(addr.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
            let bytes = stack.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_le_bytes(bytes.try_into().map_err(|_| ())?))
        };
        let mut it = self.unwinder.iter_frames(
            regs.ip,
            UnwindRegsX86_64::new(regs.ip, regs.sp, regs.bp),
            &mut self.cache,
            &mut read_stack,
        );
        let mut out = Unwound::default();
        while out.frames.len() < MAX_FRAMES {
            match it.next() {
                Ok(Some(f)) => {
                    let lookup = f.address_for_lookup();
                    out.frames.push(UserFrame {
                        addr: f.address(),
                        lookup,
                    });
                    if uncovered(&mut self.covered, maps, lookup) {
                        out.uncovered = true;
                        break;
                    }
                }
                Ok(None) => {
                    out.ended = true;
                    break;
                }
                Err(_) => break,
            }
        }
        out
    }
}

/// Whether `lookup` lies in a module with CFI that has none for it,
/// through `cache` (see [`ProcessUnwinder`]).
fn uncovered(cache: &mut [(u64, bool); COVER_SLOTS], maps: &ProcessMaps, lookup: u64) -> bool {
    // Fibonacci hashing: code addresses share their low and high bits.
    let slot = (lookup.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - COVER_BITS)) as usize;
    let (addr, known) = cache[slot];
    if addr == lookup && addr != 0 {
        return known;
    }
    let found = maps
        .find(lookup)
        .is_some_and(|m| m.cfi(lookup) == Cfi::Uncovered);
    cache[slot] = (lookup, found);
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::modules::ModuleCache;

    #[test]
    fn the_cover_cache_answers_as_a_search_does() {
        let maps = ModuleCache::default()
            .process(std::process::id())
            .expect("our own maps");
        let mut cache = Box::new([(0, false); COVER_SLOTS]);
        let (mut checked, mut uncovered_seen) = (0, 0);
        for m in &maps.mappings {
            // Every 4099th byte: more addresses than slots, so slots are
            // taken over, and each asked twice (the second from the cache
            // where its slot still holds it).
            for a in (m.start..m.end).step_by(4099).take(2000) {
                let truth = maps.find(a).is_some_and(|m| m.cfi(a) == Cfi::Uncovered);
                assert_eq!(uncovered(&mut cache, &maps, a), truth, "{a:#x}");
                assert_eq!(uncovered(&mut cache, &maps, a), truth, "{a:#x} again");
                checked += 1;
                uncovered_seen += usize::from(truth);
            }
        }
        assert!(checked > COVER_SLOTS, "{checked} addresses");
        // Padding between functions has no FDE: some must be uncovered.
        assert!(uncovered_seen > 0);
    }
}
