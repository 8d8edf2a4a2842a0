//! When documents are analysed, and where: one analysis runs at a time on a worker thread with
//! a large stack, and only the latest text of a document is ever queued, so a flood of edits
//! never builds a backlog (changes may also wait for a pause, the server's `debounce`). The
//! worker owns the [`Analyser`], and with it what it holds of each project; the files the
//! editor reports changed on disk reach it between two analyses.

use super::analysis::{self, Analyser, Outcome};
use super::transport::Frame;
use crate::source::FileRef;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::mpsc::{channel, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Stack of the analysis thread: deep but legal input must not overflow it.
const STACK_BYTES: usize = 512 * 1024 * 1024;

/// How long the documents an edit may affect wait after the last edit of another document.
pub const AFFECTED_PAUSE: Duration = Duration::from_millis(200);

/// What wakes the message loop.
pub enum Event {
    /// A frame read from the client.
    Frame(Frame),
    /// An analysis finished.
    Analysed(Done),
}

/// A document's text to analyse.
pub struct Job {
    pub uri: String,
    pub version: i64,
    pub file: FileRef,
    /// The root of the document's project (`None`: the document alone).
    pub root: Option<std::path::PathBuf>,
    /// The texts of the project's other open documents.
    pub others: analysis::Others,
}

/// What the worker is given.
enum Work {
    Analyse(Job),
    FilesChanged(Vec<PathBuf>),
}

/// A finished analysis.
pub struct Done {
    pub uri: String,
    pub version: i64,
    pub file: FileRef,
    pub outcome: Outcome,
}

/// The analysis thread.
pub struct Worker {
    jobs: Option<Sender<Work>>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    /// Starts the thread; finished analyses come back as [`Event::Analysed`].
    pub fn start(
        mut analyser: Box<dyn Analyser>,
        events: Sender<Event>,
    ) -> std::io::Result<Worker> {
        let (jobs, incoming) = channel::<Work>();
        let thread = std::thread::Builder::new()
            .name("locklint-lsp-analysis".into())
            .stack_size(STACK_BYTES)
            .spawn(move || {
                for work in incoming {
                    let job = match work {
                        Work::Analyse(job) => job,
                        Work::FilesChanged(paths) => {
                            analyser.files_changed(&paths);
                            continue;
                        }
                    };
                    let outcome = analysis::guarded(
                        analyser.as_mut(),
                        &job.file,
                        job.root.as_deref(),
                        &job.others,
                    );
                    let done = Done {
                        uri: job.uri,
                        version: job.version,
                        file: job.file,
                        outcome,
                    };
                    if events.send(Event::Analysed(done)).is_err() {
                        return;
                    }
                }
            })?;
        Ok(Worker {
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }

    /// Hands a job to the thread; false when the thread is gone.
    pub fn submit(&self, job: Job) -> bool {
        self.send(Work::Analyse(job))
    }

    /// Tells the analyser, before its next analysis, of files changed on disk; false when
    /// the thread is gone.
    pub fn files_changed(&self, paths: Vec<PathBuf>) -> bool {
        self.send(Work::FilesChanged(paths))
    }

    fn send(&self, work: Work) -> bool {
        self.jobs.as_ref().is_some_and(|j| j.send(work).is_ok())
    }
}

impl Drop for Worker {
    /// Lets the analysis under way finish, then ends the thread.
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Which document to analyse next.
pub struct Scheduler {
    debounce: Duration,
    /// Documents whose latest text waits for analysis, and from when.
    due: HashMap<String, Instant>,
    /// The document being analysed.
    running: Option<String>,
}

impl Scheduler {
    pub fn new(debounce: Duration) -> Self {
        Scheduler {
            debounce,
            due: HashMap::new(),
            running: None,
        }
    }

    /// The document changed: analyse it once changes pause.
    pub fn changed(&mut self, uri: &str) {
        self.due
            .insert(uri.to_string(), Instant::now() + self.debounce);
    }

    /// Another document of its project was edited, which the document's findings may rest on:
    /// analyse it once the edits pause ([`AFFECTED_PAUSE`] after the last one), so that the
    /// document being edited is analysed first; a document due already stays due.
    pub fn affected(&mut self, uri: &str) {
        let now = Instant::now();
        let at = now + self.debounce + AFFECTED_PAUSE;
        match self.due.get_mut(uri) {
            Some(due) if *due <= now => {}
            Some(due) => *due = (*due).max(at),
            None => {
                self.due.insert(uri.to_string(), at);
            }
        }
    }

    /// Analyse the document as soon as the worker is free (opened, saved, or a request waits).
    pub fn now(&mut self, uri: &str) {
        self.due.insert(uri.to_string(), Instant::now());
    }

    /// A request waits for the document: skip the rest of its debounce.
    pub fn hurry(&mut self, uri: &str) {
        if let Some(at) = self.due.get_mut(uri) {
            *at = Instant::now();
        }
    }

    pub fn closed(&mut self, uri: &str) {
        self.due.remove(uri);
    }

    /// The analysis under way finished.
    pub fn finished(&mut self) {
        self.running = None;
    }

    /// The document to analyse now, if the worker is free and one is due.
    pub fn take_due(&mut self) -> Option<String> {
        if self.running.is_some() {
            return None;
        }
        let now = Instant::now();
        let uri = self
            .due
            .iter()
            .filter(|(_, at)| **at <= now)
            .min_by_key(|(_, at)| **at)
            .map(|(u, _)| u.clone())?;
        self.due.remove(&uri);
        self.running = Some(uri.clone());
        Some(uri)
    }

    /// How long the message loop may wait for a message before a document falls due; `None`
    /// when nothing is due or an analysis is running (its end wakes the loop).
    pub fn wait(&self) -> Option<Duration> {
        if self.running.is_some() {
            return None;
        }
        let now = Instant::now();
        self.due
            .values()
            .min()
            .map(|at| at.saturating_duration_since(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_analysis_at_a_time_and_changes_wait_for_a_pause() {
        let mut s = Scheduler::new(Duration::from_secs(3600));
        s.changed("a");
        assert_eq!(s.take_due(), None, "still debouncing");
        assert!(s.wait().unwrap() > Duration::from_secs(3000));
        s.hurry("a");
        s.now("b");
        let first = s.take_due().unwrap();
        assert_eq!(s.take_due(), None, "the worker is busy");
        assert_eq!(s.wait(), None);
        s.finished();
        let second = s.take_due().unwrap();
        assert_ne!(first, second);
        s.finished();
        // a document changed many times is queued once
        for _ in 0..1000 {
            s.changed("c");
        }
        s.hurry("c");
        assert_eq!(s.take_due().as_deref(), Some("c"));
        s.finished();
        assert_eq!(s.take_due(), None);
        assert_eq!(s.wait(), None);
    }

    #[test]
    fn a_document_another_edit_affects_waits_for_the_edits_to_pause() {
        let mut s = Scheduler::new(Duration::from_secs(3600));
        s.now("edited");
        s.affected("caller");
        assert_eq!(s.take_due().as_deref(), Some("edited"), "the edit first");
        s.finished();
        assert_eq!(s.take_due(), None, "the caller waits");
        assert!(s.wait().unwrap() > Duration::from_secs(3600));
        // another edit pushes it back; a document due for its own change stays due
        s.now("own");
        s.affected("own");
        s.affected("caller");
        assert_eq!(s.take_due().as_deref(), Some("own"));
        s.finished();
        assert_eq!(s.take_due(), None);
    }
}
