//! A site's identity across ranks and hosts: `site_id`.
//!
//! The ranks of a job run the same code from different checkouts and environments
//! (`/home/alice/proj/train.py` on one host, `/scratch/job17/proj/train.py` on another;
//! `/opt/conda/lib/python3.11/site-packages/torch/...` against a virtualenv's). A site's
//! identity therefore leaves out what differs between hosts: its file is taken relative to the
//! place that holds it ([`relative_path`]):
//!
//! 1. after the last `site-packages/` or `dist-packages/` (installed code: `torch/nn/modules/linear.py`);
//! 2. else after the last `/lib/pythonX.Y/` (the standard library: `threading.py`);
//! 3. else, under a repository root given to `summarize --repo-root` (as the capturing host
//!    spelled it: `/home/alice/proj`), the path below it (`model/train.py`): the same on every
//!    host whose checkout is given as its root, and two user files of one name in two
//!    directories stay apart;
//! 4. else the file's name alone (the user's code: `train.py`), which is also what `memscope diff`
//!    and the job view pair sites by across checkouts. Two user files of one name in two
//!    directories then share an identity; the function and line keep them apart in practice.
//!
//! `site_id` is the FNV-1a 64-bit hash of `relative_path + "\0" + function + "\0" + line`
//! (the line in decimal), written as 16 lowercase hex digits: any engine can recompute it,
//! and it does not change between memscope versions (the schema version would).

/// The file as the identity takes it, with no repository root (see the module's docs).
pub fn relative_path(file: &str) -> &str {
    relative_path_in(file, &[])
}

/// The file as the identity takes it, `roots` the repositories' roots (rule 3: the longest
/// root that holds the file wins; a root is a prefix of the recorded path, ending at a
/// separator, never resolved on this machine).
pub fn relative_path_in<'a>(file: &'a str, roots: &[String]) -> &'a str {
    let norm_at = |marker: &str| -> Option<usize> {
        // Either separator: captures from Windows hosts use `\`.
        let a = file.rfind(&format!("/{marker}/"));
        let b = file.rfind(&format!("\\{marker}\\"));
        a.max(b).map(|i| i + marker.len() + 2)
    };
    if let Some(i) = norm_at("site-packages").max(norm_at("dist-packages")) {
        return &file[i..];
    }
    if let Some(i) = file.rfind("/lib/python") {
        let rest = &file[i + "/lib/python".len()..];
        if rest.starts_with(|c: char| c.is_ascii_digit()) {
            if let Some(j) = rest.find('/') {
                return &rest[j + 1..];
            }
        }
    }
    if let Some(rest) = roots
        .iter()
        .filter_map(|r| below(file, r))
        .min_by_key(|rest| rest.len())
    {
        return rest;
    }
    file.rsplit(['/', '\\']).next().unwrap_or(file)
}

/// What follows `root` and a separator in `file`, if anything does.
fn below<'a>(file: &'a str, root: &str) -> Option<&'a str> {
    let root = root.trim_end_matches(['/', '\\']);
    if root.is_empty() {
        return None;
    }
    let rest = file.strip_prefix(root)?;
    let rest = rest.strip_prefix(['/', '\\'])?;
    (!rest.is_empty()).then_some(rest)
}

/// FNV-1a, 64 bits.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            h ^= 0;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        for &b in *p {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// The site's identity, with no repository root: 16 hex digits.
pub fn site_id(file: &str, function: &str, line: u32) -> String {
    site_id_in(file, function, line, &[])
}

/// The site's identity, `roots` the repositories' roots: 16 hex digits.
pub fn site_id_in(file: &str, function: &str, line: u32, roots: &[String]) -> String {
    let line = line.to_string();
    let h = fnv1a(&[
        relative_path_in(file, roots).as_bytes(),
        function.as_bytes(),
        line.as_bytes(),
    ]);
    format!("{h:016x}")
}

/// A short name for a path's hash (the file name of a rank-less capture's rows).
pub fn path_hash(path: &str) -> String {
    format!("{:016x}", fnv1a(&[path.as_bytes()]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_relative_path_leaves_out_the_host() {
        let a = "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/linear.py";
        let b = "/home/u/.venv/lib/python3.12/site-packages/torch/nn/modules/linear.py";
        assert_eq!(relative_path(a), "torch/nn/modules/linear.py");
        assert_eq!(site_id(a, "forward", 125), site_id(b, "forward", 125));
        assert_ne!(site_id(a, "forward", 125), site_id(a, "forward", 126));
        assert_eq!(
            relative_path("/usr/lib/python3.10/threading.py"),
            "threading.py"
        );
        assert_eq!(relative_path("/home/alice/proj/train.py"), "train.py");
        assert_eq!(
            site_id("/home/alice/proj/train.py", "main", 7),
            site_id("/scratch/j17/proj/train.py", "main", 7)
        );
        assert_eq!(relative_path(r"C:\py\Lib\site-packages\x\y.py"), r"x\y.py");
    }

    #[test]
    fn a_repository_root_keeps_the_path_below_it() {
        let roots = |r: &[&str]| r.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let a = roots(&["/home/alice/proj/"]);
        let b = roots(&["/scratch/j17/proj"]);
        assert_eq!(
            relative_path_in("/home/alice/proj/model/train.py", &a),
            "model/train.py"
        );
        assert_eq!(
            site_id_in("/home/alice/proj/model/train.py", "main", 7, &a),
            site_id_in("/scratch/j17/proj/model/train.py", "main", 7, &b)
        );
        // Two files of one name in two directories: one identity without the root, two with it.
        let (x, y) = ("/home/alice/proj/a/train.py", "/home/alice/proj/b/train.py");
        assert_eq!(site_id(x, "main", 7), site_id(y, "main", 7));
        assert_ne!(site_id_in(x, "main", 7, &a), site_id_in(y, "main", 7, &a));
        // A root is a whole directory, not a prefix of a name; installed code keeps rule 1.
        assert_eq!(relative_path_in("/home/alice/project/t.py", &a), "t.py");
        let venv = "/home/alice/proj/.venv/lib/python3.11/site-packages/torch/nn/functional.py";
        assert_eq!(relative_path_in(venv, &a), "torch/nn/functional.py");
        // The longest root that holds the file wins.
        let both = roots(&["/home/alice", "/home/alice/proj"]);
        assert_eq!(relative_path_in("/home/alice/proj/t.py", &both), "t.py");
        assert_eq!(
            relative_path_in("/home/alice/other/t.py", &both),
            "other/t.py"
        );
        assert_eq!(
            relative_path_in(r"C:\src\proj\m\t.py", &roots(&[r"C:\src\proj"])),
            r"m\t.py"
        );
    }

    #[test]
    fn the_hash_is_the_documented_fnv1a() {
        // FNV-1a of "train.py\0main\07", as any engine recomputes it.
        let mut h: u64 = 0xcbf29ce484222325;
        for b in b"train.py\0main\x007" {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x100000001b3);
        }
        assert_eq!(site_id("/x/train.py", "main", 7), format!("{h:016x}"));
    }
}
