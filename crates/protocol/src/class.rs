//! Error classes: what a `Failed` response asks the client to do, as one byte.
//!
//! The classes follow [`engine::TxError`] where the engine's error crosses the wire, and add
//! the server's own failures (`Protocol`, `Busy`, `TimedOut`). Turning a class back into a
//! `TxError` keeps what the caller must do: everything retryable becomes `TxError::Retry`.

use std::fmt;

use engine::TxError;

/// The class of a failure, sent as the first byte of a `Failed` body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ErrorClass {
    /// Deadlock victim or lock timeout: run the transaction again.
    Retry = 1,
    /// The procedure asked for a rollback.
    UserAbort = 2,
    /// An insert met an existing key in a unique index.
    DuplicateKey = 3,
    /// A bad name, value or request.
    Invalid = 4,
    /// A storage or server failure.
    Internal = 5,
    /// A malformed or out-of-order message; the server closes the connection after sending it.
    Protocol = 6,
    /// The server is overloaded or has too many connections: try later.
    Busy = 7,
    /// An idle interactive transaction was aborted.
    TimedOut = 8,
    /// The stored procedure was stopped by its isolation (crashed, ran past its time limit,
    /// outgrew its memory, made a forbidden call); its transaction was rolled back.
    Contained = 9,
}

impl ErrorClass {
    /// Every class, in tag order.
    pub const ALL: [ErrorClass; 9] = [
        ErrorClass::Retry,
        ErrorClass::UserAbort,
        ErrorClass::DuplicateKey,
        ErrorClass::Invalid,
        ErrorClass::Internal,
        ErrorClass::Protocol,
        ErrorClass::Busy,
        ErrorClass::TimedOut,
        ErrorClass::Contained,
    ];

    /// The class from its tag byte, `None` for a byte that names none.
    pub fn from_tag(tag: u8) -> Option<ErrorClass> {
        match tag {
            1..=9 => Some(Self::ALL[tag as usize - 1]),
            _ => None,
        }
    }

    /// The tag byte on the wire.
    pub fn tag(self) -> u8 {
        self as u8
    }

    /// Whether running the same transaction again may succeed: exactly the classes that
    /// [`ErrorClass::into_tx_error`] turns into `TxError::Retry`.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorClass::Retry | ErrorClass::Busy | ErrorClass::TimedOut
        )
    }

    /// The class a server sends for an engine error.
    pub fn of(error: &TxError) -> ErrorClass {
        match error {
            TxError::Retry(_) => ErrorClass::Retry,
            TxError::UserAbort(_) => ErrorClass::UserAbort,
            TxError::DuplicateKey(_) => ErrorClass::DuplicateKey,
            TxError::Invalid(_) => ErrorClass::Invalid,
            TxError::Contained(_) => ErrorClass::Contained,
            // A server meets a broken connection only as a client of another server.
            TxError::Storage(_) | TxError::Connection(_) => ErrorClass::Internal,
        }
    }

    /// The engine error a client returns for a `Failed { class, message }` response. Classes
    /// without an engine variant of their own keep their name in the message:
    /// `Internal` becomes `TxError::Invalid("server: internal error: ...")`, `Busy` becomes
    /// `TxError::Retry("server: busy: ...")`.
    pub fn into_tx_error(self, message: String) -> TxError {
        let prefixed = |message: String| format!("server: {self}: {message}");
        match self {
            ErrorClass::Retry => TxError::Retry(message),
            ErrorClass::Busy | ErrorClass::TimedOut => TxError::Retry(prefixed(message)),
            ErrorClass::UserAbort => TxError::UserAbort(message),
            ErrorClass::DuplicateKey => TxError::DuplicateKey(message),
            ErrorClass::Invalid => TxError::Invalid(format!("server: {message}")),
            ErrorClass::Internal | ErrorClass::Protocol => TxError::Invalid(prefixed(message)),
            ErrorClass::Contained => TxError::Contained(message),
        }
    }

    /// The text of an engine error without the words its variant's `Display` adds, for the
    /// message of a `Failed` response: the client's [`ErrorClass::into_tx_error`] adds them
    /// back, so that they are not said twice.
    pub fn message_of(error: &TxError) -> String {
        match error {
            TxError::Retry(m)
            | TxError::UserAbort(m)
            | TxError::DuplicateKey(m)
            | TxError::Invalid(m)
            | TxError::Contained(m) => m.clone(),
            TxError::Storage(e) => e.to_string(),
            TxError::Connection(_) => error.to_string(),
        }
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorClass::Retry => "retry",
            ErrorClass::UserAbort => "user abort",
            ErrorClass::DuplicateKey => "duplicate key",
            ErrorClass::Invalid => "invalid request",
            ErrorClass::Internal => "internal error",
            ErrorClass::Protocol => "protocol error",
            ErrorClass::Busy => "busy",
            ErrorClass::TimedOut => "timed out",
            ErrorClass::Contained => "procedure contained",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_and_nothing_else_is_a_class() {
        for class in ErrorClass::ALL {
            assert_eq!(ErrorClass::from_tag(class.tag()), Some(class));
        }
        for tag in (0..=u8::MAX).filter(|t| !(1..=9).contains(t)) {
            assert_eq!(ErrorClass::from_tag(tag), None, "tag {tag}");
        }
    }

    #[test]
    fn engine_errors_map_to_their_class() {
        let storage = TxError::Storage(storage::StorageError::PoolExhausted { frames: 4 });
        let cases = [
            (TxError::Retry("deadlock".into()), ErrorClass::Retry),
            (TxError::UserAbort("item".into()), ErrorClass::UserAbort),
            (
                TxError::DuplicateKey("orders".into()),
                ErrorClass::DuplicateKey,
            ),
            (TxError::Invalid("no table x".into()), ErrorClass::Invalid),
            (storage, ErrorClass::Internal),
            (TxError::Connection("reset".into()), ErrorClass::Internal),
            (TxError::Contained("SIGSEGV".into()), ErrorClass::Contained),
        ];
        for (error, class) in cases {
            assert_eq!(ErrorClass::of(&error), class, "{error}");
        }
    }

    #[test]
    fn classes_become_engine_errors_that_keep_what_to_do() {
        for class in ErrorClass::ALL {
            let error = class.into_tx_error("boom".into());
            assert_eq!(error.is_retryable(), class.is_retryable(), "{class}");
            assert!(error.to_string().contains("boom"), "{error}");
        }
        let matches = |class: ErrorClass, expected: &str| {
            let text = match class.into_tx_error("boom".into()) {
                TxError::Retry(m)
                | TxError::UserAbort(m)
                | TxError::DuplicateKey(m)
                | TxError::Invalid(m)
                | TxError::Contained(m) => m,
                other => panic!("{class} became {other:?}"),
            };
            assert_eq!(text, expected, "{class}");
        };
        matches(ErrorClass::Retry, "boom");
        matches(ErrorClass::UserAbort, "boom");
        matches(ErrorClass::DuplicateKey, "boom");
        matches(ErrorClass::Invalid, "server: boom");
        matches(ErrorClass::Internal, "server: internal error: boom");
        matches(ErrorClass::Protocol, "server: protocol error: boom");
        matches(ErrorClass::Busy, "server: busy: boom");
        matches(ErrorClass::TimedOut, "server: timed out: boom");
        matches(ErrorClass::Contained, "boom");
        assert!(matches!(
            ErrorClass::UserAbort.into_tx_error("x".into()),
            TxError::UserAbort(_)
        ));
        assert!(matches!(
            ErrorClass::DuplicateKey.into_tx_error("x".into()),
            TxError::DuplicateKey(_)
        ));
        assert!(matches!(
            ErrorClass::Internal.into_tx_error("x".into()),
            TxError::Invalid(_)
        ));
    }

    #[test]
    fn an_engine_error_survives_the_wire_without_repeating_its_words() {
        let error = TxError::DuplicateKey("orders".into());
        let back = ErrorClass::of(&error).into_tx_error(ErrorClass::message_of(&error));
        assert_eq!(back.to_string(), error.to_string());
    }
}
