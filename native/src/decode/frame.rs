//! `offsetd.events.frames.decode_frame`: a frame's records, borrowed from its bytes.
//!
//! Version 1, big-endian: `0x01`, u16 topic count, each topic (u16 length, UTF-8), then per
//! record: u16 topic index, i32 partition, i64 offset, i64 timestamp, i32 key length, i32
//! value length, u16 header count, the key, the value, then each header (u16 name length,
//! i32 value length, the name, the value). A negative length (not only -1) is a null.
//!
//! Python raises for the whole frame (Malformed) when any part reads past the end, a topic
//! index names no topic, or a topic or header name is not UTF-8; so does `frame_records`.

/// One record of a frame, as `RawRecord` holds it (`headers` empty for a status record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRef<'a> {
    pub topic: &'a str,
    /// Its topic's index in the frame's topic table (`Frame::topics`).
    pub topic_index: u16,
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: Vec<(&'a str, Option<&'a [u8]>)>,
}

/// A frame's topic table and records, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<'a> {
    pub topics: Vec<&'a str>,
    pub records: Vec<RawRef<'a>>,
}

/// Why a frame is not one (Python: `Malformed("not an offsetd frame (...)")`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    Version,
    Truncated,
    TopicIndex,
    NotUtf8,
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FrameError::Version => "not an offsetd frame (unknown frame version)",
            FrameError::Truncated => "not an offsetd frame (truncated)",
            FrameError::TopicIndex => "not an offsetd frame (a topic index beyond its topics)",
            FrameError::NotUtf8 => "not an offsetd frame (a name that is not UTF-8)",
        })
    }
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], FrameError> {
        let end = self.at.checked_add(n).ok_or(FrameError::Truncated)?;
        let taken = self.data.get(self.at..end).ok_or(FrameError::Truncated)?;
        self.at = end;
        Ok(taken)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], FrameError> {
        let bytes = self.take(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    fn u16(&mut self) -> Result<u16, FrameError> {
        self.array().map(u16::from_be_bytes)
    }

    fn i32(&mut self) -> Result<i32, FrameError> {
        self.array().map(i32::from_be_bytes)
    }

    fn i64(&mut self) -> Result<i64, FrameError> {
        self.array().map(i64::from_be_bytes)
    }

    fn text(&mut self, n: usize) -> Result<&'a str, FrameError> {
        super::text::utf8(self.take(n)?).ok_or(FrameError::NotUtf8)
    }

    /// A length-prefixed part: None for a negative length.
    fn optional(&mut self, length: i32) -> Result<Option<&'a [u8]>, FrameError> {
        match usize::try_from(length) {
            Ok(n) => self.take(n).map(Some),
            Err(_) => Ok(None),
        }
    }
}

/// The topics and records of a frame; an error whenever `decode_frame` raises.
pub fn frame(data: &[u8]) -> Result<Frame<'_>, FrameError> {
    if data.first() != Some(&1) {
        return Err(FrameError::Version);
    }
    let mut reader = Reader { data, at: 1 };
    let count = reader.u16()?;
    let mut topics = Vec::with_capacity(count.into());
    for _ in 0..count {
        let length = reader.u16()?;
        topics.push(reader.text(length.into())?);
    }
    let mut records = Vec::new();
    while reader.at < data.len() {
        let topic_index = reader.u16()?;
        let partition = reader.i32()?;
        let offset = reader.i64()?;
        let timestamp_ms = reader.i64()?;
        let key_length = reader.i32()?;
        let value_length = reader.i32()?;
        let header_count = reader.u16()?;
        let key = reader.optional(key_length)?;
        let value = reader.optional(value_length)?;
        let mut headers = Vec::with_capacity(header_count.into());
        for _ in 0..header_count {
            let name_length = reader.u16()?;
            let header_length = reader.i32()?;
            let name = reader.text(name_length.into())?;
            headers.push((name, reader.optional(header_length)?));
        }
        let topic = *topics
            .get(usize::from(topic_index))
            .ok_or(FrameError::TopicIndex)?;
        records.push(RawRef {
            topic,
            topic_index,
            partition,
            offset,
            timestamp_ms,
            key,
            value,
            headers,
        });
    }
    Ok(Frame { topics, records })
}

/// The records of a frame (`frame(data)`'s), for a caller that needs no topic table.
pub fn frame_records(data: &[u8]) -> Result<Vec<RawRef<'_>>, FrameError> {
    frame(data).map(|f| f.records)
}
