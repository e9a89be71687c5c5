//! NBD wire constants and encoders (big-endian, as on the wire).
//!
//! Source: the NBD protocol specification, `doc/proto.md` of the NetworkBlockDevice/nbd project
//! (public domain). Only the parts this server speaks are named here: fixed newstyle
//! negotiation, `NBD_OPT_GO`/`INFO`/`LIST`/`ABORT`/`EXPORT_NAME`, simple replies.

/// `NBDMAGIC`: first 8 bytes the server sends.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: newstyle magic; also prefixes every client option.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Magic of every option reply.
pub const OPT_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Magic of every transmission request.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Magic of a simple reply.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;

/// Handshake flag: the server speaks fixed newstyle.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// Handshake flag: the server can omit the 124 zero bytes after `NBD_OPT_EXPORT_NAME`.
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flag: fixed newstyle.
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
/// Client flag: omit the 124 zero bytes.
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

/// Transmission flags (16 bits, sent per export).
pub const TFLAG_HAS_FLAGS: u16 = 1 << 0;
/// The export is read-only.
pub const TFLAG_READ_ONLY: u16 = 1 << 1;
/// `NBD_CMD_FLUSH` is supported.
pub const TFLAG_SEND_FLUSH: u16 = 1 << 2;
/// `NBD_CMD_FLAG_FUA` is supported.
pub const TFLAG_SEND_FUA: u16 = 1 << 3;
/// `NBD_CMD_TRIM` is supported.
pub const TFLAG_SEND_TRIM: u16 = 1 << 5;
/// `NBD_CMD_WRITE_ZEROES` (and `NBD_CMD_FLAG_NO_HOLE`) is supported.
pub const TFLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
/// Flush and FUA are visible across all connections to an export.
pub const TFLAG_CAN_MULTI_CONN: u16 = 1 << 8;

/// Option: choose an export and enter transmission (no error reply possible).
pub const OPT_EXPORT_NAME: u32 = 1;
/// Option: abort negotiation.
pub const OPT_ABORT: u32 = 2;
/// Option: list exports.
pub const OPT_LIST: u32 = 3;
/// Option: upgrade the connection to TLS.
pub const OPT_STARTTLS: u32 = 5;
/// Option: describe one export.
pub const OPT_INFO: u32 = 6;
/// Option: describe one export and enter transmission.
pub const OPT_GO: u32 = 7;

/// Option reply: success / end of a list.
pub const REP_ACK: u32 = 1;
/// Option reply: one export of a list.
pub const REP_SERVER: u32 = 2;
/// Option reply: one information item of `NBD_OPT_INFO`/`GO`.
pub const REP_INFO: u32 = 3;
/// Option error: option not supported.
pub const REP_ERR_UNSUP: u32 = 0x8000_0001;
/// Option error: option malformed.
pub const REP_ERR_INVALID: u32 = 0x8000_0003;
/// Option error: the server requires TLS first.
pub const REP_ERR_TLS_REQD: u32 = 0x8000_0005;
/// Option error: no such export.
pub const REP_ERR_UNKNOWN: u32 = 0x8000_0006;
/// Option error: request too large to process.
pub const REP_ERR_TOO_BIG: u32 = 0x8000_0009;

/// Information type: size and transmission flags (mandatory).
pub const INFO_EXPORT: u16 = 0;
/// Information type: canonical name.
pub const INFO_NAME: u16 = 1;
/// Information type: human-readable description.
pub const INFO_DESCRIPTION: u16 = 2;
/// Information type: minimum / preferred / maximum block size.
pub const INFO_BLOCK_SIZE: u16 = 3;

/// Command: read.
pub const CMD_READ: u16 = 0;
/// Command: write (payload follows the header).
pub const CMD_WRITE: u16 = 1;
/// Command: disconnect (no reply).
pub const CMD_DISC: u16 = 2;
/// Command: flush.
pub const CMD_FLUSH: u16 = 3;
/// Command: trim (discard hint).
pub const CMD_TRIM: u16 = 4;
/// Command: write zeroes (no payload).
pub const CMD_WRITE_ZEROES: u16 = 6;

/// Command flag: force unit access.
pub const CMD_FLAG_FUA: u16 = 1 << 0;
/// Command flag: `NBD_CMD_WRITE_ZEROES` must not create a hole.
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;

/// Error values of the reply's error field (the spec's fixed set).
pub const EPERM: u32 = 1;
/// I/O error.
pub const EIO: u32 = 5;
/// Out of memory (the spec says servers should avoid it).
pub const ENOMEM: u32 = 12;
/// Invalid argument.
pub const EINVAL: u32 = 22;
/// No space left on device (also: write past the end of the export).
pub const ENOSPC: u32 = 28;
/// Value too large.
pub const EOVERFLOW: u32 = 75;
/// Operation not supported.
pub const ENOTSUP: u32 = 95;
/// Server is shutting down.
pub const ESHUTDOWN: u32 = 108;

/// Size of the client's option header: magic (8), option (4), length (4).
pub const OPTION_HEADER_LEN: usize = 16;
/// Size of a transmission request header.
pub const REQUEST_HEADER_LEN: usize = 28;
/// Size of a simple reply header.
pub const SIMPLE_REPLY_HEADER_LEN: usize = 16;
/// Size of the greeting the server sends first.
pub const GREETING_LEN: usize = 18;
/// Longest string (export name) the spec allows, in bytes.
pub const MAX_STRING_LEN: usize = 4096;

/// The server's greeting: `NBDMAGIC`, `IHAVEOPT`, handshake flags.
pub fn greeting() -> [u8; GREETING_LEN] {
    let mut g = [0u8; GREETING_LEN];
    g[..8].copy_from_slice(&NBDMAGIC.to_be_bytes());
    g[8..16].copy_from_slice(&IHAVEOPT.to_be_bytes());
    g[16..].copy_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    g
}

/// Appends one option reply (header and `data`) to `out`.
pub fn push_option_reply(out: &mut Vec<u8>, option: u32, reply: u32, data: &[u8]) {
    out.extend_from_slice(&OPT_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&option.to_be_bytes());
    out.extend_from_slice(&reply.to_be_bytes());
    // Option payloads here are bounded by MAX_STRING_LEN plus a few bytes.
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
}

/// Writes a simple reply header into `out[..16]`.
///
/// `out` is at least [`SIMPLE_REPLY_HEADER_LEN`] bytes; a read reply's data follows in the same
/// buffer so that one `write_all` sends the whole reply.
pub fn put_simple_reply_header(out: &mut [u8], error: u32, handle: u64) {
    if let Some(h) = out.get_mut(..SIMPLE_REPLY_HEADER_LEN) {
        h[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
        h[4..8].copy_from_slice(&error.to_be_bytes());
        h[8..16].copy_from_slice(&handle.to_be_bytes());
    }
}

/// A simple reply without data (errors, and success of everything but reads).
pub fn simple_reply(error: u32, handle: u64) -> Vec<u8> {
    let mut out = vec![0u8; SIMPLE_REPLY_HEADER_LEN];
    put_simple_reply_header(&mut out, error, handle);
    out
}

/// Big-endian field readers over a slice the caller has length-checked.
pub(crate) fn be_u16(b: &[u8], at: usize) -> u16 {
    let mut a = [0u8; 2];
    if let Some(s) = b.get(at..at + 2) {
        a.copy_from_slice(s);
    }
    u16::from_be_bytes(a)
}

pub(crate) fn be_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        a.copy_from_slice(s);
    }
    u32::from_be_bytes(a)
}

pub(crate) fn be_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        a.copy_from_slice(s);
    }
    u64::from_be_bytes(a)
}
