//! Base protocol framing: `Content-Length` headers and a JSON body, read with bounded sizes so
//! that no header or length from the client makes the server allocate without limit.

use serde_json::Value;
use std::io::{self, BufRead, Read, Write};
use std::sync::{Arc, Mutex};

/// The largest message body accepted; larger ones are skipped unread.
pub const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;
/// The longest header line accepted.
const MAX_HEADER_LINE: usize = 1024;
/// The most header lines accepted in one message.
const MAX_HEADERS: usize = 32;

/// What one read from the client gave.
#[derive(Debug)]
pub enum Frame {
    /// A message body (not yet parsed).
    Body(Vec<u8>),
    /// Something that could not be framed was skipped; reading goes on with the next
    /// `Content-Length` header.
    Skipped(String),
    /// The stream cannot be followed any further (the input ended inside a message, or
    /// reading failed).
    Broken(String),
    /// The client closed its end between messages.
    Eof,
}

/// The header that starts a message, matched case-insensitively when re-synchronising.
const NEEDLE: &[u8] = b"content-length:";

/// Reads frames from the client.
pub struct Reader<R> {
    input: R,
    /// After a bad header: skip to the next `Content-Length:` before reading headers.
    resync: bool,
}

impl<R: BufRead> Reader<R> {
    pub fn new(input: R) -> Self {
        Reader {
            input,
            resync: false,
        }
    }

    /// Reads one header line of at most [`MAX_HEADER_LINE`] bytes, without its line ending.
    /// `Ok(None)` at end of input before any byte.
    fn header_line(&mut self) -> io::Result<Option<Result<String, String>>> {
        let mut line = Vec::new();
        let n = self
            .input
            .by_ref()
            .take(MAX_HEADER_LINE as u64 + 1)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(None);
        }
        if line.last() != Some(&b'\n') {
            if n > MAX_HEADER_LINE {
                return Ok(Some(Err("a header line longer than 1024 bytes".into())));
            }
            return Ok(Some(Err("the input ended inside a header".into())));
        }
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        Ok(Some(
            String::from_utf8(line).map_err(|_| "a header that is not UTF-8".to_string()),
        ))
    }

    /// Skips input up to and including the next `Content-Length:`; false at end of input.
    fn skip_to_header(&mut self) -> io::Result<bool> {
        let mut matched = 0;
        loop {
            let buf = self.input.fill_buf()?;
            if buf.is_empty() {
                return Ok(false);
            }
            let mut used = 0;
            for &b in buf {
                used += 1;
                let b = b.to_ascii_lowercase();
                matched = if b == NEEDLE[matched] {
                    matched + 1
                } else {
                    usize::from(b == NEEDLE[0])
                };
                if matched == NEEDLE.len() {
                    self.input.consume(used);
                    return Ok(true);
                }
            }
            self.input.consume(used);
        }
    }

    /// A header problem: skip what follows up to the next message.
    fn skip(&mut self, why: String) -> Frame {
        self.resync = true;
        Frame::Skipped(why)
    }

    /// Reads the next frame.
    pub fn read_frame(&mut self) -> Frame {
        let mut length: Option<Result<usize, String>> = None;
        let mut headers = 0;
        if self.resync {
            self.resync = false;
            match self.skip_to_header() {
                Ok(true) => {}
                Ok(false) => return Frame::Eof,
                Err(e) => return Frame::Broken(format!("reading the input: {e}")),
            }
            match self.header_line() {
                Ok(Some(Ok(value))) => {
                    headers = 1;
                    length = Some(parse_length(&value));
                }
                Ok(None) => return Frame::Broken("the input ended inside the headers".into()),
                Ok(Some(Err(e))) => return self.skip(e),
                Err(e) => return Frame::Broken(format!("reading the input: {e}")),
            }
        }
        loop {
            let line = match self.header_line() {
                Ok(None) if headers == 0 => return Frame::Eof,
                Ok(None) => return Frame::Broken("the input ended inside the headers".into()),
                Ok(Some(Ok(line))) => line,
                Ok(Some(Err(e))) => return self.skip(e),
                Err(e) => return Frame::Broken(format!("reading the input: {e}")),
            };
            if line.is_empty() {
                if headers == 0 {
                    // stray blank lines between messages
                    continue;
                }
                break;
            }
            headers += 1;
            if headers > MAX_HEADERS {
                return self.skip(format!("more than {MAX_HEADERS} header lines"));
            }
            let Some((name, value)) = line.split_once(':') else {
                return self.skip(format!("a header without a colon: {line:?}"));
            };
            if name.trim().eq_ignore_ascii_case("content-length") {
                length = Some(parse_length(value));
            }
        }
        let length = match length {
            None => return self.skip("a message without Content-Length".into()),
            Some(Err(e)) => return self.skip(e),
            Some(Ok(n)) => n,
        };
        let limit = MAX_BODY_BYTES / (1024 * 1024);
        if length > MAX_BODY_BYTES {
            // skip the body without keeping it
            let skipped = io::copy(
                &mut self.input.by_ref().take(length as u64),
                &mut io::sink(),
            );
            return match skipped {
                Ok(n) if n == length as u64 => Frame::Skipped(format!(
                    "a message of {length} bytes, over the {limit} MiB limit"
                )),
                _ => Frame::Broken(format!(
                    "a message of {length} bytes, over the {limit} MiB limit, and the input ended inside it"
                )),
            };
        }
        let mut body = Vec::new();
        match self
            .input
            .by_ref()
            .take(length as u64)
            .read_to_end(&mut body)
        {
            Ok(n) if n == length => Frame::Body(body),
            Ok(_) => Frame::Broken("the input ended inside a message".into()),
            Err(e) => Frame::Broken(format!("reading the input: {e}")),
        }
    }
}

fn parse_length(value: &str) -> Result<usize, String> {
    value
        .trim()
        .parse::<usize>()
        .map_err(|_| format!("an invalid Content-Length: {:?}", value.trim()))
}

/// Where messages to the client go; shared by the message loop and the analysis worker.
#[derive(Clone)]
pub struct Output {
    sink: Arc<Mutex<Box<dyn Write + Send>>>,
}

impl Output {
    pub fn new(sink: Box<dyn Write + Send>) -> Output {
        Output {
            sink: Arc::new(Mutex::new(sink)),
        }
    }

    /// Writes one message (`"jsonrpc": "2.0"` is added). A client that went away is not an
    /// error here: the input side notices the end of the conversation.
    pub fn send(&self, mut msg: Value) {
        if let Value::Object(m) = &mut msg {
            m.insert("jsonrpc".into(), Value::from("2.0"));
        }
        let body = msg.to_string();
        let mut sink = match self.sink.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        let _ = write!(sink, "Content-Length: {}\r\n\r\n{body}", body.len());
        let _ = sink.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn frames(input: &[u8]) -> Vec<String> {
        let mut r = Reader::new(Cursor::new(input.to_vec()));
        let mut out = Vec::new();
        loop {
            match r.read_frame() {
                Frame::Body(b) => out.push(String::from_utf8(b).unwrap()),
                Frame::Skipped(e) => out.push(format!("skipped: {e}")),
                Frame::Broken(e) => {
                    out.push(format!("broken: {e}"));
                    return out;
                }
                Frame::Eof => return out,
            }
        }
    }

    #[test]
    fn reads_messages_and_headers_in_any_case() {
        let input = b"Content-Length: 2\r\n\r\n{}content-length:3\r\nContent-Type: x\r\n\r\n[1]";
        assert_eq!(frames(input), ["{}", "[1]"]);
    }

    #[test]
    fn skips_a_body_over_the_limit_and_reads_on() {
        let big = MAX_BODY_BYTES + 1;
        let mut input = format!("Content-Length: {big}\r\n\r\n").into_bytes();
        input.resize(input.len() + big, b' ');
        input.extend_from_slice(b"Content-Length: 2\r\n\r\n{}");
        let got = frames(&input);
        assert!(
            got[0].starts_with("skipped: a message of 67108865 bytes"),
            "{got:?}"
        );
        assert_eq!(got[1], "{}");
    }

    #[test]
    fn a_huge_length_with_no_body_ends_without_allocating() {
        let got = frames(b"Content-Length: 1000000000000\r\n\r\n{}");
        assert_eq!(got.len(), 1);
        assert!(got[0].starts_with("broken: a message of 1000000000000 bytes"));
    }

    #[test]
    fn bad_headers_are_skipped_up_to_the_next_message() {
        let ok = "Content-Length: 2\r\n\r\n{}";
        let long = format!("X-{}: 1\r\n", "a".repeat(5000));
        for (bad, why) in [
            (
                "Content-Length: x\r\n\r\n{\"a\":1}",
                "an invalid Content-Length: \"x\"",
            ),
            (
                "Content-Type: y\r\n\r\n{}",
                "a message without Content-Length",
            ),
            ("garbage\r\n", "a header without a colon: \"garbage\""),
            (long.as_str(), "a header line longer than 1024 bytes"),
        ] {
            let got = frames(format!("{bad}{ok}").as_bytes());
            assert_eq!(
                got,
                [format!("skipped: {why}"), "{}".to_string()],
                "{bad:?}"
            );
        }
        // the next message's header may follow the body without a line break
        let got = frames(b"Content-Length: -1\r\n\r\nxxCONTENT-LENGTH: 2\r\n\r\n{}");
        assert_eq!(got[1], "{}");
    }

    #[test]
    fn an_input_that_ends_inside_a_message_is_broken() {
        assert_eq!(
            frames(b"Content-Length: 5\r\n\r\n{}"),
            ["broken: the input ended inside a message"]
        );
        assert_eq!(
            frames(b"Content-Length: 5\r\n"),
            ["broken: the input ended inside the headers"]
        );
        assert!(frames(b"").is_empty());
        assert!(frames(b"\r\n\r\n").is_empty());
    }
}
