//! Configuration: `locklint.toml` / `.locklint.toml`, or `[workspace.metadata.locklint]` /
//! `[package.metadata.locklint]` in `Cargo.toml`. The nearest configuration above a file
//! applies to it; `extend = "../locklint.toml"` inherits another file explicitly. Errors name
//! the file, line and column, with a suggestion.

use crate::diagnostic::Severity;
use crate::suggest;
use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use toml::Spanned;

/// Every key a configuration may hold (for suggestions).
pub const KEYS: &[&str] = &[
    "extend",
    "select",
    "ignore",
    "extend-select",
    "severity",
    "exclude",
    "per-path-ignores",
    "lock-key-patterns",
    "fence-columns",
    "lock-table",
    "locks",
    "redis-version",
    "redis-cluster",
    "default-ttl",
    "fail-on",
    "help-uri",
];

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Error,
    Warning,
}

impl From<Level> for Severity {
    fn from(l: Level) -> Self {
        match l {
            Level::Error => Severity::Error,
            Level::Warning => Severity::Warning,
        }
    }
}

/// What a lock is for.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Purpose {
    /// Avoids duplicate work; a rare double run is harmless.
    Efficiency,
    /// Protects data; needs a fence or idempotent writes.
    Correctness,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LockTableColumns {
    pub name_columns: Option<Vec<String>>,
    pub owner_columns: Option<Vec<String>>,
    pub expiry_columns: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockDecl {
    pub purpose: Purpose,
}

/// One configuration table as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Raw {
    pub extend: Option<Spanned<String>>,
    pub select: Option<Vec<Spanned<String>>>,
    pub ignore: Option<Vec<Spanned<String>>>,
    pub extend_select: Option<Vec<Spanned<String>>>,
    pub severity: Option<BTreeMap<Spanned<String>, Level>>,
    pub exclude: Option<Vec<Spanned<String>>>,
    pub per_path_ignores: Option<BTreeMap<Spanned<String>, Vec<Spanned<String>>>>,
    pub lock_key_patterns: Option<Vec<String>>,
    pub fence_columns: Option<Vec<String>>,
    pub lock_table: Option<LockTableColumns>,
    pub locks: Option<BTreeMap<String, LockDecl>>,
    pub redis_version: Option<Spanned<String>>,
    pub redis_cluster: Option<bool>,
    pub default_ttl: Option<Spanned<String>>,
    pub fail_on: Option<Level>,
    pub help_uri: Option<Spanned<String>>,
}

/// A manifest's `[package.metadata.locklint]` table (read only when it exists, so that nothing
/// else in the manifest can make reading it fail).
#[derive(Debug, Deserialize)]
struct InPackage {
    package: MetaHolder,
}

/// A manifest's `[workspace.metadata.locklint]` table.
#[derive(Debug, Deserialize)]
struct InWorkspace {
    workspace: MetaHolder,
}

#[derive(Debug, Deserialize)]
struct MetaHolder {
    metadata: Metadata,
}

#[derive(Debug, Deserialize)]
struct Metadata {
    locklint: Raw,
}

/// A configuration error, rendered with the file's text.
#[derive(Debug)]
pub struct ConfigError {
    pub path: PathBuf,
    pub text: String,
    pub span: std::ops::Range<usize>,
    pub message: String,
    pub help: Option<String>,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let idx = crate::source::LineIndex::new(&self.text);
        let lc = idx.line_col(&self.text, self.span.start);
        write!(
            f,
            "{}:{}:{}: {}",
            self.path.display(),
            lc.line,
            lc.column,
            self.message
        )
    }
}

impl std::error::Error for ConfigError {}

impl miette::Diagnostic for ConfigError {
    fn code<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        Some(Box::new("locklint::config"))
    }
    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn std::fmt::Display>)
    }
    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.text)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        let len = self.span.end.saturating_sub(self.span.start);
        let label = self
            .message
            .split(", expected")
            .next()
            .unwrap_or(&self.message);
        Some(Box::new(std::iter::once(
            miette::LabeledSpan::new_primary_with_span(
                Some(label.to_string()),
                miette::SourceSpan::new(self.span.start.into(), len),
            ),
        )))
    }
}

impl ConfigError {
    /// The error as miette renders it: one `error:` line, then the message, the file named
    /// once with the line and column, the snippet and the help.
    pub fn render(&self) -> String {
        use crate::output::human::{line_len, MAX_SNIPPET_LINE};
        if line_len(&self.text, self.span.start) > MAX_SNIPPET_LINE
            || line_len(&self.text, self.span.end) > MAX_SNIPPET_LINE
        {
            let help = self
                .help
                .as_ref()
                .map(|h| format!("  help: {h}\n"))
                .unwrap_or_default();
            return format!("error: invalid configuration: {self}\n{help}");
        }
        let mut out = String::new();
        let handler =
            miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
                .with_links(false);
        let named = Named {
            error: self,
            source: miette::NamedSource::new(
                crate::source::display_path(&self.path),
                self.text.clone(),
            ),
        };
        if handler.render_report(&mut out, &named).is_err() {
            return format!("error: invalid configuration: {self}\n");
        }
        format!("error: invalid configuration\n{out}")
    }
}

/// A [`ConfigError`] whose snippet is headed by the file's display path.
struct Named<'a> {
    error: &'a ConfigError,
    source: miette::NamedSource<String>,
}

impl std::fmt::Debug for Named<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.error.message)
    }
}

impl std::fmt::Display for Named<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.error.message)
    }
}

impl std::error::Error for Named<'_> {}

impl miette::Diagnostic for Named<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn std::fmt::Display + 'b>> {
        self.error.code()
    }
    fn help<'b>(&'b self) -> Option<Box<dyn std::fmt::Display + 'b>> {
        self.error.help()
    }
    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.source)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        self.error.labels()
    }
}

fn parse_error(path: &Path, text: &str, e: toml::de::Error) -> ConfigError {
    let message = e.message().trim().to_string();
    let help = message
        .strip_prefix("unknown field `")
        .and_then(|r| r.split('`').next())
        .and_then(|field| suggest::closest(field, KEYS.iter().copied()))
        .map(|c| format!("did you mean `{c}`?"));
    ConfigError {
        path: path.to_path_buf(),
        text: text.to_string(),
        span: e.span().unwrap_or(0..0),
        message,
        help,
    }
}

/// Effective settings for the files under one configuration.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// Files that contributed, nearest first.
    pub sources: Vec<PathBuf>,
    /// Directory globs are relative to.
    pub root: PathBuf,
    pub select: Option<Vec<String>>,
    pub ignore: Vec<String>,
    pub extend_select: Vec<String>,
    pub severity: HashMap<String, Severity>,
    pub exclude: Vec<String>,
    exclude_set: Option<GlobSet>,
    pub per_path_ignores: Vec<(String, Vec<String>)>,
    /// Every per-path glob in one matcher, and for each glob it holds the index of its entry
    /// in `per_path_ignores`.
    per_path_set: Option<(GlobSet, Vec<usize>)>,
    pub lock_key_patterns: Vec<String>,
    pub fence_columns: Vec<String>,
    pub lock_table: LockTableColumns,
    pub locks: Vec<(String, Purpose)>,
    pub redis_version: Option<String>,
    /// Whether the code runs against a Redis Cluster (`redis-cluster`, default true):
    /// `false` turns `cross-slot-lock-keys` off.
    pub redis_cluster: Option<bool>,
    pub default_ttl: Option<String>,
    pub fail_on: Option<Level>,
    /// Documentation link per rule, `{rule}` replaced by the rule name (SARIF `helpUri`).
    pub help_uri: Option<String>,
}

/// One matcher for `patterns`; each glob it holds is tagged with the index of the pattern it
/// comes from. A glob written several times is compiled once (the first pattern's tag).
fn glob_set<'p>(patterns: impl IntoIterator<Item = &'p str>) -> (GlobSet, Vec<usize>) {
    let mut b = GlobSetBuilder::new();
    let mut tags = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, p) in patterns.into_iter().enumerate() {
        let p = p.trim_start_matches("./");
        // `dir` and `dir/**` both cover the directory itself, so that a walk can leave it out
        // without reading anything under it
        let dir = p.strip_suffix("/**").unwrap_or(p).trim_end_matches('/');
        for pat in [p.to_string(), dir.to_string(), format!("{dir}/**")] {
            if !seen.insert(pat.clone()) {
                continue;
            }
            if let Ok(g) = Glob::new(&pat) {
                b.add(g);
                tags.push(i);
            }
        }
    }
    let set = b.build().unwrap_or_else(|_| GlobSet::empty());
    if set.is_empty() {
        tags.clear();
    }
    (set, tags)
}

impl Settings {
    /// What the project facts take from these settings (unset or invalid fix values keep
    /// their defaults).
    pub fn project(&self) -> crate::locks::ProjectSettings {
        let mut fix = crate::locks::FixSettings::default();
        if let Some(v) = self
            .redis_version
            .as_deref()
            .and_then(crate::locks::parse_version)
        {
            fix.redis_version = v;
        }
        if let Some(ms) = self.default_ttl.as_deref().and_then(parse_duration_ms) {
            fix.default_ttl_ms = ms;
        }
        crate::locks::ProjectSettings {
            lock_key_patterns: self.lock_key_patterns.clone(),
            fence_columns: self.fence_columns.clone(),
            owner_columns: self.lock_table.owner_columns.clone().unwrap_or_default(),
            expiry_columns: self.lock_table.expiry_columns.clone().unwrap_or_default(),
            efficiency_locks: self
                .locks
                .iter()
                .filter(|(_, p)| *p == Purpose::Efficiency)
                .map(|(k, _)| k.clone())
                .collect(),
            fix,
        }
    }

    fn relative(&self, path: &Path) -> Option<PathBuf> {
        let abs = path.canonicalize().ok()?;
        abs.strip_prefix(&self.root).ok().map(Path::to_path_buf)
    }

    /// Whether the file is excluded.
    pub fn excludes(&self, path: &Path) -> bool {
        if self.exclude.is_empty() {
            return false;
        }
        match (&self.exclude_set, self.relative(path)) {
            (Some(set), Some(rel)) => set.is_match(&rel),
            _ => false,
        }
    }

    /// Whether `rule` applies to `path` under these settings.
    pub fn enabled(&self, rule: &str, path: &Path) -> bool {
        let selected = match &self.select {
            Some(s) => s.iter().any(|r| r == rule),
            None => true,
        } || self.extend_select.iter().any(|r| r == rule);
        if !selected || self.ignore.iter().any(|r| r == rule) {
            return false;
        }
        if rule == CLUSTER_RULE && self.redis_cluster == Some(false) {
            return false;
        }
        let per_path = self
            .per_path_set
            .as_ref()
            .filter(|(set, _)| !set.is_empty());
        if let (Some((set, tags)), Some(rel)) =
            (per_path, per_path.and_then(|_| self.relative(path)))
        {
            for glob in set.matches(&rel) {
                let entry = tags.get(glob).and_then(|&e| self.per_path_ignores.get(e));
                if entry.is_some_and(|(_, rules)| rules.iter().any(|r| r == rule)) {
                    return false;
                }
            }
        }
        true
    }

    /// Build the matchers, once the whole `extend` chain is applied.
    fn finish(mut self) -> Self {
        self.exclude_set = Some(glob_set(self.exclude.iter().map(String::as_str)).0);
        self.per_path_set = Some(glob_set(
            self.per_path_ignores.iter().map(|(g, _)| g.as_str()),
        ));
        self
    }

    /// Apply a configuration table on top of these settings (a child over its parent).
    fn apply(&mut self, raw: &Raw) {
        let names =
            |v: &Vec<Spanned<String>>| v.iter().map(|s| s.get_ref().clone()).collect::<Vec<_>>();
        if let Some(s) = &raw.select {
            self.select = Some(names(s));
            self.extend_select.clear();
        }
        if let Some(s) = &raw.ignore {
            self.ignore = names(s);
        }
        if let Some(s) = &raw.extend_select {
            self.extend_select.extend(names(s));
        }
        if let Some(s) = &raw.severity {
            for (k, v) in s {
                self.severity.insert(k.get_ref().clone(), (*v).into());
            }
        }
        if let Some(s) = &raw.exclude {
            self.exclude = names(s);
        }
        if let Some(s) = &raw.per_path_ignores {
            self.per_path_ignores = s
                .iter()
                .map(|(k, v)| (k.get_ref().clone(), names(v)))
                .collect();
        }
        if let Some(s) = &raw.lock_key_patterns {
            self.lock_key_patterns = s.clone();
        }
        if let Some(s) = &raw.fence_columns {
            self.fence_columns = s.clone();
        }
        if let Some(s) = &raw.lock_table {
            self.lock_table = s.clone();
        }
        if let Some(s) = &raw.locks {
            self.locks = s.iter().map(|(k, v)| (k.clone(), v.purpose)).collect();
        }
        if let Some(s) = &raw.redis_version {
            self.redis_version = Some(s.get_ref().clone());
        }
        if let Some(s) = raw.redis_cluster {
            self.redis_cluster = Some(s);
        }
        if let Some(s) = &raw.default_ttl {
            self.default_ttl = Some(s.get_ref().clone());
        }
        if let Some(s) = raw.fail_on {
            self.fail_on = Some(s);
        }
        if let Some(s) = &raw.help_uri {
            self.help_uri = Some(s.get_ref().clone());
        }
    }
}

/// The rule that `redis-cluster = false` turns off: it is only about Redis Cluster.
const CLUSTER_RULE: &str = "cross-slot-lock-keys";

/// The longest glob accepted: a glob is compiled to a matcher some thousand times its size.
const MAX_GLOB_BYTES: usize = 1024;

/// Check rule names, versions and durations; the first problem becomes an error.
fn validate(path: &Path, text: &str, raw: &Raw) -> Result<(), ConfigError> {
    let known: Vec<&str> = crate::rules::infos().iter().map(|i| i.name).collect();
    let err = |span: std::ops::Range<usize>, message: String, help: Option<String>| ConfigError {
        path: path.to_path_buf(),
        text: text.to_string(),
        span,
        message,
        help,
    };
    let mut rule_names: Vec<&Spanned<String>> = Vec::new();
    for list in [&raw.select, &raw.ignore, &raw.extend_select]
        .into_iter()
        .flatten()
    {
        rule_names.extend(list.iter());
    }
    if let Some(s) = &raw.severity {
        rule_names.extend(s.keys());
    }
    if let Some(p) = &raw.per_path_ignores {
        for v in p.values() {
            rule_names.extend(v.iter());
        }
    }
    for name in rule_names {
        if !known.contains(&name.get_ref().as_str()) {
            return Err(err(
                name.span(),
                format!("unknown rule `{}`", name.get_ref()),
                suggest::closest(name.get_ref(), known.iter().copied())
                    .map(|c| format!("did you mean `{c}`?"))
                    .or(Some("`locklint rules` lists the rules".to_string())),
            ));
        }
    }
    for pattern in raw
        .exclude
        .iter()
        .flatten()
        .chain(raw.per_path_ignores.iter().flat_map(|p| p.keys()))
    {
        if pattern.get_ref().len() > MAX_GLOB_BYTES {
            return Err(err(
                pattern.span(),
                format!("glob longer than {MAX_GLOB_BYTES} bytes"),
                None,
            ));
        }
        if let Err(e) = Glob::new(pattern.get_ref()) {
            return Err(err(pattern.span(), format!("invalid glob: {e}"), None));
        }
    }
    if let Some(v) = &raw.redis_version {
        let ok = v
            .get_ref()
            .split('.')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
        if !ok {
            return Err(err(
                v.span(),
                "redis-version must look like `7.2` or `8.4`".to_string(),
                None,
            ));
        }
    }
    if let Some(v) = &raw.help_uri {
        if !(v.get_ref().starts_with("https://") || v.get_ref().starts_with("http://")) {
            return Err(err(
                v.span(),
                "help-uri must be an http(s) URL, e.g. `https://docs.example.com/locklint/{rule}`"
                    .to_string(),
                None,
            ));
        }
    }
    if let Some(v) = &raw.default_ttl {
        if parse_duration_ms(v.get_ref()).is_none() {
            return Err(err(
                v.span(),
                "default-ttl must be a duration such as `30s` or `1500ms`".to_string(),
                None,
            ));
        }
    }
    Ok(())
}

/// `30s`, `1500ms`, `2m` → milliseconds.
pub fn parse_duration_ms(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().ok()?;
    match unit.trim() {
        "ms" => Some(n),
        "s" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        _ => None,
    }
}

/// What one configuration file holds.
enum Read {
    /// A configuration table, and the file's text.
    Table(Box<Raw>, String),
    /// A manifest without a locklint table.
    Nothing,
    /// A manifest that cannot be read or is not valid TOML: it holds no configuration, and the
    /// reason becomes a note.
    Unusable(String),
}

/// Read the configuration table of a file. Only locklint's own configuration can be an error:
/// a `Cargo.toml` that cannot be read or parsed is [`Read::Unusable`].
fn read_raw(path: &Path) -> Result<Read, ConfigError> {
    let is_manifest = path.file_name().is_some_and(|n| n == "Cargo.toml");
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if is_manifest => {
            return Ok(Read::Unusable(format!(
                "not read for configuration: {}",
                crate::discover::describe_io(&e)
            )))
        }
        Err(e) => {
            return Err(ConfigError {
                path: path.to_path_buf(),
                text: String::new(),
                span: 0..0,
                message: crate::discover::describe_io(&e),
                help: None,
            })
        }
    };
    let raw = if is_manifest {
        // parsed without copying its strings: only whether it has a locklint table is read
        let table = match toml::de::DeTable::parse(&text) {
            Ok(t) => t,
            Err(e) => {
                let at = e
                    .span()
                    .map(|s| {
                        let idx = crate::source::LineIndex::new(&text);
                        let lc = idx.line_col(&text, s.start);
                        format!(" at {}:{}", lc.line, lc.column)
                    })
                    .unwrap_or_default();
                return Ok(Read::Unusable(format!(
                    "not valid TOML{at} ({})",
                    e.message().trim()
                )));
            }
        };
        fn sub<'t, 'i>(
            t: &'t toml::de::DeTable<'i>,
            key: &str,
        ) -> Option<&'t toml::de::DeTable<'i>> {
            t.get(key).and_then(|v| v.get_ref().as_table())
        }
        let has = |section: &str| {
            sub(table.get_ref(), section)
                .and_then(|v| sub(v, "metadata"))
                .is_some_and(|m| m.contains_key("locklint"))
        };
        if has("package") {
            toml::from_str::<InPackage>(&text)
                .map_err(|e| parse_error(path, &text, e))?
                .package
                .metadata
                .locklint
        } else if has("workspace") {
            toml::from_str::<InWorkspace>(&text)
                .map_err(|e| parse_error(path, &text, e))?
                .workspace
                .metadata
                .locklint
        } else {
            return Ok(Read::Nothing);
        }
    } else {
        toml::from_str(&text).map_err(|e| parse_error(path, &text, e))?
    };
    validate(path, &text, &raw)?;
    Ok(Read::Table(Box::new(raw), text))
}

/// A configuration file as found by discovery: its settings (with what it extends), nothing
/// (a manifest without a locklint table), or a manifest that cannot be used (why).
enum Found {
    Settings(Box<Settings>),
    Nothing,
    Unusable(String),
}

/// Load a configuration file named explicitly (`--config`), with what it extends: `None` for a
/// manifest without a locklint table; a manifest that cannot be parsed is an error here.
pub fn load(path: &Path) -> Result<Option<Settings>, ConfigError> {
    match find(path)? {
        Found::Settings(s) => Ok(Some(*s)),
        Found::Nothing => Ok(None),
        Found::Unusable(why) => Err(unusable(path, why)),
    }
}

fn unusable(path: &Path, why: String) -> ConfigError {
    ConfigError {
        path: path.to_path_buf(),
        text: String::new(),
        span: 0..0,
        message: why,
        help: None,
    }
}

fn find(path: &Path) -> Result<Found, ConfigError> {
    Ok(match read_raw(path)? {
        Read::Table(raw, text) => {
            let mut seen = Vec::new();
            Found::Settings(Box::new(chain(path, &raw, text, &mut seen)?.finish()))
        }
        Read::Nothing => Found::Nothing,
        Read::Unusable(why) => Found::Unusable(why),
    })
}

/// The settings of a configuration table over those of what it extends (matchers not built:
/// see [`Settings::finish`]). `seen`: the files of the chain so far; a file extending one of
/// them adds nothing more (a cycle), and the chain stops after 16 files.
fn chain(
    path: &Path,
    raw: &Raw,
    text: String,
    seen: &mut Vec<PathBuf>,
) -> Result<Settings, ConfigError> {
    let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    seen.push(path.canonicalize().unwrap_or_else(|_| path.to_path_buf()));
    let parent = raw.extend.as_ref().filter(|parent| {
        let p = dir.join(parent.get_ref());
        let p = p.canonicalize().unwrap_or(p);
        seen.len() <= 16 && !seen.contains(&p)
    });
    let mut settings = match parent {
        Some(parent) => {
            let p = dir.join(parent.get_ref());
            if !p.is_file() {
                return Err(ConfigError {
                    path: path.to_path_buf(),
                    text,
                    span: parent.span(),
                    message: format!(
                        "`extend` names `{}`, which does not exist",
                        parent.get_ref()
                    ),
                    help: None,
                });
            }
            // what `extend` names is part of the configuration: it must be usable
            match read_raw(&p)? {
                Read::Table(raw, text) => chain(&p, &raw, text, seen)?,
                Read::Nothing => Settings::default(),
                Read::Unusable(why) => return Err(unusable(&p, why)),
            }
        }
        _ => Settings::default(),
    };
    settings.apply(raw);
    settings.sources.insert(0, path.to_path_buf());
    settings.root = dir.canonicalize().unwrap_or(dir);
    Ok(settings)
}

/// Names of configuration files, in the order they are looked for in a directory.
const FILE_NAMES: [&str; 3] = ["locklint.toml", ".locklint.toml", "Cargo.toml"];

/// How configurations are found for files.
#[derive(Debug, Clone)]
pub enum Mode {
    /// The nearest configuration above each file.
    Discover,
    /// One file for everything (`--config`).
    Fixed(Arc<Settings>),
    /// No configuration (`--isolated`).
    Isolated,
}

/// The result of loading one configuration file, shared by every directory it governs.
type Loaded = Result<Option<Arc<Settings>>, Arc<ConfigError>>;
/// The settings that govern a directory.
pub(crate) type Governing = Result<Arc<Settings>, Arc<ConfigError>>;

/// Settings per directory. Each configuration file is read at most once, and only when a
/// directory it may govern is asked about: a file under an excluded or ignored directory is
/// never read.
pub struct Resolver {
    mode: Mode,
    dirs: Mutex<HashMap<PathBuf, Governing>>,
    /// The canonical form of each directory holding a file asked about, as the file names it.
    parents: Mutex<HashMap<PathBuf, PathBuf>>,
    files: Mutex<HashMap<PathBuf, Loaded>>,
    notes: Mutex<BTreeMap<PathBuf, String>>,
}

impl Resolver {
    pub fn new(mode: Mode) -> Self {
        Resolver {
            mode,
            dirs: Mutex::new(HashMap::new()),
            parents: Mutex::new(HashMap::new()),
            files: Mutex::new(HashMap::new()),
            notes: Mutex::new(BTreeMap::new()),
        }
    }

    /// The settings that apply to a file (or, for a directory, to the files directly in it).
    pub fn for_file(&self, path: &Path) -> Governing {
        match &self.mode {
            Mode::Isolated => Ok(Arc::new(Settings::default())),
            Mode::Fixed(s) => Ok(s.clone()),
            Mode::Discover => {
                // a regular file (not a link) is governed by its directory's settings: that
                // directory's canonical form is found once, not every component of every file
                match std::fs::symlink_metadata(path).map(|m| m.file_type()) {
                    Ok(t) if t.is_file() => {
                        if let Some(parent) = path.parent() {
                            return self.for_dir(&self.canonical_dir(parent));
                        }
                    }
                    Ok(t) if t.is_dir() => return self.for_dir(&self.canonical_dir(path)),
                    _ => {}
                }
                let abs = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
                let dir = if abs.is_dir() {
                    abs
                } else {
                    abs.parent().map(Path::to_path_buf).unwrap_or_default()
                };
                self.for_dir(&dir)
            }
        }
    }

    /// The settings of a regular file (not a link) that a walk of a directory found: those of
    /// its directory, without looking at the file again.
    pub fn for_walked(&self, path: &Path) -> Governing {
        match (&self.mode, path.parent()) {
            (Mode::Discover, Some(parent)) => self.for_dir(&self.canonical_dir(parent)),
            _ => self.for_file(path),
        }
    }

    /// The canonical form of the directory `dir` (as a file in it names it: `""` is the current
    /// directory), found once: a directory that is not a link, named by its parent and its
    /// name, is its parent's canonical form joined with its name.
    fn canonical_dir(&self, dir: &Path) -> PathBuf {
        if let Some(d) = self.parents.lock().ok().and_then(|m| m.get(dir).cloned()) {
            return d;
        }
        let named = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let last = dir.components().next_back();
        let canonical = match (dir.parent(), last) {
            (Some(parent), Some(std::path::Component::Normal(name)))
                if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_dir()) =>
            {
                self.canonical_dir(parent).join(name)
            }
            _ => named.canonicalize().unwrap_or_else(|_| dir.to_path_buf()),
        };
        if let Ok(mut m) = self.parents.lock() {
            m.insert(dir.to_path_buf(), canonical.clone());
        }
        canonical
    }

    /// The settings of the nearest configuration at or above `dir` (canonical).
    fn for_dir(&self, dir: &Path) -> Governing {
        if let Some(s) = self.dirs.lock().ok().and_then(|c| c.get(dir).cloned()) {
            return s;
        }
        let found = self.nearest(dir);
        if let Ok(mut c) = self.dirs.lock() {
            c.insert(dir.to_path_buf(), found.clone());
        }
        found
    }

    fn nearest(&self, dir: &Path) -> Governing {
        for d in dir.ancestors() {
            if let Some(cached) = self.dirs.lock().ok().and_then(|c| c.get(d).cloned()) {
                return cached;
            }
            for name in FILE_NAMES {
                let p = d.join(name);
                if p.is_file() {
                    if let Some(s) = self.file(&p)? {
                        return Ok(s);
                    }
                }
            }
        }
        Ok(Arc::new(Settings::default()))
    }

    /// One configuration file, loaded once.
    fn file(&self, path: &Path) -> Loaded {
        if let Some(l) = self.files.lock().ok().and_then(|c| c.get(path).cloned()) {
            return l;
        }
        let loaded = match find(path) {
            Ok(Found::Settings(s)) => Ok(Some(Arc::new(*s))),
            Ok(Found::Nothing) => Ok(None),
            Ok(Found::Unusable(why)) => {
                if let Ok(mut n) = self.notes.lock() {
                    n.insert(
                        path.to_path_buf(),
                        format!("{why}; no configuration is read from it"),
                    );
                }
                Ok(None)
            }
            Err(e) => Err(Arc::new(e)),
        };
        if let Ok(mut c) = self.files.lock() {
            c.insert(path.to_path_buf(), loaded.clone());
        }
        loaded
    }

    /// Manifests that were read for configuration but hold none because they cannot be
    /// parsed: `(path, why)`, once each.
    pub fn notes(&self) -> Vec<(PathBuf, String)> {
        self.notes
            .lock()
            .map(|n| n.iter().map(|(p, w)| (p.clone(), w.clone())).collect())
            .unwrap_or_default()
    }
}

/// `locklint config --show`: the effective settings, as TOML.
pub fn show(s: &Settings) -> String {
    let list = |v: &[String]| {
        format!(
            "[{}]",
            v.iter()
                .map(|x| format!("{x:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let mut out = String::new();
    if s.sources.is_empty() {
        out.push_str("# no configuration file applies; defaults\n");
    } else {
        for p in &s.sources {
            out.push_str(&format!("# from {}\n", p.display()));
        }
    }
    match &s.select {
        Some(sel) => out.push_str(&format!("select = {}\n", list(sel))),
        None => out.push_str("select = [\"all\"]\n"),
    }
    out.push_str(&format!("extend-select = {}\n", list(&s.extend_select)));
    out.push_str(&format!("ignore = {}\n", list(&s.ignore)));
    out.push_str(&format!("exclude = {}\n", list(&s.exclude)));
    out.push_str(&format!(
        "lock-key-patterns = {}\n",
        list(&s.lock_key_patterns)
    ));
    out.push_str(&format!("fence-columns = {}\n", list(&s.fence_columns)));
    out.push_str(&format!(
        "redis-version = {:?}\nredis-cluster = {}\ndefault-ttl = {:?}\nfail-on = {:?}\n",
        s.redis_version.as_deref().unwrap_or("7.0"),
        s.redis_cluster.unwrap_or(true),
        s.default_ttl.as_deref().unwrap_or("30s"),
        match s.fail_on {
            Some(Level::Error) => "error",
            _ => "warning",
        }
    ));
    let mut sev: Vec<_> = s.severity.iter().collect();
    sev.sort();
    if !sev.is_empty() {
        out.push_str("\n[severity]\n");
        for (k, v) in sev {
            out.push_str(&format!("{k} = \"{v}\"\n"));
        }
    }
    if !s.per_path_ignores.is_empty() {
        out.push_str("\n[per-path-ignores]\n");
        for (g, r) in &s.per_path_ignores {
            out.push_str(&format!("{g:?} = {}\n", list(r)));
        }
    }
    for (k, p) in &s.locks {
        out.push_str(&format!(
            "\n[locks.{k:?}]\npurpose = \"{}\"\n",
            match p {
                Purpose::Efficiency => "efficiency",
                Purpose::Correctness => "correctness",
            }
        ));
    }
    out
}
