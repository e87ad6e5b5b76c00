//! The address ranges a module's call-frame information covers: one per
//! FDE of its `.eh_frame` (or `.debug_frame` where it has none), read with
//! gimli (framehop's own parser).
//!
//! Two uses: a frame without a symbol is named after the FDE that holds
//! it (`module+0xSTART`, the function's first address), so the samples of
//! one stripped function add up in one frame instead of one per
//! instruction; and unwinding stops at a frame of a module that has CFI
//! but none for that address (`-fno-asynchronous-unwind-tables` code),
//! where framehop's frame-pointer fallback would read a general register
//! as a frame pointer and invent frames.

use std::collections::HashMap;
use std::ops::Range;

use gimli::{
    BaseAddresses, CieOrFde, DebugFrame, EhFrame, EndianSlice, LittleEndian, UnwindSection,
};

/// What a module's FDE ranges are read from: its CFI sections' bytes and
/// the addresses their pointer encodings may be relative to.
#[derive(Clone, Copy, Debug, Default)]
pub struct CfiSections<'a> {
    /// `.eh_frame`'s bytes and address.
    pub eh_frame: Option<(&'a [u8], u64)>,
    /// `.eh_frame_hdr`'s address.
    pub eh_frame_hdr: Option<u64>,
    /// `.eh_frame_hdr`'s bytes: its binary-search table finds one FDE
    /// without reading the others ([`hdr_find`]).
    pub eh_frame_hdr_data: Option<&'a [u8]>,
    /// `.text`'s address.
    pub text: Option<u64>,
    /// `.got`'s address.
    pub got: Option<u64>,
    /// `.debug_frame`'s bytes, used where there is no `.eh_frame`.
    pub debug_frame: Option<&'a [u8]>,
}

/// The most FDEs kept per module (libc has ~3,000; a 64 MiB `.eh_frame`,
/// the most read, holds at most ~2.8 million).
const MAX_FDES: usize = 1 << 22;

/// A module's FDE ranges (file addresses), sorted by start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FdeTable {
    ranges: Vec<Range<u64>>,
}

impl FdeTable {
    /// The table of `elf`'s `.eh_frame`, or of its `.debug_frame` when it
    /// has no `.eh_frame`; empty when neither parses.
    pub fn of(cfi: &CfiSections<'_>) -> FdeTable {
        let mut ranges = Vec::new();
        if let Some((data, at)) = cfi.eh_frame {
            let mut bases = BaseAddresses::default().set_eh_frame(at);
            if let Some(t) = cfi.text {
                bases = bases.set_text(t);
            }
            if let Some(g) = cfi.got {
                bases = bases.set_got(g);
            }
            if let Some(h) = cfi.eh_frame_hdr {
                bases = bases.set_eh_frame_hdr(h);
            }
            let mut section = EhFrame::new(data, LittleEndian);
            section.set_address_size(8);
            collect(&section, &bases, &mut ranges);
        }
        if ranges.is_empty()
            && let Some(data) = cfi.debug_frame
        {
            let mut section = DebugFrame::new(data, LittleEndian);
            section.set_address_size(8);
            collect(&section, &BaseAddresses::default(), &mut ranges);
        }
        FdeTable::from_ranges(ranges)
    }

    /// A table of `ranges` (empty ones dropped).
    pub fn from_ranges(mut ranges: Vec<Range<u64>>) -> FdeTable {
        ranges.retain(|r| r.start < r.end);
        ranges.sort_by_key(|r| (r.start, r.end));
        FdeTable { ranges }
    }

    /// The FDE range holding `svma` (the innermost when ranges nest: the
    /// one starting last before it).
    pub fn find(&self, svma: u64) -> Option<Range<u64>> {
        let i = self.ranges.partition_point(|r| r.start <= svma);
        self.ranges[..i]
            .iter()
            .rev()
            // Ranges rarely overlap; a few steps back find a holder.
            .take(8)
            .find(|r| svma < r.end)
            .cloned()
    }

    /// True when the module has no FDE at all.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The bytes its ranges take.
    pub fn bytes(&self) -> u64 {
        (self.ranges.capacity() * std::mem::size_of::<Range<u64>>()) as u64
    }
}

/// What `.eh_frame_hdr`'s search table says of `svma`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HdrLookup {
    /// The FDE holding it: its range.
    Covered(Range<u64>),
    /// No FDE holds it.
    Uncovered,
    /// There is no usable table (none, empty, or it does not parse): the
    /// whole `.eh_frame` must be read instead ([`FdeTable::of`]).
    NoTable,
}

/// Finds the FDE holding `svma` through `.eh_frame_hdr`'s sorted table,
/// reading only the table entries a binary search visits and that one
/// FDE: a module's FDEs need not all be read (and kept: 16 bytes each,
/// 100,000s in a large library) to look one up.
pub fn hdr_find(cfi: &CfiSections<'_>, svma: u64) -> HdrLookup {
    let (Some((eh, eh_at)), Some(hdr), Some(hdr_at)) =
        (cfi.eh_frame, cfi.eh_frame_hdr_data, cfi.eh_frame_hdr)
    else {
        return HdrLookup::NoTable;
    };
    let mut bases = BaseAddresses::default()
        .set_eh_frame(eh_at)
        .set_eh_frame_hdr(hdr_at);
    if let Some(t) = cfi.text {
        bases = bases.set_text(t);
    }
    if let Some(g) = cfi.got {
        bases = bases.set_got(g);
    }
    let Ok(parsed) = gimli::EhFrameHdr::new(hdr, LittleEndian).parse(&bases, 8) else {
        return HdrLookup::NoTable;
    };
    let Some(table) = parsed.table() else {
        return HdrLookup::NoTable;
    };
    let mut frame = EhFrame::new(eh, LittleEndian);
    frame.set_address_size(8);
    match table.fde_for_address(&frame, &bases, svma, EhFrame::cie_from_offset) {
        Ok(fde) => {
            let start = fde.initial_address();
            HdrLookup::Covered(start..start.saturating_add(fde.len()))
        }
        Err(_) => HdrLookup::Uncovered,
    }
}

/// Adds the range of every FDE of `section` that parses; stops at the
/// first entry that does not (what follows cannot be framed).
fn collect<'a, S>(section: &S, bases: &BaseAddresses, out: &mut Vec<Range<u64>>)
where
    S: UnwindSection<EndianSlice<'a, LittleEndian>>,
    S::Offset: std::hash::Hash + Eq + Copy,
{
    type Cie<'a> = gimli::CommonInformationEntry<EndianSlice<'a, LittleEndian>>;
    let mut cies: HashMap<S::Offset, Cie<'a>> = HashMap::new();
    let mut entries = section.entries(bases);
    while out.len() < MAX_FDES {
        let partial = match entries.next() {
            Ok(Some(CieOrFde::Fde(p))) => p,
            Ok(Some(CieOrFde::Cie(_))) => continue,
            Ok(None) | Err(_) => break,
        };
        let fde = partial.parse(|s, b, off| {
            if let Some(c) = cies.get(&off) {
                return Ok(c.clone());
            }
            let c = s.cie_from_offset(b, off)?;
            cies.insert(off, c.clone());
            Ok(c)
        });
        if let Ok(fde) = fde {
            let start = fde.initial_address();
            out.push(start..start.saturating_add(fde.len()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_find_the_holding_range_and_nothing_between() {
        let t = FdeTable::from_ranges(vec![0x2000..0x2100, 0x1000..0x1080, 0x1080..0x1080]);
        assert_eq!(t.find(0x1000), Some(0x1000..0x1080));
        assert_eq!(t.find(0x107f), Some(0x1000..0x1080));
        assert_eq!(t.find(0x1080), None);
        assert_eq!(t.find(0xfff), None);
        assert_eq!(t.find(0x20ff), Some(0x2000..0x2100));
        assert_eq!(t.find(0x2100), None);
        assert!(!t.is_empty() && FdeTable::default().is_empty());
    }

    #[test]
    fn our_own_eh_frame_covers_this_function() {
        let elf = own_elf();
        let cfi = elf.cfi_sections();
        let t = FdeTable::of(&cfi);
        assert!(!t.is_empty());
        // This test's own code, as a file address: the runtime address
        // less the load bias of the mapping holding it.
        let here = lookups_find_the_holding_range_and_nothing_between as *const () as u64;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let m = maps
            .lines()
            .filter_map(super::super::modules::parse_maps_line)
            .find(|m| m.start <= here && here < m.end)
            .unwrap();
        let bias = elf.bias(m.start, m.offset).unwrap();
        let r = t.find(here - bias).expect("an FDE holds a Rust function");
        assert!(r.start <= here - bias && here - bias < r.end);
        assert_eq!(hdr_find(&cfi, here - bias), HdrLookup::Covered(r));
    }

    #[test]
    fn the_hdr_search_agrees_with_the_whole_table() {
        let elf = own_elf();
        let cfi = elf.cfi_sections();
        let t = FdeTable::of(&cfi);
        let text = elf.text.clone().expect("a .text");
        let (mut covered, mut uncovered) = (0, 0);
        // Every 61st byte of .text, and each FDE's first and last bytes
        // and the one past it.
        let probes = (text.clone().step_by(61))
            .chain(t.ranges.iter().flat_map(|r| [r.start, r.end - 1, r.end]));
        for a in probes {
            let want = match t.find(a) {
                Some(r) => {
                    covered += 1;
                    HdrLookup::Covered(r)
                }
                None => {
                    uncovered += 1;
                    HdrLookup::Uncovered
                }
            };
            assert_eq!(hdr_find(&cfi, a), want, "at {a:#x}");
        }
        assert!(covered > 1000 && uncovered > 0, "{covered} {uncovered}");
        // Without the header's bytes there is no table to search.
        let no_hdr = CfiSections {
            eh_frame_hdr_data: None,
            ..cfi
        };
        assert_eq!(hdr_find(&no_hdr, text.start), HdrLookup::NoTable);
    }

    proptest::proptest! {
        #![proptest_config(crate::hostile::config(256))]

        /// A module's bytes are hostile: a mutated header or
        /// `.eh_frame` gives an answer, never a panic or a hang.
        #[test]
        fn mutated_cfi_never_panics(
            ms in crate::hostile::mutations(),
            on_hdr in proptest::bool::ANY,
            at in 0..1u64 << 20,
        ) {
            let elf = own_elf();
            let cfi = elf.cfi_sections();
            let (eh, eh_at) = cfi.eh_frame.unwrap();
            let hdr = cfi.eh_frame_hdr_data.unwrap();
            let (eh, hdr) = if on_hdr {
                (eh.to_vec(), crate::hostile::mutate(hdr, &ms))
            } else {
                (crate::hostile::mutate(eh, &ms), hdr.to_vec())
            };
            let bad = CfiSections {
                eh_frame: Some((&eh, eh_at)),
                eh_frame_hdr_data: Some(&hdr),
                ..cfi
            };
            let text = elf.text.clone().unwrap();
            let _ = hdr_find(&bad, text.start + at % (text.end - text.start));
        }
    }

    fn own_elf() -> &'static super::super::modules::ElfInfo {
        static ELF: std::sync::OnceLock<super::super::modules::ElfInfo> =
            std::sync::OnceLock::new();
        ELF.get_or_init(|| {
            let file = std::fs::File::open("/proc/self/exe").unwrap();
            super::super::modules::parse_elf(&file).expect("our own ELF")
        })
    }
}
