//! Where a recorded source path lies in the checkout, so that annotations land on the pull
//! request's files.
//!
//! Captures record the paths of the machine that ran the program (`/home/user/proj/model.py`,
//! `/opt/conda/lib/python3.11/site-packages/torch/nn/modules/linear.py`). An annotation is
//! useful only on a file of the repository, by its path from the repository root. A
//! [`PathMap`] maps a recorded path by, in order: a `--strip-prefix` that it starts with;
//! else the longest suffix of its components that exists under the source root
//! (`--source-root`, else `$GITHUB_WORKSPACE`, else the current directory). Library files
//! (site-packages, the Python standard library, `<frozen …>`) are never annotated.

use std::path::{Component, Path, PathBuf};

/// Where a recorded path goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The path from the repository root.
    File(String),
    /// A library file: never annotated.
    Library,
    /// Not found in the checkout: annotated without a file, the recorded path in the text.
    NotFound,
}

/// Maps recorded paths to the checkout.
#[derive(Clone, Debug, Default)]
pub struct PathMap {
    /// The checkout's root to look in (`None`: paths are taken as recorded).
    pub root: Option<PathBuf>,
    /// The repository root the output paths are relative to (where `root` lies under it).
    pub repo: Option<PathBuf>,
    /// Prefixes to cut off recorded paths (the GPU machine's checkout, say).
    pub strip_prefix: Vec<String>,
}

/// Whether a recorded path is a library's (or the interpreter's) rather than the user's.
pub fn is_library(path: &str) -> bool {
    let p = path.replace('\\', "/");
    p.starts_with('<')
        || [
            "/site-packages/",
            "/dist-packages/",
            "/lib/python2",
            "/lib/python3",
            "/lib64/python3",
        ]
        .iter()
        .any(|m| p.contains(m))
}

fn normal_components(p: &str) -> Vec<String> {
    Path::new(&p.replace('\\', "/"))
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect()
}

impl PathMap {
    /// The map `check` uses: `--source-root` (else `$GITHUB_WORKSPACE`, else the current
    /// directory) and the `--strip-prefix`es.
    pub fn from_env(source_root: Option<PathBuf>, strip_prefix: Vec<String>) -> PathMap {
        let workspace = std::env::var_os("GITHUB_WORKSPACE")
            .filter(|w| !w.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::current_dir().ok());
        PathMap {
            root: source_root.or_else(|| workspace.clone()),
            repo: workspace,
            strip_prefix,
        }
    }

    /// `rel` under the root, written from the repository root.
    fn repo_relative(&self, rel: &str) -> String {
        let (Some(root), Some(repo)) = (&self.root, &self.repo) else {
            return rel.to_owned();
        };
        let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        match abs(root).strip_prefix(abs(repo)) {
            Ok(sub) if !sub.as_os_str().is_empty() => {
                format!("{}/{rel}", sub.to_string_lossy().replace('\\', "/"))
            }
            _ => rel.to_owned(),
        }
    }

    /// Where `recorded` lies in the checkout.
    pub fn target(&self, recorded: &str) -> Target {
        if is_library(recorded) {
            return Target::Library;
        }
        let Some(root) = &self.root else {
            return Target::File(recorded.to_owned());
        };
        for p in &self.strip_prefix {
            if let Some(rest) = recorded.strip_prefix(p.as_str()) {
                let rel = normal_components(rest).join("/");
                if !rel.is_empty() && root.join(&rel).is_file() {
                    return Target::File(self.repo_relative(&rel));
                }
            }
        }
        let parts = normal_components(recorded);
        // The longest suffix that exists: `/home/u/proj/src/m.py` -> `src/m.py` in a checkout
        // that has `src/m.py`.
        for k in (1..=parts.len()).rev() {
            let rel = parts[parts.len() - k..].join("/");
            if root.join(&rel).is_file() {
                return Target::File(self.repo_relative(&rel));
            }
        }
        Target::NotFound
    }
}

/// The path an input is stored under in a committed baseline: relative to the repository
/// root (the nearest folder above the current one holding `.git`) when the input lies in it,
/// else its file name, so a baseline never records one machine's absolute paths.
pub fn for_baseline(input: &str) -> String {
    let name = || {
        Path::new(input)
            .file_name()
            .map_or_else(|| input.to_owned(), |n| n.to_string_lossy().into_owned())
    };
    let Ok(abs) = std::fs::canonicalize(input) else {
        return name();
    };
    let Some(repo) = std::env::current_dir().ok().and_then(|d| {
        d.ancestors()
            .find(|a| a.join(".git").exists())
            .map(Path::to_path_buf)
    }) else {
        return name();
    };
    let repo = std::fs::canonicalize(&repo).unwrap_or(repo);
    match abs.strip_prefix(&repo) {
        Ok(rel) => rel.to_string_lossy().replace('\\', "/"),
        Err(_) => name(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_paths() {
        assert!(is_library(
            "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/linear.py"
        ));
        assert!(is_library("/usr/lib/python3.12/threading.py"));
        assert!(is_library("<frozen runpy>"));
        assert!(!is_library("/home/user/proj/train.py"));
        assert!(!is_library("fixtures/generate.py"));
    }

    #[test]
    fn library_files_are_never_mapped() {
        let m = PathMap {
            root: Some(std::env::temp_dir()),
            repo: None,
            strip_prefix: Vec::new(),
        };
        assert_eq!(
            m.target("/usr/lib/python3/dist-packages/torch/nn/functional.py"),
            Target::Library
        );
        assert_eq!(
            m.target("/nowhere/memscope-no-such-file.py"),
            Target::NotFound
        );
    }
}
