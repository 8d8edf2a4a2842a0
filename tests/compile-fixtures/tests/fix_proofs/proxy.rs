//! A Redis proxy that forces an interleaving inside a fixture function: it forwards every
//! command between the function's client and the server, and before forwarding the first
//! command whose name is in a watch list it runs a hook (for example: the lock expires and
//! another holder takes it) or cuts the connection (the process dies at that point).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// What happens to the watched command.
pub enum Action {
    /// Forward it after the hook has run.
    Forward,
    /// Close the client's and the server's connection instead: the holder died here.
    Cut,
}

type Hook = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Action> + Send>> + Send + Sync>;

/// A proxy on a free loopback port in front of the Redis at `upstream`.
pub struct Proxy {
    url: String,
    fired: Arc<AtomicBool>,
    tasks: Arc<std::sync::Mutex<JoinSet<()>>>,
}

impl Proxy {
    /// Starts a proxy in front of `upstream` (a `redis://` URL) that runs `hook` once, before
    /// the first command named in `watch` (case-insensitive) is forwarded. Every command
    /// named in `watch` after the connection was cut is cut too.
    pub async fn start<F, Fut>(upstream: &str, watch: &[&str], hook: F) -> Proxy
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Action> + Send + 'static,
    {
        let server = host_port(upstream);
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a proxy port");
        let local = listener.local_addr().expect("proxy address").to_string();
        let url = upstream.replacen(&server, &local, 1);
        let hook: Hook = Arc::new(move || Box::pin(hook()));
        let watch: Arc<Vec<String>> =
            Arc::new(watch.iter().map(|w| w.to_ascii_uppercase()).collect());
        let fired = Arc::new(AtomicBool::new(false));
        let cut = Arc::new(AtomicBool::new(false));
        let tasks = Arc::new(std::sync::Mutex::new(JoinSet::new()));
        let accept_tasks = Arc::clone(&tasks);
        let accept_fired = Arc::clone(&fired);
        tasks.lock().unwrap().spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(upstream) = TcpStream::connect(&server).await else {
                    continue;
                };
                let (hook, watch) = (Arc::clone(&hook), Arc::clone(&watch));
                let (fired, cut) = (Arc::clone(&accept_fired), Arc::clone(&cut));
                accept_tasks
                    .lock()
                    .unwrap()
                    .spawn(serve(client, upstream, hook, watch, fired, cut));
            }
        });
        Proxy { url, fired, tasks }
    }

    /// The URL to give the fixture function's client.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether the hook ran (the watched command was reached).
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Ok(mut tasks) = self.tasks.lock() {
            tasks.abort_all();
        }
    }
}

/// `host:port` of a `redis://[user:pass@]host:port[/db]` URL.
fn host_port(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let hp = rest.split('/').next().unwrap_or(rest);
    if hp.contains(':') {
        hp.to_string()
    } else {
        format!("{hp}:6379")
    }
}

async fn serve(
    client: TcpStream,
    upstream: TcpStream,
    hook: Hook,
    watch: Arc<Vec<String>>,
    fired: Arc<AtomicBool>,
    cut: Arc<AtomicBool>,
) {
    let (client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = upstream.into_split();
    let replies = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    });
    let mut reader = BufReader::new(client_read);
    while let Some((raw, name)) = read_command(&mut reader).await {
        if watch.contains(&name) {
            let action = if cut.load(Ordering::SeqCst) {
                Action::Cut
            } else if !fired.swap(true, Ordering::SeqCst) {
                hook().await
            } else {
                Action::Forward
            };
            if let Action::Cut = action {
                cut.store(true, Ordering::SeqCst);
                break;
            }
        }
        if server_write.write_all(&raw).await.is_err() {
            break;
        }
    }
    // closing both directions: the server sees the client go away, the client sees EOF
    let _ = server_write.shutdown().await;
    replies.abort();
}

/// Reads one RESP command (an array of bulk strings) and returns its raw bytes and its
/// upper-cased name; `None` at end of stream or on anything else.
async fn read_command<R: tokio::io::AsyncBufRead + Unpin>(r: &mut R) -> Option<(Vec<u8>, String)> {
    let mut raw = Vec::new();
    let header = read_line(r, &mut raw).await?;
    let count: usize = header.strip_prefix('*')?.parse().ok()?;
    let mut name = String::new();
    for i in 0..count {
        let len_line = read_line(r, &mut raw).await?;
        let len: usize = len_line.strip_prefix('$')?.parse().ok()?;
        let start = raw.len();
        raw.resize(start + len + 2, 0);
        r.read_exact(&mut raw[start..]).await.ok()?;
        if i == 0 {
            name = String::from_utf8_lossy(&raw[start..start + len]).to_ascii_uppercase();
        }
    }
    Some((raw, name))
}

async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
    r: &mut R,
    raw: &mut Vec<u8>,
) -> Option<String> {
    let start = raw.len();
    let n = r.read_until(b'\n', raw).await.ok()?;
    if n == 0 {
        return None;
    }
    let line = String::from_utf8_lossy(&raw[start..])
        .trim_end()
        .to_string();
    Some(line)
}
