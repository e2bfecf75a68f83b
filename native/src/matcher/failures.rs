//! `offsetd.events.failures.classify`: what kind of failure an error is, from the exception
//! classes of its trace. The catalogue and the decision order are Python's (the tests hold
//! `CATALOG` equal to Python's, entry for entry, and `classify` equal on random and recorded
//! traces).
//!
//! The trace's class lines are read by hand, as `_CLASS_LINE` (Python `re`, MULTILINE) reads
//! them: a line, an optional `Caused by: `, a dotted name `[A-Za-z_$][\w$]*(\.[\w$]+)+`, then
//! `:` or the line's end. Python's `\w` is Unicode (`str.isalnum()` of its Unicode version):
//! where a non-ASCII character would decide whether a name goes on, this says `Undecided`
//! rather than guess (Python classifies that error).

use crate::event::ErrorInfo;
use crate::matcher::glob::Glob;
use crate::matcher::Undecided;

/// `FailureClass`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureClass {
    Transient,
    PoisonRecord,
    Configuration,
    Unknown,
}

impl FailureClass {
    pub fn name(self) -> &'static str {
        match self {
            FailureClass::Transient => "transient",
            FailureClass::PoisonRecord => "poison_record",
            FailureClass::Configuration => "configuration",
            FailureClass::Unknown => "unknown",
        }
    }

    pub fn from_name(name: &str) -> Option<FailureClass> {
        Some(match name {
            "transient" => FailureClass::Transient,
            "poison_record" => FailureClass::PoisonRecord,
            "configuration" => FailureClass::Configuration,
            "unknown" => FailureClass::Unknown,
            _ => return None,
        })
    }
}

use FailureClass::{Configuration as C, PoisonRecord as P, Transient as T};

/// `CATALOG`, in its order: exact names first, then the globs in this order.
pub const CATALOG: &[(&str, FailureClass)] = &[
    ("org.apache.kafka.common.config.ConfigException", C),
    (
        "org.apache.kafka.common.errors.InvalidConfigurationException",
        C,
    ),
    (
        "org.apache.kafka.common.errors.UnsupportedVersionException",
        C,
    ),
    ("org.apache.kafka.common.errors.InvalidTopicException", C),
    ("org.apache.kafka.common.errors.*AuthenticationException", C),
    ("org.apache.kafka.common.errors.*AuthorizationException", C),
    ("org.apache.kafka.connect.errors.NotFoundException", C),
    ("javax.security.auth.login.LoginException", C),
    ("javax.net.ssl.SSLHandshakeException", C),
    ("java.sql.SQLInvalidAuthorizationSpecException", C),
    ("java.sql.SQLSyntaxErrorException", C),
    ("java.sql.SQLFeatureNotSupportedException", C),
    ("java.lang.ClassNotFoundException", C),
    ("java.lang.NoClassDefFoundError", C),
    ("java.nio.file.AccessDeniedException", C),
    ("java.nio.file.NotDirectoryException", C),
    ("org.apache.kafka.connect.errors.DataException", P),
    ("org.apache.kafka.connect.errors.SchemaBuilderException", P),
    (
        "org.apache.kafka.connect.errors.SchemaProjectorException",
        P,
    ),
    ("org.apache.kafka.common.errors.SerializationException", P),
    ("org.apache.kafka.common.errors.RecordTooLargeException", P),
    ("org.apache.kafka.common.errors.InvalidRecordException", P),
    ("org.apache.kafka.common.InvalidRecordException", P),
    ("com.fasterxml.jackson.core.JsonParseException", P),
    ("com.fasterxml.jackson.core.exc.StreamReadException", P),
    ("com.fasterxml.jackson.databind.exc.*", P),
    ("org.apache.avro.AvroRuntimeException", P),
    ("org.apache.avro.AvroTypeException", P),
    ("org.apache.avro.SchemaParseException", P),
    ("java.sql.SQLDataException", P),
    ("java.sql.SQLIntegrityConstraintViolationException", P),
    ("org.apache.kafka.connect.errors.RetriableException", T),
    ("org.apache.kafka.common.errors.RetriableException", T),
    ("org.apache.kafka.common.errors.TimeoutException", T),
    ("org.apache.kafka.common.errors.NetworkException", T),
    ("org.apache.kafka.common.errors.DisconnectException", T),
    (
        "org.apache.kafka.common.errors.NotLeaderOrFollowerException",
        T,
    ),
    (
        "org.apache.kafka.common.errors.LeaderNotAvailableException",
        T,
    ),
    (
        "org.apache.kafka.common.errors.NotEnoughReplicas*Exception",
        T,
    ),
    ("org.apache.kafka.common.errors.Coordinator*Exception", T),
    ("org.apache.kafka.common.errors.NotCoordinatorException", T),
    (
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException",
        T,
    ),
    ("org.apache.kafka.common.errors.KafkaStorageException", T),
    (
        "org.apache.kafka.common.errors.RebalanceInProgressException",
        T,
    ),
    (
        "org.apache.kafka.common.errors.ThrottlingQuotaExceededException",
        T,
    ),
    ("java.net.ConnectException", T),
    ("java.net.SocketException", T),
    ("java.net.SocketTimeoutException", T),
    ("java.net.NoRouteToHostException", T),
    ("java.net.UnknownHostException", T),
    ("java.net.http.HttpTimeoutException", T),
    ("java.net.http.HttpConnectTimeoutException", T),
    ("java.util.concurrent.TimeoutException", T),
    ("java.nio.file.NoSuchFileException", T),
    ("java.sql.SQLTransient*Exception", T),
    ("java.sql.SQLRecoverableException", T),
    ("java.sql.SQLTimeoutException", T),
    ("org.apache.http.conn.ConnectTimeoutException", T),
    ("org.apache.http.NoHttpResponseException", T),
];

const TOLERANCE_EXCEEDED: &str = "Tolerance exceeded in error handler";
const CAUSED_BY: &str = "Caused by: ";

/// A failure's class and what decided it (`Failure`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure<'a> {
    pub class: FailureClass,
    pub because: &'a str,
}

/// The catalogue compiled once: exact names in a map, the globs in order.
pub struct Classifier {
    exact: std::collections::HashMap<&'static str, FailureClass>,
    globs: Vec<(Glob, FailureClass)>,
}

impl Default for Classifier {
    fn default() -> Self {
        Self::new()
    }
}

impl Classifier {
    pub fn new() -> Classifier {
        let mut exact = std::collections::HashMap::new();
        let mut globs = Vec::new();
        for &(name, class) in CATALOG {
            if name.contains('*') {
                // the catalogue's globs are constants that compile
                if let Ok(glob) = Glob::new(name) {
                    globs.push((glob, class));
                }
            } else {
                exact.insert(name, class);
            }
        }
        Classifier { exact, globs }
    }

    fn class_of(&self, name: &str) -> Option<FailureClass> {
        if let Some(&class) = self.exact.get(name) {
            return Some(class);
        }
        self.globs
            .iter()
            .find(|(glob, _)| glob.matches(name))
            .map(|&(_, class)| class)
    }

    /// `classify(error)` (`None`: no error, `unknown`).
    pub fn classify<'a>(&self, error: Option<&'a ErrorInfo>) -> Result<Failure<'a>, Undecided> {
        let Some(error) = error else {
            return Ok(Failure {
                class: FailureClass::Unknown,
                because: "no error",
            });
        };
        let mut chain: Vec<&'a str> = Vec::with_capacity(4);
        let mut add = |name: &'a str| {
            if !name.is_empty() && !chain.contains(&name) {
                chain.push(name);
            }
        };
        if let Some(outer) = error.exception_class.as_deref() {
            add(outer);
        }
        for name in class_lines(&error.trace_head)? {
            add(name);
        }
        if let Some(root) = error.root_cause_class.as_deref() {
            add(root);
        }
        let mut deepest: Option<(&'a str, FailureClass)> = None;
        for name in chain {
            match self.class_of(name) {
                Some(FailureClass::Configuration) => {
                    return Ok(Failure {
                        class: FailureClass::Configuration,
                        because: name,
                    })
                }
                Some(class) => deepest = Some((name, class)),
                None => {}
            }
        }
        if let Some((because, class)) = deepest {
            return Ok(Failure { class, because });
        }
        let message = error.message.as_deref().unwrap_or("");
        if message.contains(TOLERANCE_EXCEEDED) || error.trace_head.contains(TOLERANCE_EXCEEDED) {
            return Ok(Failure {
                class: FailureClass::PoisonRecord,
                because: TOLERANCE_EXCEEDED,
            });
        }
        Ok(Failure {
            class: FailureClass::Unknown,
            because: "no known exception class in the trace",
        })
    }
}

fn name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c == b'.'
}

/// `_CLASS_LINE.finditer(head)`'s names, in order.
pub fn class_lines(head: &str) -> Result<Vec<&str>, Undecided> {
    let mut found = Vec::new();
    for line in head.split('\n') {
        let rest = line.strip_prefix(CAUSED_BY).unwrap_or(line);
        let bytes = rest.as_bytes();
        let Some(&first) = bytes.first() else {
            continue;
        };
        if !(first.is_ascii_alphabetic() || first == b'_' || first == b'$') {
            continue; // without the prefix, "Caused" then a space is no dotted name either
        }
        let end = bytes
            .iter()
            .position(|&b| !name_char(b))
            .unwrap_or(bytes.len());
        if end < bytes.len() && !bytes[end].is_ascii() {
            // is this character `\w` for Python's re? Its Unicode tables decide: not ours
            return Err(Undecided("a class line runs into a non-ASCII character"));
        }
        if end < bytes.len() && bytes[end] != b':' {
            continue; // neither `:` nor the line's end after the name
        }
        let name = &rest[..end];
        let mut segments = name.split('.');
        let well_formed = name.contains('.') && segments.all(|s| !s.is_empty());
        if well_formed {
            found.push(name);
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::class_lines;

    #[test]
    fn class_lines_as_python_reads_them() {
        let head = "a.B: x\n\tat c.D\nCaused by: e.F\nCaused by: g.H: y\nnope\n.a.b\nx.y.\n";
        assert_eq!(class_lines(head).expect("ascii"), vec!["a.B", "e.F", "g.H"]);
        assert!(class_lines("a.Bé: x").is_err());
        assert_eq!(class_lines("é.a: x").expect("no name"), Vec::<&str>::new());
        assert_eq!(class_lines("a.b\r\n").expect("cr"), Vec::<&str>::new());
    }
}
