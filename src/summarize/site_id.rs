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
//! 3. else the file's name alone (the user's code: `train.py`), which is also what `memscope diff`
//!    and the job view pair sites by across checkouts. Two user files of one name in two
//!    directories then share an identity; the function and line keep them apart in practice.
//!
//! `site_id` is the FNV-1a 64-bit hash of `relative_path + "\0" + function + "\0" + line`
//! (the line in decimal), written as 16 lowercase hex digits: any engine can recompute it,
//! and it does not change between memscope versions (the schema version would).

/// The file as the identity takes it (see the module's docs).
pub fn relative_path(file: &str) -> &str {
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
    file.rsplit(['/', '\\']).next().unwrap_or(file)
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

/// The site's identity: 16 hex digits.
pub fn site_id(file: &str, function: &str, line: u32) -> String {
    let line = line.to_string();
    let h = fnv1a(&[
        relative_path(file).as_bytes(),
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
