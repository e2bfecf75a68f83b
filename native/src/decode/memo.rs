//! The decoders' memos, as Python keeps them (`status._HEADS`, `status._FIELDS_MEMO`,
//! `status._ERRORS`, `dlq._ERRORS`): the same keys, bounds and clearing.
//!
//! A worker writes the same short status value for every task it runs and a failing task the
//! same trace again and again: their fields are read once. One `Arc<ErrorInfo>` per error
//! also lets the matcher remember its answers per error, as Python's `RuleSet.live` does per
//! instance. Every memo is a pure function of its key, so what is remembered never changes
//! an answer; only successes are remembered.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use indexmap::{Equivalent, IndexMap};

use crate::event::ErrorInfo;

/// foldhash, not SipHash: the keys are trace heads of up to 4 KiB and values of 512 bytes,
/// hashed once per record; they come from Connect, not from whoever could aim at collisions
/// in a map that is cleared when full anyway.
type Hashing = foldhash::fast::RandomState;

/// Keys and values up to this many bytes are remembered (`_MEMO_KEY_BYTES`,
/// `_MEMO_VALUE_BYTES`).
pub const MEMO_BYTES: usize = 512;
/// A memo holding this many entries is emptied before the next (`_MEMO_ENTRIES`).
pub const MEMO_ENTRIES: usize = 4096;
/// The same for the errors (`_MAX_ERRORS`, in both decoders).
pub const MAX_ERRORS: usize = 1024;

/// What a connector or task status key names (`_key_head`'s answer).
#[derive(Debug, Clone)]
pub struct Head {
    pub connector: String,
    /// None for a connector's key.
    pub task_id: Option<i64>,
}

/// A status value's checked fields (`_checked_fields`' answer).
#[derive(Debug, Clone)]
pub struct StatusFields {
    pub state: &'static str,
    pub worker_id: Option<String>,
    pub generation: i64,
    pub error: Option<Arc<ErrorInfo>>,
}

/// A DLQ error's key: exception class, message, trace head, stage, executing class
/// (`dlq._error_of`'s tuple; a missing trace is an empty one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DlqErrorKey(pub [Option<String>; 5]);

/// The same key, borrowed from a record's headers: looked up without copying them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DlqErrorRef<'a>(pub [Option<&'a str>; 5]);

impl Hash for DlqErrorKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        for part in &self.0 {
            part.as_deref().hash(state);
        }
    }
}

impl Hash for DlqErrorRef<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        for part in &self.0 {
            part.hash(state);
        }
    }
}

impl Equivalent<DlqErrorKey> for DlqErrorRef<'_> {
    fn equivalent(&self, key: &DlqErrorKey) -> bool {
        self.0.iter().zip(&key.0).all(|(a, b)| *a == b.as_deref())
    }
}

impl DlqErrorRef<'_> {
    pub fn to_owned_key(&self) -> DlqErrorKey {
        DlqErrorKey(self.0.map(|part| part.map(str::to_owned)))
    }
}

/// Everything the decoders remember between records (one per owner, like Python's module
/// globals are one per process).
#[derive(Debug, Default)]
pub struct DecodeMemo {
    pub heads: HashMap<Vec<u8>, Head, Hashing>,
    pub fields: HashMap<Vec<u8>, StatusFields, Hashing>,
    pub status_errors: HashMap<String, Arc<ErrorInfo>, Hashing>,
    pub dlq_errors: IndexMap<DlqErrorKey, Arc<ErrorInfo>, Hashing>,
}

impl DecodeMemo {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn remember_head(&mut self, key: &[u8], head: &Head) {
        if key.len() <= MEMO_BYTES {
            if self.heads.len() >= MEMO_ENTRIES {
                self.heads.clear();
            }
            self.heads.insert(key.to_vec(), head.clone());
        }
    }

    pub fn remember_fields(&mut self, value: &[u8], fields: &StatusFields) {
        if value.len() <= MEMO_BYTES {
            if self.fields.len() >= MEMO_ENTRIES {
                self.fields.clear();
            }
            self.fields.insert(value.to_vec(), fields.clone());
        }
    }

    /// The status error of a trace head, made once (`status._error_of`).
    pub fn status_error(&mut self, head: &str, make: impl FnOnce() -> ErrorInfo) -> Arc<ErrorInfo> {
        if let Some(found) = self.status_errors.get(head) {
            return found.clone();
        }
        let made = Arc::new(make());
        if self.status_errors.len() >= MAX_ERRORS {
            self.status_errors.clear();
        }
        self.status_errors.insert(head.to_owned(), made.clone());
        made
    }

    /// The DLQ error of a record's error headers, made once (`dlq._error_of`).
    pub fn dlq_error(
        &mut self,
        key: DlqErrorRef<'_>,
        make: impl FnOnce() -> ErrorInfo,
    ) -> Arc<ErrorInfo> {
        if let Some(found) = self.dlq_errors.get(&key) {
            return found.clone();
        }
        let made = Arc::new(make());
        if self.dlq_errors.len() >= MAX_ERRORS {
            self.dlq_errors.clear();
        }
        self.dlq_errors.insert(key.to_owned_key(), made.clone());
        made
    }
}
