//! Reading the language server's messages: `Content-Length` framed JSON.

#![allow(dead_code)]

use std::io::BufRead;

/// The body of the next framed message, or `None` when the stream ends or breaks off.
pub fn read_frame(r: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length: ") {
            len = v.parse().ok()?;
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some(body)
}
