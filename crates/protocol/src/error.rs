//! What can be wrong with bytes received from the other side of a connection.
//!
//! Every variant is a malformed or unacceptable message: the caller answers it (a server sends
//! `Failed` with class `Protocol`) and closes the connection. The stream cannot be resynchronised
//! after one, since the frame boundaries that follow are not trustworthy either.

use crate::VERSION;

/// A frame or message that breaks the protocol. `what` names the field being read, as the
/// module docs' tables name it (`"call arguments"`, `"value tag"`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// The body ended inside a field.
    #[error("truncated body while reading {what}: {needed} bytes needed, {remaining} left")]
    Truncated {
        what: &'static str,
        needed: usize,
        remaining: usize,
    },
    /// A frame's length prefix is over the connection's maximum (found from the header alone).
    #[error("frame length {len} over maximum {max}")]
    FrameTooLong { len: u32, max: u32 },
    /// A frame's length prefix is 0, leaving no room for the kind byte.
    #[error("empty frame: no kind byte")]
    EmptyFrame,
    /// A request frame's kind byte names no request.
    #[error("unknown request kind {0:#04x}")]
    UnknownRequest(u8),
    /// A response frame's kind byte names no response.
    #[error("unknown response kind {0:#04x}")]
    UnknownResponse(u8),
    /// A frame on the procedure boundary ([`crate::guest`]) whose kind byte names no message of
    /// the side that sent it.
    #[error("unknown procedure-boundary message kind {0:#04x}")]
    UnknownBoundaryMessage(u8),
    /// A tag byte (op, value, bound, scan source, op result, error class) out of its range.
    #[error("unknown {what} tag {tag}")]
    UnknownTag { what: &'static str, tag: u8 },
    /// A bool (or option flag) byte other than 0 and 1.
    #[error("invalid bool {byte} in {what}: must be 0 or 1")]
    InvalidBool { what: &'static str, byte: u8 },
    /// A string's bytes are not UTF-8.
    #[error("invalid UTF-8 in {what}")]
    InvalidUtf8 { what: &'static str },
    /// A list's count cannot be right: even at their smallest encoding, that many items do not
    /// fit in the bytes left. Checked before allocating anything for the list.
    #[error("{what} count {count} larger than remaining bytes allow ({remaining} left)")]
    CountTooLarge {
        what: &'static str,
        count: u32,
        remaining: usize,
    },
    /// The message ended before its frame did.
    #[error("{count} trailing bytes after {what}")]
    TrailingBytes { what: &'static str, count: usize },
    /// A `Hello` that does not start with [`crate::MAGIC`]: the peer does not speak Glass.
    #[error("bad magic {0:02x?}: not a Glass client")]
    BadMagic([u8; 4]),
    /// A `Hello` or `Welcome` of a protocol version this side does not speak.
    #[error("unsupported protocol version {0} (this side speaks {VERSION})")]
    UnsupportedVersion(u16),
}
