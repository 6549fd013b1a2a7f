//! The files a command is given (`check`, `baseline`, `diff`): a snapshot, a profiler trace
//! or a `memscope.baseline/1` file, told apart by content, loaded, analysed and summarised.
//!
//! This is the driver between the layers: it calls `load` and `analysis`, then turns each
//! analysis into the gate's [`InputSummary`]. The gate itself (`check`) stays a pure function of
//! summaries and never reads a file.

use std::path::{Path, PathBuf};

use crate::analysis::Analysis;
use crate::check::summary::{BaselineError, RankInfo, RankSource};
use crate::check::{summarize, Baseline, InputSummary, BASELINE_SCHEMA};
use crate::load::LoadError;

/// What a file given to `check`, `baseline` or `diff` turned out to be.
pub enum Loaded {
    Analysis(Box<Analysis>),
    Baseline(Baseline),
    /// A profiler trace, summarized (with its `distributedInfo` rank, where it has one).
    Trace(Box<InputSummary>),
}

/// An error loading an input, phrased for the user: each names the file.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// Not readable, or not a capture that loads.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A memscope document (a report, a check) where a capture was expected.
    #[error("{path}: this is a memscope JSON document, not a capture")]
    NotACapture { path: PathBuf },
    #[error("{path}: not UTF-8")]
    NotUtf8 { path: PathBuf },
    /// A summary file that is not a usable `memscope.baseline/1` document. The inner error is
    /// part of the message (not `#[source]`), so a chain printer shows it once.
    #[error("{path}: {err}")]
    Baseline { path: PathBuf, err: BaselineError },
}

/// Loads a capture (snapshot or profiler trace, by content) and analyses it, or reads a
/// `memscope.baseline/1` file when `allow_baseline`.
pub fn load(path: &Path, allow_baseline: bool) -> Result<Loaded, InputError> {
    let bytes = crate::load::read_input(path)?;
    let json = crate::load::sniff(&bytes) == crate::load::Sniffed::Json;
    if json {
        let head = String::from_utf8_lossy(&bytes[..bytes.len().min(256)]);
        if crate::job::lines::is_rank_lines(&head) {
            if !allow_baseline {
                return Err(InputError::NotACapture {
                    path: path.to_owned(),
                });
            }
            return crate::job::lines::read(&bytes)
                .map(|v| Loaded::Baseline(Baseline::new(v)))
                .map_err(|err| InputError::Baseline {
                    path: path.to_owned(),
                    err,
                });
        }
        if head.contains(BASELINE_SCHEMA) || head.contains("\"memscope.") || is_envelope(&head) {
            if !allow_baseline {
                return Err(InputError::NotACapture {
                    path: path.to_owned(),
                });
            }
            let text = std::str::from_utf8(&bytes).map_err(|_| InputError::NotUtf8 {
                path: path.to_owned(),
            })?;
            return Baseline::from_json(text)
                .map(Loaded::Baseline)
                .map_err(|err| InputError::Baseline {
                    path: path.to_owned(),
                    err,
                });
        }
    }
    // A trace's rank is read from its raw text, before the bytes go.
    let rank = json.then(|| distributed_info(&bytes)).flatten();
    let opened = crate::load::open_read(path, &bytes)?;
    drop(bytes);
    Ok(match crate::analysis::analyze(opened, path) {
        crate::analysis::Product::Trace(p) => {
            let mut s = summarize(&p.analyzed.analysis);
            s.rank = rank;
            Loaded::Trace(Box::new(s))
        }
        p => Loaded::Analysis(Box::new(p.into_report())),
    })
}

/// Whether a JSON text's head is a `memscope/1` envelope (`"envelope": "memscope/1"`, with any
/// spacing): memscope's own output, never a capture.
/// Whether JSON bytes are one of memscope's own documents (a report, a check, a baseline,
/// rank lines) rather than a capture.
pub fn is_memscope_document(bytes: &[u8]) -> bool {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(256)]);
    crate::job::lines::is_rank_lines(&head)
        || head.contains(BASELINE_SCHEMA)
        || head.contains("\"memscope.")
        || is_envelope(&head)
}

fn is_envelope(head: &str) -> bool {
    head.match_indices("\"envelope\"").any(|(i, k)| {
        let rest = head[i + k.len()..].trim_start();
        rest.strip_prefix(':')
            .is_some_and(|r| r.trim_start().starts_with("\"memscope/"))
    })
}

/// The trace's `distributedInfo` (`{"backend": "nccl", "rank": 0, "world_size": 128}`, which
/// Kineto writes at the top level of a distributed run's trace), read from the raw text.
pub fn distributed_info(bytes: &[u8]) -> Option<RankInfo> {
    const KEY: &[u8] = b"\"distributedInfo\"";
    let at = bytes.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let open = at + bytes[at..].iter().position(|&b| b == b'{')?;
    // The matching brace (`pg_config` nests objects), outside strings; bounded so that a
    // hostile file costs little.
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    let mut end = None;
    for (i, &b) in bytes[open..].iter().enumerate().take(1 << 20) {
        match (in_str, esc, b) {
            (true, true, _) => esc = false,
            (true, false, b'\\') => esc = true,
            (true, false, b'"') => in_str = false,
            (true, false, _) => {}
            (false, _, b'"') => in_str = true,
            (false, _, b'{') => depth += 1,
            (false, _, b'}') => {
                depth -= 1;
                if depth == 0 {
                    end = Some(open + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let v: serde_json::Value = serde_json::from_slice(&bytes[open..=end?]).ok()?;
    let num = |k: &str| v.get(k)?.as_u64().and_then(|n| u32::try_from(n).ok());
    Some(RankInfo {
        rank: num("rank")?,
        world_size: num("world_size"),
        source: RankSource::DistributedInfo,
    })
}

/// Loads inputs and summarizes them; a baseline file given as input contributes its entries.
pub fn load_summaries(
    paths: &[impl AsRef<Path> + Sync],
    allow_baseline: bool,
) -> Result<Vec<InputSummary>, InputError> {
    load_summaries_with_progress(paths, allow_baseline, &|_| {})
}

/// [`load_summaries`] on every core: one rank's trace per worker, results in the order given.
/// `progress` is called with the number of files done after each one (from the workers).
pub fn load_summaries_with_progress(
    paths: &[impl AsRef<Path> + Sync],
    allow_baseline: bool,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<Vec<InputSummary>, InputError> {
    Ok(load_summaries_per_file(paths, allow_baseline, progress)?
        .into_iter()
        .flatten()
        .collect())
}

/// [`load_summaries_with_progress`], one list per file (a summary file holds several).
pub fn load_summaries_per_file(
    paths: &[impl AsRef<Path> + Sync],
    allow_baseline: bool,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<Vec<Vec<InputSummary>>, InputError> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let one = |p: &Path| -> Result<Vec<InputSummary>, InputError> {
        Ok(match load(p, allow_baseline)? {
            Loaded::Analysis(a) => {
                let mut s = summarize(&a);
                s.path = p.display().to_string();
                vec![s]
            }
            Loaded::Baseline(b) => b.inputs,
            Loaded::Trace(mut s) => {
                s.path = p.display().to_string();
                vec![*s]
            }
        })
    };
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(paths.len())
        .max(1);
    type Slot = Option<Result<Vec<InputSummary>, InputError>>;
    let results: Mutex<Vec<Slot>> = Mutex::new((0..paths.len()).map(|_| None).collect());
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(p) = paths.get(i) else { break };
        // One file per core already: keep each file's parsing on its own thread.
        let r = if workers > 1 {
            crate::load::chrome::single_threaded(|| one(p.as_ref()))
        } else {
            one(p.as_ref())
        };
        results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
        progress(done.fetch_add(1, Ordering::Relaxed) + 1);
    };
    // The calling thread is one of the workers, so every file is read even where no other
    // thread can start.
    std::thread::scope(|scope| {
        for _ in 1..workers {
            let _ = std::thread::Builder::new().spawn_scoped(scope, work);
        }
        work();
    });
    let mut out = Vec::new();
    for r in results.into_inner().unwrap_or_else(|e| e.into_inner()) {
        out.push(r.expect("every index was taken by a worker")?);
    }
    Ok(out)
}
