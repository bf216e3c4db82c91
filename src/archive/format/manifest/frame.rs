//! Record framing: every manifest record is self-delimiting, versioned and checksummed.
//!
//! ```text
//! offset  size  field
//! 0       4     magic  b"SAmr"
//! 4       2     format version, u16 little-endian (1; 2 for the lifecycle records; 3 for
//!               the cold tier's)
//! 6       2     reserved, zero
//! 8       4     payload length in bytes, u32 little-endian
//! 12      4     CRC-32C (Castagnoli) of bytes 4..12 followed by the payload, u32 LE
//! 16      n     payload: one UTF-8 JSON object (a record)
//! ```

/// The four bytes every record starts with.
pub const MAGIC: [u8; 4] = *b"SAmr";
/// The highest record format this build writes and reads. Version 1 records (declarations,
/// barriers, snapshots without lifecycle state) are still written as version 1, so an archive
/// that never retires or compacts stays readable by a version-1 build; the lifecycle records
/// are version 2, which a version-1 build refuses rather than misreads; the cold tier's
/// `offload` record (and a snapshot naming a cold file) is version 3, which a version-2 build
/// refuses; a compaction that writes level tables (and a snapshot naming one) is version 4,
/// which a version-3 build refuses; a record naming a file that stores its integers signed
/// (every barrier and compaction of this build, and a snapshot naming such a file) is
/// version 5, which a version-4 build refuses; a record naming a data file whose row groups
/// pack several tracks (every barrier of this build, and a snapshot naming such a file) is
/// version 6, which a version-5 build refuses; a compaction whose data files pack several
/// tracks is version 7, which a version-6 build refuses; a record that defers a stream's
/// level partials or summarises deferred rows (and a snapshot of a stream with deferred
/// rows) is version 8, which a version-7 build refuses rather than answer a survey from level
/// files that lack those rows; a record naming a packed file whose entries are columns
/// (`"format":9`: every barrier and compaction of this build) is version 9, which a version-8
/// build refuses rather than misread the columns as missing entries; a record one of whose
/// file entries is paged (more than 512 entries, its pages after its JSON) is version 10,
/// which a version-9 build refuses rather than read a record it cannot parse as damage; a
/// record naming a data file recorded by its row groups (its slices read from its rows) is
/// version 11, which a version-10 build refuses.
pub const FORMAT_VERSION: u16 = 11;

/// The frame version of a record with pages after its JSON (format version 10): only such a
/// record is framed so.
pub const PAGED_VERSION: u16 = 10;
/// The lowest record format this build reads.
pub const OLDEST_VERSION: u16 = 1;
/// Bytes before the payload.
pub const HEADER_LEN: usize = 16;
/// Largest payload accepted (a snapshot of a very large archive still fits).
pub const MAX_PAYLOAD: u32 = 1 << 30;

/// Frames `payload` as one version-1 record.
pub fn encode(payload: &[u8]) -> Vec<u8> {
    encode_version(OLDEST_VERSION, payload)
}

/// Frames `payload` as one record of format `version`.
pub fn encode_version(version: u16, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("a record payload is far below 4 GiB");
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[4..12]), payload);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// What the bytes at an offset hold.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A record that passed its check: its payload and the offset just past it.
    Record {
        /// The JSON payload.
        payload: &'a [u8],
        /// Where the next record starts.
        next: usize,
    },
    /// A record that passed its check but carries a version this build does not know.
    UnknownVersion(u16),
    /// Nothing here passes the check (torn, damaged, or not a record at all).
    Failed,
    /// The end of the log, exactly.
    End,
}

/// Decodes the record starting at `offset`.
pub fn decode(bytes: &[u8], offset: usize) -> Decoded<'_> {
    let rest = &bytes[offset.min(bytes.len())..];
    if rest.is_empty() {
        return Decoded::End;
    }
    if rest.len() < HEADER_LEN || rest[..4] != MAGIC {
        return Decoded::Failed;
    }
    let word = |at: usize| u32::from_le_bytes([rest[at], rest[at + 1], rest[at + 2], rest[at + 3]]);
    let version = u16::from_le_bytes([rest[4], rest[5]]);
    let len = word(8);
    if len > MAX_PAYLOAD || rest.len() < HEADER_LEN + len as usize {
        return Decoded::Failed;
    }
    let payload = &rest[HEADER_LEN..HEADER_LEN + len as usize];
    let crc = crc32c::crc32c_append(crc32c::crc32c(&rest[4..12]), payload);
    if crc != word(12) {
        return Decoded::Failed;
    }
    if !(OLDEST_VERSION..=FORMAT_VERSION).contains(&version) {
        return Decoded::UnknownVersion(version);
    }
    Decoded::Record {
        payload,
        next: offset + HEADER_LEN + len as usize,
    }
}

/// What the bytes after the last record that passed its check look like, when no record
/// passing its check follows them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TailShape {
    /// What an interrupted append can leave: a prefix of one frame (its header fields sane as
    /// far as they go, its payload cut before the end of its JSON object), or bytes of which
    /// a range reads as zeros (a power cut before the append was synced).
    Torn,
    /// What no interrupted append leaves: a record that was once whole, damaged since.
    Damaged(String),
}

/// Classifies `rest`, the bytes from the first failing offset to the end of the generation,
/// when no record passing its check follows. An append writes a frame front to back and is
/// acknowledged only after its sync, so an unacknowledged record is cut short or (under a
/// power cut) partly zeroed; a whole-length frame whose checksum fails, a header field no
/// writer writes, or a payload whose JSON object is complete though the length field asks
/// for more, was written whole and damaged since.
pub fn classify_tail(rest: &[u8]) -> TailShape {
    let zeroed =
        rest.iter().take(4).any(|&b| b == 0) || rest.iter().skip(HEADER_LEN).any(|&b| b == 0);
    if zeroed {
        // serde_json never writes a NUL byte, and the magic holds none: only a power cut
        // before the sync (the file's length made durable, its data not) zeroes them.
        return TailShape::Torn;
    }
    // A record with pages (framed as version 10 or later, its JSON indexing them) cut right
    // after its JSON: complete JSON, its pages still to come. A version-11 record need not
    // have pages: only a JSON that indexes pages (`"pages":[`, which no label can hold: a
    // label is a string, never followed by a colon) was followed by them.
    let pages_cut =
        rest.len() >= 12 && u16::from_le_bytes([rest[4], rest[5]]) >= PAGED_VERSION && {
            let len = u32::from_le_bytes([rest[8], rest[9], rest[10], rest[11]]) as usize;
            rest.len() < HEADER_LEN.saturating_add(len)
                && rest[HEADER_LEN.min(rest.len())..]
                    .windows(9)
                    .any(|w| w == br#""pages":["#)
        };
    if rest.len() > HEADER_LEN
        && serde_json::from_slice::<serde_json::Value>(&rest[HEADER_LEN..]).is_ok()
    {
        if pages_cut {
            return TailShape::Torn;
        }
        // The payload is whole, up to the end of the file: the header is what was written
        // with it, unless a power cut zeroed some of its bytes before the sync.
        let payload = &rest[HEADER_LEN..];
        // A range of at least two bytes zeroed, and nothing else changed: a single byte
        // gone to zero is what a flipped bit leaves too, and is damage.
        let zeroed_header = (OLDEST_VERSION..=FORMAT_VERSION).any(|v| {
            let written = encode_version(v, payload);
            let differ = written.iter().zip(rest).filter(|(w, r)| w != r).count();
            written.len() == rest.len()
                && differ >= 2
                && written.iter().zip(rest).all(|(w, r)| w == r || *r == 0)
        });
        if zeroed_header {
            return TailShape::Torn;
        }
        return TailShape::Damaged(format!(
            "a whole record ({} bytes, its JSON complete) fails its checksum",
            rest.len()
        ));
    }
    let magic = rest.len().min(4);
    if rest[..magic] != MAGIC[..magic] {
        return TailShape::Damaged(format!(
            "the {} byte(s) there do not start a record (no `SAmr` header)",
            rest.len()
        ));
    }
    if rest.len() >= 6 {
        let version = u16::from_le_bytes([rest[4], rest[5]]);
        if !(OLDEST_VERSION..=FORMAT_VERSION).contains(&version) {
            return TailShape::Damaged(format!(
                "the record there names format version {version}, which no writer of this archive writes"
            ));
        }
    }
    if rest.len() >= 8 && rest[6..8] != [0, 0] {
        return TailShape::Damaged("the record's reserved header bytes are not zero".into());
    }
    if rest.len() < 12 {
        return TailShape::Torn;
    }
    let len = u32::from_le_bytes([rest[8], rest[9], rest[10], rest[11]]);
    if len > MAX_PAYLOAD {
        return TailShape::Damaged(format!(
            "the record's length field says {len} bytes, above the largest record ({MAX_PAYLOAD})"
        ));
    }
    let whole = HEADER_LEN + len as usize;
    if rest.len() >= whole {
        return TailShape::Damaged(format!(
            "a whole record ({whole} bytes{}) fails its checksum",
            if rest.len() > whole {
                format!(", then {} byte(s) more", rest.len() - whole)
            } else {
                String::new()
            }
        ));
    }
    if rest.len() > HEADER_LEN {
        let present = &rest[HEADER_LEN..];
        let mut values =
            serde_json::Deserializer::from_slice(present).into_iter::<serde_json::Value>();
        // A record with pages (format version 10) is its JSON, a newline and then the pages:
        // its JSON complete with the pages cut short is what a torn append leaves.
        let pages_follow = |end: usize| present.get(end) == Some(&b'\n');
        if let Some(Ok(_)) = values
            .next()
            .filter(|_| !pages_follow(values.byte_offset()))
        {
            return TailShape::Damaged(format!(
                "the record's length field asks for {len} bytes, but a complete record of {} byte(s) is there",
                values.byte_offset()
            ));
        }
    }
    TailShape::Torn
}

/// Offsets after `from` at which a record passing its check starts: evidence that a failed
/// record sits in the middle of the log rather than at its torn end.
pub fn valid_records_after(bytes: &[u8], from: usize) -> Vec<usize> {
    let mut found = Vec::new();
    let mut at = from + 1;
    while at + HEADER_LEN <= bytes.len() {
        match bytes[at..].windows(4).position(|w| w == MAGIC) {
            None => break,
            Some(skip) => {
                at += skip;
                if matches!(
                    decode(bytes, at),
                    Decoded::Record { .. } | Decoded::UnknownVersion(_)
                ) {
                    found.push(at);
                }
                at += 1;
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_torn_prefix_fails() {
        let framed = encode(br#"{"record":"x"}"#);
        assert_eq!(
            decode(&framed, 0),
            Decoded::Record {
                payload: br#"{"record":"x"}"#,
                next: framed.len()
            }
        );
        assert_eq!(decode(&framed, framed.len()), Decoded::End);
        for cut in 1..framed.len() {
            assert_eq!(decode(&framed[..cut], 0), Decoded::Failed, "cut at {cut}");
        }
    }

    #[test]
    fn every_flipped_bit_fails_the_check() {
        let framed = encode(br#"{"a":1}"#);
        for byte in 0..framed.len() {
            for bit in 0..8 {
                let mut bad = framed.clone();
                bad[byte] ^= 1 << bit;
                assert!(
                    !matches!(decode(&bad, 0), Decoded::Record { .. }),
                    "flip {byte}:{bit} passed"
                );
            }
        }
    }

    #[test]
    fn resync_finds_records_after_damage() {
        let mut log = encode(b"{}");
        let second = log.len();
        log.extend(encode(b"{}"));
        log[HEADER_LEN] ^= 0xff;
        assert_eq!(decode(&log, 0), Decoded::Failed);
        assert_eq!(valid_records_after(&log, 0), vec![second]);
    }
}
