//! Redis servers for tests.
//!
//! [`redis()`] returns the shared server at `REDIS_URL` (default `redis://127.0.0.1:6379`)
//! when it answers `PING`, and otherwise starts a throwaway `redis-server` from `PATH`.
//! Fault tests (restarts, kills, `FLUSHALL`) always use [`RedisServer::start`], never the
//! shared server. [`RedisCluster::start`] starts a three-primary Redis Cluster. Every server
//! started here is killed when its handle is dropped. A missing `redis-server` binary is a
//! test failure, not a skip.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::Commands;

/// The shared server used when `REDIS_URL` is not set.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

const MISSING_BINARY: &str = "`redis-server` is not on PATH (needed when REDIS_URL does not \
     answer, and always for the fault and cluster tests); install the Debian package \
     `redis-server` (apt-get install redis-server)";

/// A key prefix unique to this test run: `lltest-<test>-<16 random hex digits>`.
pub fn unique(test: &str) -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("OS random number generator");
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("lltest-{test}-{hex}")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind an ephemeral loopback port")
        .port()
}

fn ping(url: &str) -> bool {
    let Ok(client) = redis::Client::open(url) else {
        return false;
    };
    let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_millis(500)) else {
        return false;
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
    redis::cmd("PING").query::<String>(&mut conn).is_ok()
}

/// A throwaway `redis-server` on a free loopback port, killed on drop.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    extra: Vec<String>,
    dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts a standalone server without persistence.
    pub fn start() -> Self {
        Self::start_with(Vec::new())
    }

    /// Starts a server with extra command-line arguments (`extra` may mention `{port}` and
    /// `{dir}`, replaced by the chosen port and data directory).
    pub fn start_with(extra: Vec<String>) -> Self {
        let mut last_err = String::new();
        for _ in 0..8 {
            let mut server = RedisServer {
                child: None,
                port: free_port(),
                extra: extra.clone(),
                dir: tempfile::tempdir().expect("create a temporary directory"),
            };
            match server.spawn() {
                Ok(()) => return server,
                Err(e) => last_err = e,
            }
        }
        panic!("could not start redis-server: {last_err}");
    }

    fn spawn(&mut self) -> Result<(), String> {
        let dir = self.dir.path().display().to_string();
        let port = self.port.to_string();
        let mut cmd = Command::new("redis-server");
        cmd.args([
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .args([
            "--dir",
            &dir,
            "--logfile",
            &format!("{dir}/redis-{port}.log"),
        ])
        .args(
            self.extra
                .iter()
                .map(|a| a.replace("{port}", &port).replace("{dir}", &dir)),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        let child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{MISSING_BINARY}"),
            Err(e) => panic!("could not run redis-server: {e}"),
        };
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if ping(&self.url()) {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    let log = std::fs::read_to_string(format!("{dir}/redis-{port}.log"))
                        .unwrap_or_default();
                    return Err(format!("redis-server exited with {status}: {log}"));
                }
            }
            if Instant::now() > deadline {
                return Err(format!("redis-server on port {port} did not answer PING"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The server's data directory.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Kills the server (SIGKILL) and waits for it to exit.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server and starts it again on the same port with an empty dataset.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.spawn() {
                Ok(()) => return,
                Err(e) if Instant::now() > deadline => panic!("restart failed: {e}"),
                Err(_) => {
                    self.kill();
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }

    /// A new multiplexed connection to this server.
    pub async fn conn(&self) -> MultiplexedConnection {
        connect(&self.url()).await
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Opens a multiplexed connection to `url`, panicking with the URL on failure.
pub async fn connect(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .unwrap_or_else(|e| panic!("bad redis url {url}: {e}"))
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"))
}

/// The Redis a non-destructive test runs against. Keys under prefixes obtained from
/// [`TestRedis::unique`] are deleted when it is dropped (also when the test panics), so the
/// shared server does not accumulate fencing counters.
pub struct TestRedis {
    url: String,
    /// The throwaway server, started because `REDIS_URL` did not answer.
    server: Option<RedisServer>,
    prefixes: std::sync::Mutex<Vec<String>>,
}

impl TestRedis {
    /// The server URL.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// Whether this is the shared server at `REDIS_URL` rather than a throwaway one.
    pub fn is_shared(&self) -> bool {
        self.server.is_none()
    }

    /// A client for the server.
    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("valid redis url")
    }

    /// A new multiplexed connection.
    pub async fn conn(&self) -> MultiplexedConnection {
        connect(&self.url).await
    }

    /// A unique key prefix (see [`unique`]) whose keys are deleted on drop.
    pub fn unique(&self, test: &str) -> String {
        let prefix = unique(test);
        self.prefixes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(prefix.clone());
        prefix
    }
}

impl Drop for TestRedis {
    fn drop(&mut self) {
        let prefixes = std::mem::take(self.prefixes.get_mut().unwrap_or_else(|e| e.into_inner()));
        if prefixes.is_empty() || self.server.is_some() {
            return;
        }
        let Ok(client) = redis::Client::open(self.url.as_str()) else {
            return;
        };
        let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_secs(1)) else {
            return;
        };
        for prefix in prefixes {
            let keys: Vec<String> = match conn.scan_match::<_, String>(format!("{prefix}*")) {
                Ok(iter) => iter.filter_map(Result::ok).collect(),
                Err(_) => continue,
            };
            for chunk in keys.chunks(500) {
                let _: redis::RedisResult<i64> = redis::cmd("DEL").arg(chunk).query(&mut conn);
            }
        }
    }
}

/// The shared server at `REDIS_URL` (default [`DEFAULT_URL`]) if it answers `PING`,
/// otherwise a throwaway `redis-server` for this test alone.
pub fn redis() -> TestRedis {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned());
    let (url, server) = if ping(&url) {
        (url, None)
    } else {
        let server = RedisServer::start();
        (server.url(), Some(server))
    };
    TestRedis {
        url,
        server,
        prefixes: std::sync::Mutex::new(Vec::new()),
    }
}

/// The client id of `conn`'s server-side connection (for `CLIENT KILL ID`).
pub async fn client_id(conn: &mut MultiplexedConnection) -> i64 {
    redis::cmd("CLIENT")
        .arg("ID")
        .query_async(conn)
        .await
        .expect("CLIENT ID")
}

/// A three-primary Redis Cluster on free loopback ports, killed on drop.
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts three `--cluster-enabled` servers, joins them with
    /// `redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes` and waits for
    /// `cluster_state:ok` on every node.
    pub fn start() -> Self {
        let nodes: Vec<RedisServer> = (0..3)
            .map(|_| {
                let bus = free_port().to_string();
                RedisServer::start_with(vec![
                    "--cluster-enabled".into(),
                    "yes".into(),
                    "--cluster-port".into(),
                    bus,
                    "--cluster-config-file".into(),
                    "{dir}/nodes-{port}.conf".into(),
                    "--cluster-node-timeout".into(),
                    "5000".into(),
                ])
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let output = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| {
                panic!("could not run redis-cli (Debian package `redis-tools`): {e}")
            });
        assert!(
            output.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let cluster = RedisCluster { nodes };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !cluster.all_ok() {
            assert!(Instant::now() < deadline, "cluster_state never became ok");
            std::thread::sleep(Duration::from_millis(100));
        }
        cluster
    }

    fn all_ok(&self) -> bool {
        self.nodes.iter().all(|n| {
            let Ok(client) = redis::Client::open(n.url()) else {
                return false;
            };
            let Ok(mut conn) = client.get_connection() else {
                return false;
            };
            redis::cmd("CLUSTER")
                .arg("INFO")
                .query::<String>(&mut conn)
                .is_ok_and(|info| info.contains("cluster_state:ok"))
        })
    }

    /// The nodes' URLs.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The nodes.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// An async cluster connection.
    pub async fn conn(&self) -> redis::cluster_async::ClusterConnection {
        redis::cluster::ClusterClient::new(self.urls())
            .expect("cluster client")
            .get_async_connection()
            .await
            .expect("connect to the cluster")
    }
}

/// Whether something listens on `addr` (used to check a server is gone).
pub fn listening(addr: SocketAddr) -> bool {
    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}
