//! Just enough ELF to read the symbol table of a relocatable object (32 or 64 bits, either byte
//! order): which symbols it defines, with their binding and visibility. `cpu.rs` uses it to
//! choose the symbols a CPU object keeps to itself and to name the symbols that two objects of a
//! build both define. Anything that is not a well-formed ELF file gives `None`.

/// `STB_GLOBAL`.
pub(crate) const BIND_GLOBAL: u8 = 1;
/// `STB_GNU_UNIQUE` (GCC's binding for the static locals of inline functions).
pub(crate) const BIND_GNU_UNIQUE: u8 = 10;
/// `STV_INTERNAL`.
const VIS_INTERNAL: u8 = 1;
/// `STV_HIDDEN`.
const VIS_HIDDEN: u8 = 2;
/// `STT_SECTION`, `STT_FILE`: not symbols of the program.
const TYPE_SECTION: u8 = 3;
const TYPE_FILE: u8 = 4;
/// `SHT_SYMTAB`.
const SECTION_SYMTAB: u32 = 2;
/// `SHT_GROUP`.
const SECTION_GROUP: u32 = 17;

/// A symbol that an object defines with a binding other than local.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Symbol {
    pub(crate) name: String,
    /// `BIND_GLOBAL`, `STB_WEAK` (2), `BIND_GNU_UNIQUE`, …
    pub(crate) bind: u8,
    /// `STV_HIDDEN` or `STV_INTERNAL`: not meant to be seen outside the object's module.
    pub(crate) hidden: bool,
}

/// Whether `bytes` start like an ELF file.
pub(crate) fn is_elf(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x7fELF")
}

/// The symbols `bytes` (an ELF object) defines with a non-local binding, in symbol table order;
/// `None` when it is not a well-formed ELF file.
pub(crate) fn defined_symbols(bytes: &[u8]) -> Option<Vec<Symbol>> {
    Some(tables(bytes)?.symbols)
}

/// What one walk over an object's tables finds: its non-local defined symbols and the names of
/// the signature symbols of its section groups (COMDAT groups: the linker keeps one group of
/// each signature in a program). A signature need not be a symbol the object defines as such:
/// a constructor's or destructor's group is named after its `C5`/`D5` name, a local symbol of
/// the group.
pub(crate) struct Tables {
    pub(crate) symbols: Vec<Symbol>,
    pub(crate) group_signatures: Vec<String>,
}

/// The object's [`Tables`], from one walk over its section headers; `None` when `bytes` is not
/// a well-formed ELF file.
pub(crate) fn tables(bytes: &[u8]) -> Option<Tables> {
    if !is_elf(bytes) {
        return None;
    }
    let file = File {
        bytes,
        wide: match bytes.get(4)? {
            1 => false,
            2 => true,
            _ => return None,
        },
        big_endian: match bytes.get(5)? {
            1 => false,
            2 => true,
            _ => return None,
        },
    };
    let (shoff, shentsize, mut shnum) = if file.wide {
        (file.u64(0x28)?, u64::from(file.u16(0x3a)?), u64::from(file.u16(0x3c)?))
    } else {
        (u64::from(file.u32(0x20)?), u64::from(file.u16(0x2e)?), u64::from(file.u16(0x30)?))
    };
    let mut tables = Tables { symbols: Vec::new(), group_signatures: Vec::new() };
    if shoff == 0 {
        return Some(tables);
    }
    let section = |index: u64| -> Option<Section> {
        let at = shoff.checked_add(index.checked_mul(shentsize)?)?;
        let at = usize::try_from(at).ok()?;
        Some(if file.wide {
            Section {
                kind: file.u32(at + 4)?,
                offset: file.u64(at + 24)?,
                size: file.u64(at + 32)?,
                link: file.u32(at + 40)?,
                info: file.u32(at + 44)?,
                entsize: file.u64(at + 56)?,
            }
        } else {
            Section {
                kind: file.u32(at + 4)?,
                offset: u64::from(file.u32(at + 16)?),
                size: u64::from(file.u32(at + 20)?),
                link: file.u32(at + 24)?,
                info: file.u32(at + 28)?,
                entsize: u64::from(file.u32(at + 36)?),
            }
        })
    };
    if shnum == 0 {
        // More sections than fit in e_shnum: the count is the first header's sh_size.
        shnum = section(0)?.size;
    }
    let entry = if file.wide { 24 } else { 16 };
    // Symbol `i` of the symbol table `symtab`: (name, info, other, shndx).
    let symbol = |symtab: &Section, i: u64| -> Option<(String, u8, u8, u16)> {
        if symtab.entsize != 0 && symtab.entsize < entry {
            return None;
        }
        let step = symtab.entsize.max(entry);
        if i.checked_add(1)?.checked_mul(step)? > symtab.size {
            return None;
        }
        let at = usize::try_from(symtab.offset.checked_add(i * step)?).ok()?;
        let (name, info, other, shndx) = if file.wide {
            (file.u32(at)?, *bytes.get(at + 4)?, *bytes.get(at + 5)?, file.u16(at + 6)?)
        } else {
            (file.u32(at)?, *bytes.get(at + 12)?, *bytes.get(at + 13)?, file.u16(at + 14)?)
        };
        let strtab = section(u64::from(symtab.link))?;
        let strings = file.range(strtab.offset, strtab.size)?;
        let name = strings.get(usize::try_from(name).ok()?..)?;
        let name = &name[..name.iter().position(|&b| b == 0)?];
        Some((String::from_utf8_lossy(name).into_owned(), info, other, shndx))
    };
    for index in 0..shnum {
        let header = section(index)?;
        if header.kind == SECTION_GROUP {
            let symtab = section(u64::from(header.link))?;
            tables.group_signatures.push(symbol(&symtab, u64::from(header.info))?.0);
            continue;
        }
        if header.kind != SECTION_SYMTAB {
            continue;
        }
        let step = header.entsize.max(entry);
        file.range(header.offset, header.size)?;
        for i in 0..(header.size / step) {
            let (name, info, other, shndx) = symbol(&header, i)?;
            let (bind, kind, visibility) = (info >> 4, info & 0xf, other & 0x3);
            if bind == 0 || shndx == 0 || kind == TYPE_SECTION || kind == TYPE_FILE {
                continue; // local, undefined, or not a symbol of the program
            }
            tables.symbols.push(Symbol {
                name,
                bind,
                hidden: visibility == VIS_HIDDEN || visibility == VIS_INTERNAL,
            });
        }
    }
    Some(tables)
}

struct Section {
    kind: u32,
    offset: u64,
    size: u64,
    link: u32,
    info: u32,
    entsize: u64,
}

struct File<'a> {
    bytes: &'a [u8],
    wide: bool,
    big_endian: bool,
}

impl File<'_> {
    fn array<const N: usize>(&self, at: usize) -> Option<[u8; N]> {
        self.bytes.get(at..at.checked_add(N)?)?.try_into().ok()
    }

    fn u16(&self, at: usize) -> Option<u16> {
        let raw = self.array(at)?;
        Some(if self.big_endian { u16::from_be_bytes(raw) } else { u16::from_le_bytes(raw) })
    }

    fn u32(&self, at: usize) -> Option<u32> {
        let raw = self.array(at)?;
        Some(if self.big_endian { u32::from_be_bytes(raw) } else { u32::from_le_bytes(raw) })
    }

    fn u64(&self, at: usize) -> Option<u64> {
        let raw = self.array(at)?;
        Some(if self.big_endian { u64::from_be_bytes(raw) } else { u64::from_le_bytes(raw) })
    }

    fn range(&self, offset: u64, size: u64) -> Option<&[u8]> {
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(usize::try_from(size).ok()?)?;
        self.bytes.get(start..end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_or_foreign_files_give_none() {
        assert_eq!(defined_symbols(b""), None);
        assert_eq!(defined_symbols(b"!<arch>\n"), None);
        assert_eq!(defined_symbols(b"\x7fELF\x02\x01\x01"), None);
        let mut header = vec![0u8; 64];
        header[..6].copy_from_slice(b"\x7fELF\x02\x01");
        header[0x28] = 0xff; // section headers past the end
        header[0x3c] = 1;
        header[0x3a] = 64;
        assert_eq!(defined_symbols(&header), None);
    }

    /// The test's own executable is ELF on Linux: its symbols parse.
    #[cfg(target_os = "linux")]
    #[test]
    fn reads_a_real_file() {
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let symbols = defined_symbols(&exe).expect("an ELF file");
        assert!(symbols.iter().any(|s| s.name == "main" && s.bind == BIND_GLOBAL), "no main");
    }
}
