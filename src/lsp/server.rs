//! The message loop: the protocol's lifecycle (initialize, shutdown, exit), open documents,
//! requests answered from the latest finished analysis (or held until the analysis under way
//! or next in line is done, never behind a backlog), diagnostics published per version.

use super::analysis::{Analyser, Analysis};
use super::convert::{self, Uris};
use super::documents::{self, Change, Document};
use super::handlers::{self, FIX_ALL_KIND};
use super::protocol::{self, Incoming, Notification, Request};
use super::scheduler::{Done, Event, Job, Scheduler, Worker};
use super::transport::{Frame, Output, Reader};
use crate::source::SourceFile;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::Duration;

/// How the server runs.
pub struct Config {
    /// How long a document must stay unchanged before it is analysed.
    pub debounce: Duration,
    pub analyser: Box<dyn Analyser>,
}

#[derive(PartialEq, Eq)]
enum State {
    Uninitialised,
    Running,
    ShutDown,
}

/// An open document, its latest finished analysis and the requests waiting for a newer one.
struct Open {
    uri: String,
    doc: Document,
    /// The root of the project the document belongs to (`None`: the document alone).
    root: Option<PathBuf>,
    analysis: Option<Analysis>,
    /// The version and diagnostics last published for it.
    published: Option<(i64, Value)>,
    /// Requests held until an analysis of at least this version is done.
    waiting: Vec<(Request, i64)>,
}

struct Server {
    out: Output,
    state: State,
    /// Where unsaved buffers are analysed: the first workspace folder, else the current
    /// directory.
    root: PathBuf,
    /// The client's workspace folders (or its root).
    folders: Vec<PathBuf>,
    docs: HashMap<String, Open>,
    scheduler: Scheduler,
    worker: Worker,
    next_id: i64,
    /// The input ended: answer the requests still waiting, then stop.
    ended: bool,
    /// The client registers file watchers when asked (`workspace/didChangeWatchedFiles`).
    watch: bool,
}

/// The path a workspace folder's (or a watched file's) URL names: a `file:` URL of a path. One
/// with a query or a fragment names no folder (`file:///?x` would otherwise be the whole file
/// system, read for every analysis).
fn folder_of(uri: &str) -> Option<PathBuf> {
    url::Url::parse(uri)
        .ok()
        .filter(|u| u.query().is_none() && u.fragment().is_none())
        .and_then(|u| u.to_file_path().ok())
}

/// Whether the loop goes on.
enum Flow {
    Go,
    Exit(u8),
}

fn capabilities() -> Value {
    json!({
        "textDocumentSync": { "openClose": true, "change": 2, "save": { "includeText": false } },
        "codeActionProvider": { "codeActionKinds": ["quickfix", FIX_ALL_KIND] },
        "hoverProvider": true,
        "executeCommandProvider": { "commands": ["locklint.fixAll", "locklint.explain"] },
    })
}

/// The document a request is about.
fn uri_of_request(req: &Request) -> Option<String> {
    let uri = if req.method == "workspace/executeCommand" {
        req.params["arguments"].get(0)
    } else {
        req.params["textDocument"].get("uri")
    };
    uri.and_then(Value::as_str).map(str::to_string)
}

/// The answer to a request when its document is not open or has no language locklint reads.
fn empty_answer(req: &Request) -> Value {
    match req.method.as_str() {
        "textDocument/codeAction" => json!([]),
        "workspace/executeCommand" => json!(0),
        _ => Value::Null,
    }
}

/// Serves one conversation: frames are read from `input` on a thread of their own, messages
/// go to `output`. At the end of the input, the requests still waiting for an analysis are
/// answered first. Returns the exit status: 0 when `exit` or the end of the input comes after
/// `shutdown`, 1 otherwise.
pub fn run(
    input: impl BufRead + Send + 'static,
    output: Box<dyn Write + Send>,
    config: Config,
) -> u8 {
    let (events, incoming) = channel::<Event>();
    let out = Output::new(output);
    let worker = match Worker::start(config.analyser, events.clone()) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: cannot start the analysis thread: {e}");
            return 1;
        }
    };
    let reader = std::thread::Builder::new()
        .name("locklint-lsp-input".into())
        .spawn(move || {
            let mut reader = Reader::new(input);
            loop {
                let frame = reader.read_frame();
                let last = matches!(frame, Frame::Eof | Frame::Broken(_));
                if events.send(Event::Frame(frame)).is_err() || last {
                    return;
                }
            }
        });
    if let Err(e) = reader {
        eprintln!("error: cannot start the input thread: {e}");
        return 1;
    }
    let mut server = Server {
        out,
        state: State::Uninitialised,
        root: std::env::current_dir().unwrap_or_default(),
        folders: Vec::new(),
        docs: HashMap::new(),
        scheduler: Scheduler::new(config.debounce),
        worker,
        next_id: 0,
        ended: false,
        watch: false,
    };
    loop {
        let event = match server.scheduler.wait() {
            Some(t) => incoming.recv_timeout(t),
            None => incoming.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        let mut flow = server.event(event);
        // what has arrived already is taken in before anything is analysed: a burst of edits
        // is analysed once, at its last version, and an edit with nothing behind it at once
        for _ in 0..MAX_TAKEN_IN {
            if !matches!(flow, Flow::Go) {
                break;
            }
            match incoming.try_recv() {
                Ok(event) => flow = server.event(Ok(event)),
                Err(_) => break,
            }
        }
        if let Flow::Exit(code) = flow {
            return code;
        }
        if server.ended && !server.docs.values().any(|o| !o.waiting.is_empty()) {
            return server.exit_status();
        }
        server.dispatch();
    }
}

/// At most this many messages are taken in before the next analysis is started (a client that
/// never pauses still gets its documents analysed).
const MAX_TAKEN_IN: usize = 1000;

impl Server {
    fn event(&mut self, event: Result<Event, RecvTimeoutError>) -> Flow {
        match event {
            Ok(Event::Frame(frame)) => self.frame(frame),
            Ok(Event::Analysed(done)) => {
                self.analysed(done);
                Flow::Go
            }
            Err(RecvTimeoutError::Timeout) => Flow::Go,
            Err(RecvTimeoutError::Disconnected) => Flow::Exit(self.exit_status()),
        }
    }

    fn exit_status(&self) -> u8 {
        u8::from(self.state != State::ShutDown)
    }

    fn log(&self, kind: u8, message: &str) {
        eprintln!("locklint lsp: {message}");
        self.out.send(protocol::log(kind, message));
    }

    fn frame(&mut self, frame: Frame) -> Flow {
        match frame {
            Frame::Body(body) => self.message(protocol::parse(&body)),
            Frame::Skipped(why) => {
                self.log(1, &format!("skipped {why}"));
                Flow::Go
            }
            Frame::Broken(why) => {
                self.log(
                    1,
                    &format!("cannot read the client's messages any more: {why}"),
                );
                self.ended = true;
                Flow::Go
            }
            Frame::Eof => {
                self.ended = true;
                Flow::Go
            }
        }
    }

    fn message(&mut self, msg: Incoming) -> Flow {
        match msg {
            Incoming::Request(req) => {
                self.request(req);
                Flow::Go
            }
            Incoming::Notification(n) => self.notification(n),
            Incoming::Response => Flow::Go,
            Incoming::Invalid { id, code, message } => {
                self.log(1, &format!("invalid message: {message}"));
                if let Some(id) = id {
                    self.out.send(protocol::error(&id, code, &message));
                }
                Flow::Go
            }
        }
    }

    fn request(&mut self, req: Request) {
        let reply = |s: &Server, r: Result<Value, (i32, String)>| {
            s.out.send(match r {
                Ok(v) => protocol::ok(&req.id, v),
                Err((code, m)) => protocol::error(&req.id, code, &m),
            })
        };
        match (&self.state, req.method.as_str()) {
            (State::ShutDown, _) => reply(
                self,
                Err((protocol::INVALID_REQUEST, "the server is shut down".into())),
            ),
            (State::Uninitialised, "initialize") => {
                self.initialize(&req.params);
                reply(self, Ok(json!({ "capabilities": capabilities() })));
            }
            (State::Uninitialised, _) => reply(
                self,
                Err((
                    protocol::SERVER_NOT_INITIALIZED,
                    "the server is not initialised".into(),
                )),
            ),
            (State::Running, "initialize") => reply(
                self,
                Err((
                    protocol::INVALID_REQUEST,
                    "the server is already initialised".into(),
                )),
            ),
            (State::Running, "shutdown") => {
                self.state = State::ShutDown;
                reply(self, Ok(Value::Null));
            }
            (State::Running, "workspace/executeCommand")
                if req.params["command"] == "locklint.explain" =>
            {
                let args = req.params["arguments"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                reply(self, Ok(handlers::explain(&args)));
            }
            (State::Running, "workspace/executeCommand")
                if req.params["command"] != "locklint.fixAll" =>
            {
                reply(
                    self,
                    Err((
                        protocol::INVALID_PARAMS,
                        format!("unknown command {}", req.params["command"]),
                    )),
                )
            }
            (
                State::Running,
                "textDocument/hover" | "textDocument/codeAction" | "workspace/executeCommand",
            ) => self.about_document(req),
            (State::Running, m) => reply(
                self,
                Err((protocol::METHOD_NOT_FOUND, format!("unknown method {m}"))),
            ),
        }
    }

    fn initialize(&mut self, params: &Value) {
        self.state = State::Running;
        let dir = folder_of;
        let mut folders: Vec<PathBuf> = params["workspaceFolders"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f["uri"].as_str().and_then(dir))
            .collect();
        if folders.is_empty() {
            folders.extend(
                params["rootUri"]
                    .as_str()
                    .and_then(dir)
                    .or_else(|| params["rootPath"].as_str().map(PathBuf::from)),
            );
        }
        if let Some(root) = folders.first() {
            self.root = root.clone();
        }
        self.folders = folders;
        self.watch = params["capabilities"]["workspace"]["didChangeWatchedFiles"]
            ["dynamicRegistration"]
            == true;
    }

    /// Asks the client to report changes of the files the analysis reads (a helper edited
    /// outside the editor changes the diagnostics of the documents that use it).
    fn register_watchers(&mut self) {
        self.next_id += 1;
        self.out.send(json!({
            "jsonrpc": "2.0",
            "id": self.next_id,
            "method": "client/registerCapability",
            "params": { "registrations": [{
                "id": "locklint-watched-files",
                "method": "workspace/didChangeWatchedFiles",
                "registerOptions": { "watchers": [
                    { "globPattern": "**/*.{rs,sql,lua}" },
                    { "globPattern": "**/{locklint.toml,.locklint.toml,Cargo.toml}" },
                ] },
            }] },
        }));
    }

    /// The unsaved texts of the other open documents of `uri`'s project (they give the facts
    /// in place of the files on disk).
    fn others_of(&self, uri: &str) -> crate::lsp::analysis::Others {
        let Some(open) = self.docs.get(uri) else {
            return Default::default();
        };
        self.docs
            .values()
            .filter(|o| o.uri != uri && o.root == open.root)
            .filter_map(|o| Some((o.doc.path.clone()?, o.doc.text.clone())))
            .collect()
    }

    /// Analyse again the open documents of `root`'s project other than `except`: what changed
    /// may be a fact their findings rest on. After an edit of `except`, once the edits pause;
    /// after files changed on disk, at once.
    fn others_changed(&mut self, root: Option<&std::path::Path>, except: Option<&str>) {
        let due: Vec<String> = self
            .docs
            .values()
            .filter(|o| o.doc.path.is_some() && o.root.as_deref() == root)
            .filter(|o| Some(o.uri.as_str()) != except)
            .map(|o| o.uri.clone())
            .collect();
        for uri in due {
            if except.is_some() {
                self.scheduler.affected(&uri);
            } else {
                self.scheduler.changed(&uri);
            }
        }
    }

    /// The root of the project of a document analysed under `path`: the deepest workspace
    /// folder that holds it, else (a file) the root detected from its path, else none (an
    /// unsaved buffer outside any folder is analysed alone).
    fn project_root(&self, path: &std::path::Path, is_file: bool) -> Option<PathBuf> {
        self.folders
            .iter()
            .filter(|f| path.starts_with(f))
            .max_by_key(|f| f.components().count())
            .cloned()
            .or_else(|| {
                is_file
                    .then(|| crate::project::detect(path).map(|r| r.dir))
                    .flatten()
            })
    }

    /// A request about one document: answered now if its analysis is current, else held
    /// until the analysis of its current text is done.
    fn about_document(&mut self, req: Request) {
        let Some(uri) = uri_of_request(&req) else {
            self.out.send(protocol::error(
                &req.id,
                protocol::INVALID_PARAMS,
                "the request names no document",
            ));
            return;
        };
        let Some(open) = self.docs.get_mut(&uri) else {
            self.out.send(protocol::ok(&req.id, empty_answer(&req)));
            return;
        };
        if open.doc.path.is_none() {
            self.out.send(protocol::ok(&req.id, empty_answer(&req)));
            return;
        }
        let current = open.doc.version;
        if open.analysis.as_ref().is_some_and(|a| a.version >= current) {
            self.answer(&uri, &req);
            return;
        }
        open.waiting.push((req, current));
        self.scheduler.hurry(&uri);
    }

    /// Answers a request from the document's latest finished analysis.
    fn answer(&mut self, uri: &str, req: &Request) {
        let Some(open) = self.docs.get(uri) else {
            self.out.send(protocol::ok(&req.id, empty_answer(req)));
            return;
        };
        let Some(analysis) = &open.analysis else {
            self.out.send(protocol::ok(&req.id, empty_answer(req)));
            return;
        };
        let uris = Uris {
            path: &analysis.file.path,
            uri: &open.uri,
        };
        let others = self.others_of(uri);
        let result = match req.method.as_str() {
            "textDocument/hover" => handlers::hover(&req.params, analysis),
            "textDocument/codeAction" => {
                handlers::code_actions(&req.params, analysis, open.root.as_deref(), &others, &uris)
            }
            _ => {
                let (count, edit) =
                    handlers::fix_all(analysis, open.root.as_deref(), &others, &uris);
                if let Some(edit) = edit {
                    self.next_id += 1;
                    self.out.send(json!({
                        "id": self.next_id,
                        "method": "workspace/applyEdit",
                        "params": edit,
                    }));
                }
                Ok(count)
            }
        };
        self.out.send(match result {
            Ok(v) => protocol::ok(&req.id, v),
            Err(m) => protocol::error(&req.id, protocol::INVALID_PARAMS, &m),
        });
    }

    fn notification(&mut self, n: Notification) -> Flow {
        if n.method == "exit" {
            return Flow::Exit(self.exit_status());
        }
        if self.state != State::Running {
            return Flow::Go;
        }
        let p = &n.params;
        let uri = p["textDocument"]["uri"].as_str().map(str::to_string);
        match (n.method.as_str(), uri) {
            ("textDocument/didOpen", Some(uri)) => {
                let language = p["textDocument"]["languageId"].as_str().unwrap_or("");
                let path = documents::analysis_path(&uri, language, &self.root);
                let doc = Document {
                    version: p["textDocument"]["version"].as_i64().unwrap_or(0),
                    text: p["textDocument"]["text"].as_str().unwrap_or("").to_string(),
                    path,
                };
                if doc.path.is_some() {
                    self.scheduler.now(&uri);
                }
                let is_file = url::Url::parse(&uri).is_ok_and(|u| u.scheme() == "file");
                let root = doc
                    .path
                    .as_deref()
                    .and_then(|p| self.project_root(p, is_file));
                let old = self.docs.insert(
                    uri.clone(),
                    Open {
                        uri,
                        doc,
                        root,
                        analysis: None,
                        published: None,
                        waiting: Vec::new(),
                    },
                );
                if let Some(old) = old {
                    self.release(old);
                }
            }
            ("textDocument/didChange", Some(uri)) => {
                self.changed(&uri, p);
                let root = self.docs.get(&uri).and_then(|o| o.root.clone());
                self.others_changed(root.as_deref(), Some(&uri));
            }
            ("textDocument/didSave", Some(uri))
                if self.docs.get(&uri).is_some_and(|o| o.doc.path.is_some()) =>
            {
                self.scheduler.now(&uri);
                let root = self.docs.get(&uri).and_then(|o| o.root.clone());
                self.others_changed(root.as_deref(), Some(&uri));
            }
            ("initialized", _) if self.watch => self.register_watchers(),
            ("workspace/didChangeWatchedFiles", _) => {
                let paths: Vec<PathBuf> = p["changes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["uri"].as_str().and_then(folder_of))
                    .collect();
                if !self.worker.files_changed(paths) {
                    self.log(1, "the analysis thread is gone");
                }
                let roots: HashSet<Option<PathBuf>> =
                    self.docs.values().map(|o| o.root.clone()).collect();
                for root in roots {
                    self.others_changed(root.as_deref(), None);
                }
            }
            ("textDocument/didClose", Some(uri)) => {
                if let Some(open) = self.docs.remove(&uri) {
                    self.scheduler.closed(&uri);
                    self.out.send(protocol::notification(
                        "textDocument/publishDiagnostics",
                        json!({ "uri": uri, "diagnostics": [] }),
                    ));
                    self.release(open);
                }
            }
            ("$/cancelRequest", _) => self.cancel(&p["id"]),
            _ => {}
        }
        Flow::Go
    }

    /// Answers the requests a closed or replaced document held.
    fn release(&self, open: Open) {
        for (req, _) in open.waiting {
            self.out.send(protocol::ok(&req.id, empty_answer(&req)));
        }
    }

    fn cancel(&mut self, id: &Value) {
        for open in self.docs.values_mut() {
            if let Some(i) = open.waiting.iter().position(|(r, _)| &r.id == id) {
                let (req, _) = open.waiting.remove(i);
                self.out.send(protocol::error(
                    &req.id,
                    protocol::REQUEST_CANCELLED,
                    "cancelled",
                ));
                return;
            }
        }
    }

    fn changed(&mut self, uri: &str, p: &Value) {
        let Some(open) = self.docs.get_mut(uri) else {
            self.log(2, &format!("a change to {uri}, which is not open"));
            return;
        };
        let mut notes = Vec::new();
        for change in p["contentChanges"].as_array().into_iter().flatten() {
            match open.doc.apply(change) {
                Change::Applied => {}
                Change::Clamped(m) | Change::Rejected(m) => notes.push(m),
            }
        }
        open.doc.version = p["textDocument"]["version"]
            .as_i64()
            .unwrap_or(open.doc.version + 1);
        let analysed = open.doc.path.is_some();
        for m in notes {
            self.log(2, &format!("{uri}: {m}"));
        }
        if analysed {
            self.scheduler.changed(uri);
        }
    }

    /// Hands the next due document to the worker.
    fn dispatch(&mut self) {
        while let Some(uri) = self.scheduler.take_due() {
            let Some(open) = self.docs.get(&uri) else {
                self.scheduler.finished();
                continue;
            };
            let Some(path) = open.doc.path.clone() else {
                self.scheduler.finished();
                continue;
            };
            let others = self.others_of(&uri);
            let job = Job {
                uri,
                version: open.doc.version,
                file: SourceFile::new(path, open.doc.text.clone()),
                root: open.root.clone(),
                others,
            };
            if !self.worker.submit(job) {
                self.scheduler.finished();
                self.log(1, "the analysis thread is gone");
            }
            return;
        }
    }

    fn analysed(&mut self, done: Done) {
        self.scheduler.finished();
        for line in &done.outcome.log {
            self.log(2, line);
        }
        let Some(open) = self.docs.get_mut(&done.uri) else {
            return;
        };
        if open
            .analysis
            .as_ref()
            .is_some_and(|a| a.version > done.version)
        {
            return;
        }
        let current = done.version == open.doc.version;
        open.analysis = Some(Analysis {
            version: done.version,
            file: done.file,
            findings: done.outcome.findings,
        });
        let (ready, still): (Vec<_>, Vec<_>) = std::mem::take(&mut open.waiting)
            .into_iter()
            .partition(|(_, v)| *v <= done.version);
        open.waiting = still;
        if !open.waiting.is_empty() {
            self.scheduler.hurry(&done.uri);
        }
        if current {
            self.publish(&done.uri);
        }
        for (req, _) in ready {
            self.answer(&done.uri, &req);
        }
    }

    /// Publishes a document's diagnostics, unless they are those published last for the same
    /// version (another document's change analysed it again to the same answer).
    fn publish(&mut self, uri: &str) {
        let Some(open) = self.docs.get_mut(uri) else {
            return;
        };
        let Some(analysis) = &open.analysis else {
            return;
        };
        let uris = Uris {
            path: &analysis.file.path,
            uri,
        };
        let diagnostics: Vec<Value> = analysis
            .findings
            .iter()
            .map(|d| convert::diagnostic(d, &uris))
            .collect();
        let diagnostics = Value::Array(diagnostics);
        let version = analysis.version;
        if open
            .published
            .as_ref()
            .is_some_and(|(v, d)| *v == version && *d == diagnostics)
        {
            return;
        }
        self.out.send(protocol::notification(
            "textDocument/publishDiagnostics",
            json!({ "uri": uri, "version": analysis.version, "diagnostics": diagnostics }),
        ));
        open.published = Some((version, diagnostics));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsp::analysis::Outcome;
    use crate::lsp::transport::Reader;
    use std::io::Cursor;
    use std::path::Path;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Written(Arc<Mutex<Vec<u8>>>);

    impl Write for Written {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn frame(msg: Value) -> Vec<u8> {
        let body = msg.to_string();
        let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        out.extend_from_slice(body.as_bytes());
        out
    }

    /// Runs a conversation in memory without debounce; returns the exit status and the
    /// messages written.
    fn converse(analyser: Box<dyn Analyser>, messages: &[Value]) -> (u8, Vec<Value>) {
        let input: Vec<u8> = messages.iter().cloned().flat_map(frame).collect();
        let out = Written::default();
        let code = run(
            Cursor::new(input),
            Box::new(out.clone()),
            Config {
                debounce: Duration::ZERO,
                analyser,
            },
        );
        let written = out.0.lock().unwrap().clone();
        let mut reader = Reader::new(Cursor::new(written));
        let mut msgs = Vec::new();
        while let Frame::Body(b) = reader.read_frame() {
            msgs.push(serde_json::from_slice(&b).unwrap());
        }
        (code, msgs)
    }

    fn explode(_: &Path, _: &str, _: Option<&Path>, _: &crate::lsp::analysis::Others) -> Outcome {
        panic!("a front-end bug")
    }

    #[test]
    fn workspace_folders_are_file_urls_of_paths() {
        assert_eq!(
            folder_of("file:///work/app"),
            Some(PathBuf::from("/work/app"))
        );
        assert_eq!(
            folder_of("file:///work/my%20app"),
            Some(PathBuf::from("/work/my app"))
        );
        for not_a_folder in [
            "file:///?mp/.tmpySFFiK",
            "file:///work/app#top",
            "untitled:a",
            "https://example.com/app",
            "not a url",
        ] {
            assert_eq!(folder_of(not_a_folder), None, "{not_a_folder}");
        }
    }

    #[test]
    fn a_panicking_analysis_is_published_logged_and_the_server_goes_on() {
        let open = |uri: &str| json!({ "jsonrpc": "2.0", "method": "textDocument/didOpen", "params": { "textDocument": { "uri": uri, "languageId": "rust", "version": 1, "text": "fn f() {}" } } });
        let hover = |id: i64, uri: &str| json!({ "jsonrpc": "2.0", "id": id, "method": "textDocument/hover", "params": { "textDocument": { "uri": uri }, "position": { "line": 0, "character": 0 } } });
        let (code, msgs) = converse(
            Box::new(explode),
            &[
                json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {} }),
                open("untitled:a"),
                hover(2, "untitled:a"),
                open("untitled:b"),
                hover(3, "untitled:b"),
                json!({ "jsonrpc": "2.0", "id": 4, "method": "shutdown" }),
            ],
        );
        assert_eq!(code, 0, "the input ended after shutdown");
        for uri in ["untitled:a", "untitled:b"] {
            let published = msgs
                .iter()
                .find(|m| {
                    m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri
                })
                .expect("diagnostics published");
            let d = &published["params"]["diagnostics"][0];
            assert_eq!(d["code"], "parse-error");
            assert!(d["message"].as_str().unwrap().contains("a front-end bug"));
        }
        let logged = msgs
            .iter()
            .filter(|m| {
                m["method"] == "window/logMessage"
                    && m["params"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("a front-end bug")
            })
            .count();
        assert_eq!(logged, 2);
        for id in [2, 3] {
            let answer = msgs.iter().find(|m| m["id"] == id).expect("answered");
            assert!(answer["result"]["contents"]["value"]
                .as_str()
                .unwrap()
                .contains("parse-error"));
        }
        assert!(msgs.iter().any(|m| m["id"] == 4 && m["result"].is_null()));
    }

    /// How many analyses [`counted`] ran, and the text of the last one.
    static ANALYSES: Mutex<(usize, String)> = Mutex::new((0, String::new()));

    fn counted(
        _: &Path,
        text: &str,
        _: Option<&Path>,
        _: &crate::lsp::analysis::Others,
    ) -> Outcome {
        let mut a = ANALYSES.lock().unwrap();
        a.0 += 1;
        a.1 = text.to_string();
        Outcome::default()
    }

    /// Input handed over one frame at a time: each frame once the server has written as many
    /// messages containing `after` as the frame asks for.
    struct Paced {
        frames: std::collections::VecDeque<(Vec<u8>, usize)>,
        current: Cursor<Vec<u8>>,
        out: Written,
        after: &'static str,
        /// How far the output has been searched, and what was found there.
        scanned: usize,
        seen: usize,
    }

    impl Paced {
        fn wait_for(&mut self, count: usize) {
            let needle = self.after.as_bytes();
            while self.seen < count {
                let out = self.out.0.lock().unwrap();
                let from = self.scanned;
                if out.len() >= from + needle.len() {
                    self.seen += out[from..]
                        .windows(needle.len())
                        .filter(|w| *w == needle)
                        .count();
                    self.scanned = out.len() - needle.len() + 1;
                }
                drop(out);
                std::thread::yield_now();
            }
        }
    }

    impl std::io::Read for Paced {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = std::io::Read::read(&mut self.fill_buf()?, buf)?;
            self.consume(n);
            Ok(n)
        }
    }

    impl BufRead for Paced {
        fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
            if self.current.position() as usize == self.current.get_ref().len() {
                if let Some((next, count)) = self.frames.pop_front() {
                    self.wait_for(count);
                    self.current = Cursor::new(next);
                }
            }
            self.current.fill_buf()
        }
        fn consume(&mut self, n: usize) {
            self.current.consume(n)
        }
    }

    #[test]
    fn a_flood_of_edits_is_analysed_a_few_times_and_a_hover_gets_the_last_version() {
        let uri = "untitled:flood";
        let mut messages = vec![
            json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {} }),
            json!({ "jsonrpc": "2.0", "method": "textDocument/didOpen", "params": { "textDocument": { "uri": uri, "languageId": "rust", "version": 1, "text": "" } } }),
        ];
        // 1,000 keystrokes at the end of the text, each a position past the end of the line
        // (clamped, and logged: the next one is sent once the server has handled this one)
        for v in 2..=1001 {
            messages.push(json!({ "jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
                "textDocument": { "uri": uri, "version": v },
                "contentChanges": [{ "range": { "start": { "line": 0, "character": 5000 }, "end": { "line": 0, "character": 5000 } }, "text": "x" }],
            } }));
        }
        messages.push(json!({ "jsonrpc": "2.0", "id": 2, "method": "textDocument/hover", "params": { "textDocument": { "uri": uri }, "position": { "line": 0, "character": 0 } } }));
        messages.push(json!({ "jsonrpc": "2.0", "id": 3, "method": "shutdown" }));
        let out = Written::default();
        // the initialisation and the opening go first; edit `j` once `j - 1` were handled,
        // the hover and the shutdown once all were
        let head: Vec<u8> = messages[..2].iter().cloned().flat_map(frame).collect();
        let frames = messages[2..]
            .iter()
            .enumerate()
            .map(|(j, m)| (frame(m.clone()), j.min(1000)))
            .collect();
        let input = Paced {
            frames,
            current: Cursor::new(head),
            out: out.clone(),
            after: "outside the document",
            scanned: 0,
            seen: 0,
        };
        // changes wait for a pause longer than the conversation: only the opening and the
        // hover cause an analysis, however long the server has between two edits
        let code = run(
            input,
            Box::new(out.clone()),
            Config {
                debounce: Duration::from_secs(3600),
                analyser: Box::new(counted),
            },
        );
        assert_eq!(code, 0);
        let (runs, last) = ANALYSES.lock().unwrap().clone();
        assert!(runs <= 2, "{runs} analyses for 1,000 edits");
        assert_eq!(
            last,
            "x".repeat(1000),
            "the hover waited for the last version"
        );
        let written = out.0.lock().unwrap().clone();
        let mut reader = Reader::new(Cursor::new(written));
        let mut msgs: Vec<Value> = Vec::new();
        while let Frame::Body(b) = reader.read_frame() {
            msgs.push(serde_json::from_slice(&b).unwrap());
        }
        let hover = msgs.iter().find(|m| m["id"] == 2).expect("answered");
        assert!(hover.get("error").is_none(), "{hover}");
        let versions: Vec<i64> = msgs
            .iter()
            .filter(|m| m["method"] == "textDocument/publishDiagnostics")
            .filter_map(|m| m["params"]["version"].as_i64())
            .collect();
        assert_eq!(versions.last(), Some(&1001), "{versions:?}");
    }
}
