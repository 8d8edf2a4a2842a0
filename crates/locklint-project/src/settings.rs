//! What the project facts take from the configuration: lock words, column names,
//! efficiency locks, and the settings that choose the form of fixes.

/// Settings that choose the form of fixes (`redis-version`, `default-ttl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixSettings {
    /// Target Redis version (major, minor): `DELEX ... IFEQ` needs 8.4.
    pub redis_version: (u32, u32),
    /// Expiry for locks taken without one, in milliseconds.
    pub default_ttl_ms: u64,
}

impl Default for FixSettings {
    fn default() -> Self {
        FixSettings {
            redis_version: (7, 0),
            default_ttl_ms: 30_000,
        }
    }
}

impl FixSettings {
    /// Whether the target has `DELEX key IFEQ token` (Redis 8.4).
    pub fn has_delex(&self) -> bool {
        self.redis_version >= (8, 4)
    }
}

/// `7.2` → (7, 2); `8` → (8, 0).
pub fn parse_version(s: &str) -> Option<(u32, u32)> {
    let mut it = s.trim().split('.');
    let major = it.next()?.parse().ok()?;
    let minor = match it.next() {
        Some(m) => m.parse().ok()?,
        None => 0,
    };
    Some((major, minor))
}

/// What the project facts take from the configuration (`config::Settings::project` makes it).
#[derive(Debug, Clone, Default)]
pub struct ProjectSettings {
    /// Extra words or patterns that mark a lock key.
    pub lock_key_patterns: Vec<String>,
    /// Names of fencing-token columns besides the defaults.
    pub fence_columns: Vec<String>,
    /// Lock-table columns naming the holder, besides the defaults.
    pub owner_columns: Vec<String>,
    /// Lock-table columns holding the expiry, besides the defaults.
    pub expiry_columns: Vec<String>,
    /// Key templates configured as locks for efficiency.
    pub efficiency_locks: Vec<String>,
    pub fix: FixSettings,
}
