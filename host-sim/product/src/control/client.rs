//! The command's end of the control channel.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use super::{Reply, Request, socket_path};

/// A connection to the server holding a pool.
#[derive(Debug)]
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Client {
    /// Connects to the server of the pool in `dir`; `None` if no server answers there (no
    /// socket, or a stale one left by a server that was killed).
    pub fn connect(dir: &Path) -> Option<Client> {
        let s = UnixStream::connect(socket_path(dir)).ok()?;
        let reader = BufReader::new(s.try_clone().ok()?);
        Some(Client { reader, writer: s })
    }

    /// Sends `req` and waits for the answer.
    ///
    /// Errors: the connection broke (the server stopped), or the answer is not a [`Reply`].
    pub fn call(&mut self, req: &Request) -> std::io::Result<Reply> {
        let mut line = serde_json::to_string(req).map_err(std::io::Error::other)?;
        line.push('\n');
        self.writer.write_all(line.as_bytes())?;
        let mut answer = String::new();
        if self.reader.read_line(&mut answer)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the server closed the control channel (it is stopping)",
            ));
        }
        serde_json::from_str(&answer).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("the server's answer is not understood: {e}"),
            )
        })
    }
}
