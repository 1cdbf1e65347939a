//! The ELF loader an executable names (`PT_INTERP`): the kernel opens it for execution along
//! with the interpreter, so Landlock must let it be executed too — and nothing else.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

const PT_INTERP: u32 = 3;
/// Program headers read at most (real executables have about a dozen).
const MAX_HEADERS: u64 = 256;
/// The longest loader path read.
const MAX_PATH: u64 = 4096;

/// The loader named by the executable at `path`; `None` for a static executable or a file that
/// is not ELF (a script's interpreter is not followed).
pub(super) fn interpreter(path: &Path) -> io::Result<Option<PathBuf>> {
    let mut file = File::open(path)?;
    let mut ident = [0u8; 64];
    let read = read_up_to(&mut file, &mut ident)?;
    if read < 52 || ident[..4] != *b"\x7fELF" {
        return Ok(None);
    }
    let wide = match ident[4] {
        1 => false,
        2 => true,
        _ => return Ok(None),
    };
    let big = match ident[5] {
        1 => false,
        2 => true,
        _ => return Ok(None),
    };
    let num = Num { big };
    let (phoff, phentsize, phnum) = if wide {
        (
            num.u64(&ident[32..40]),
            num.u16(&ident[54..56]),
            num.u16(&ident[56..58]),
        )
    } else {
        (
            u64::from(num.u32(&ident[28..32])),
            num.u16(&ident[42..44]),
            num.u16(&ident[44..46]),
        )
    };
    let entry_len = if wide { 56 } else { 32 };
    if u64::from(phentsize) < entry_len {
        return Ok(None);
    }
    for index in 0..u64::from(phnum).min(MAX_HEADERS) {
        let at = phoff.saturating_add(index.saturating_mul(u64::from(phentsize)));
        let mut header = [0u8; 56];
        let header = &mut header[..usize::try_from(entry_len).unwrap_or(56)];
        file.seek(SeekFrom::Start(at))?;
        file.read_exact(header)?;
        if num.u32(&header[0..4]) != PT_INTERP {
            continue;
        }
        let (offset, size) = if wide {
            (num.u64(&header[8..16]), num.u64(&header[32..40]))
        } else {
            (
                u64::from(num.u32(&header[4..8])),
                u64::from(num.u32(&header[16..20])),
            )
        };
        let mut name = vec![0u8; usize::try_from(size.min(MAX_PATH)).unwrap_or(0)];
        file.seek(SeekFrom::Start(offset))?;
        file.read_exact(&mut name)?;
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        if end == 0 {
            return Ok(None);
        }
        return Ok(Some(PathBuf::from(std::ffi::OsStr::from_bytes(
            &name[..end],
        ))));
    }
    Ok(None)
}

fn read_up_to(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

/// Reads integers in the file's byte order.
struct Num {
    big: bool,
}

impl Num {
    fn u16(&self, b: &[u8]) -> u16 {
        let b = [b[0], b[1]];
        if self.big {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        }
    }

    fn u32(&self, b: &[u8]) -> u32 {
        let b = [b[0], b[1], b[2], b[3]];
        if self.big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    }

    fn u64(&self, b: &[u8]) -> u64 {
        let b = [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]];
        if self.big {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_loader_of_a_dynamic_executable() {
        // The test binary itself is a dynamically linked ELF file on every Linux this runs on.
        let exe = std::env::current_exe().unwrap();
        let loader = interpreter(&exe).unwrap().expect("a PT_INTERP");
        assert!(loader.is_absolute(), "{}", loader.display());
        assert!(loader.exists(), "{}", loader.display());
    }

    #[test]
    fn non_elf_and_truncated_files_have_none() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("script");
        std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
        assert_eq!(interpreter(&script).unwrap(), None);
        let cut = dir.path().join("cut");
        std::fs::write(&cut, b"\x7fELF\x02\x01").unwrap();
        assert_eq!(interpreter(&cut).unwrap(), None);
        // Headers that point past the end are an error, not a panic.
        let mut bogus = vec![0u8; 64];
        bogus[..6].copy_from_slice(b"\x7fELF\x02\x01");
        bogus[32..40].copy_from_slice(&1_000_000u64.to_le_bytes());
        bogus[54..56].copy_from_slice(&56u16.to_le_bytes());
        bogus[56..58].copy_from_slice(&1u16.to_le_bytes());
        let path = dir.path().join("bogus");
        std::fs::write(&path, bogus).unwrap();
        assert!(interpreter(&path).is_err());
    }
}
