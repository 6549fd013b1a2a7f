//! Times the frame-cut planner of a parallel snapshot decode (`memscope::load::framecut`,
//! issue 43) on a file: `cargo run --release --example framecut -- FILE [PIECES] [THREADS]`.
//! Prints the hand-off point, the frame chain, the plan and the seconds each step took;
//! `--check` also compares the plan's memo bases with the decoder's (a serial decode).

use std::time::Instant;

use memscope::load::{framecut, pickle};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let check = args.iter().any(|a| a == "--check");
    args.retain(|a| a != "--check");
    let path = args
        .first()
        .expect("usage: framecut FILE [PIECES] [THREADS] [--check]");
    let threads = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(memscope::threads::wanted);
    let pieces = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(4 * threads);
    let data = std::fs::read(path).expect("read");
    let mb = data.len() as f64 / 1e6;
    let t = Instant::now();
    let frames = framecut::chain(&data);
    let t_chain = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let h = pickle::handoff(&data)
        .expect("decodes")
        .expect("has a trace batch to cut");
    let t_handoff = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let cut = framecut::plan(&data, &h, pieces, threads);
    let t_plan = t.elapsed().as_secs_f64();
    println!(
        "{path}: {mb:.1} MB, {} frames (chain {:.4} s); hand-off at byte {} (memo {}, {} items; {:.3} s)",
        frames.len(),
        t_chain,
        h.pos,
        h.memo_len,
        h.items,
        t_handoff
    );
    let cut = match cut {
        Ok(c) => c,
        Err(e) => {
            println!("plan: {e} after {t_plan:.3} s");
            return;
        }
    };
    let entries: u64 = cut.pieces.iter().map(|p| p.entries).sum();
    let strings: usize = cut.pieces.iter().map(|p| p.strings.len()).sum();
    println!(
        "plan: {} pieces on {threads} threads in {t_plan:.3} s ({:.2} ms/MB): {entries} entries, \
         {strings} memoized strings, list ends in the last piece: {}",
        cut.pieces.len(),
        t_plan * 1e3 / mb,
        cut.pieces.last().is_some_and(|p| p.last)
    );
    if check {
        let at: Vec<usize> = cut.pieces.iter().map(|p| p.start).collect();
        let lens = pickle::memo_lengths_at(&data, &at).expect("decodes");
        let same = lens.iter().zip(&cut.bases).all(|(l, b)| *l == Some(*b));
        println!("memo bases equal the decoder's: {same}");
    }
}
