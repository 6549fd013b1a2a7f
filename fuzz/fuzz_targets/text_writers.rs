//! The output boundary (`memscope::report::escape`): any bytes through the terminal writer, in
//! any chunking, with and without colour, and any string through the Markdown, GitHub, XML and
//! HTML rules keep each destination's invariant: nothing raw that commands a terminal, no line
//! that starts a workflow command, nothing that renders in Markdown.
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;
use memscope::report::escape::{self, is_unsafe, TermWriter};

fn no_command_line(s: &str) {
    for line in s.split('\n') {
        let t = line.trim_start_matches([' ', '\t']);
        assert!(!t.starts_with("::") && !line.contains("##["), "{s:?}");
    }
}

fuzz_target!(|data: &[u8]| {
    let (cut, bytes) = match data.split_first() {
        Some((c, rest)) => (*c as usize + 1, rest),
        None => return,
    };
    for sgr in [false, true] {
        let mut w = TermWriter::new(Vec::new(), sgr);
        for chunk in bytes.chunks(cut) {
            w.write_all(chunk).unwrap();
        }
        w.flush().unwrap();
        let t = String::from_utf8(w.into_inner()).expect("the writer writes UTF-8");
        for (i, c) in t.char_indices() {
            if c == '\x1b' {
                let rest = &t[i + 1..];
                let end = rest.find('m').expect("only SGR");
                assert!(sgr && rest.starts_with('['));
                assert!(rest[1..end].bytes().all(|b| b.is_ascii_digit() || b == b';'));
            } else {
                assert!(c == '\n' || c == '\t' || !is_unsafe(c), "{t:?}");
            }
        }
        no_command_line(&t);
    }
    let s = String::from_utf8_lossy(bytes);
    let one = escape::one_line(&s);
    assert!(!one.contains(['\n', '\r', '\u{2028}', '\u{2029}', '\u{85}']));
    let m = escape::md_text(&s);
    assert!(!m.contains(['<', '>', '\n']));
    let c = escape::md_code(&s);
    assert!(!c.contains(['\n', '\x1b']));
    assert!(!escape::gh_data(&s).contains(['\n', '\r', '\x1b']));
    assert!(!escape::xml(&s).contains(['<', '>', '\n']));
    assert!(!escape::html(&s).contains(['<', '>', '"']));
});
