//! The TUI in a real terminal: the built binary under tmux, driven with keys, read back with
//! `capture-pane`. Skips (passes with a message) where tmux is not installed, fails under CI.

use std::process::Command;
use std::time::{Duration, Instant};

struct Tmux {
    socket: String,
    session: String,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs")
    }
    fn capture(&self) -> String {
        String::from_utf8_lossy(
            &self
                .cmd(&["capture-pane", "-p", "-t", &self.session])
                .stdout,
        )
        .into_owned()
    }
    fn wait_for(&self, what: &str) -> String {
        let t = Instant::now();
        loop {
            let s = self.capture();
            if s.contains(what) {
                return s;
            }
            if t.elapsed() > Duration::from_secs(30) {
                panic!("waited 30 s for {what:?}; the pane shows:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    fn keys(&self, k: &str) {
        self.cmd(&["send-keys", "-t", &self.session, k]);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// `memscope ARGS FIXTURE` in a detached tmux session of `w`x30; afterwards the shell reports the
/// exit status and whether the terminal is back in canonical (cooked) mode.
fn start(tag: &str, args: &str, fixture: &str, w: u16) -> Option<Tmux> {
    start_sized(tag, args, fixture, w, 30)
}

/// `start` on a `w`x`h` terminal.
fn start_sized(tag: &str, args: &str, fixture: &str, w: u16, h: u16) -> Option<Tmux> {
    if Command::new("tmux").arg("-V").output().is_err() {
        assert!(
            !crate::shared::ci(),
            "no tmux, and CI runs the terminal test (.ci/run installs tmux)"
        );
        println!("SKIP: tmux is not installed (apt-get install -y tmux to run this test)");
        return None;
    }
    let bin = env!("CARGO_BIN_EXE_memscope");
    let fixture = format!("{}/fixtures/{fixture}", env!("CARGO_MANIFEST_DIR"));
    let id = std::process::id();
    let t = Tmux {
        socket: format!("memscope-test-{tag}-{id}"),
        session: format!("{tag}{id}"),
    };
    let script = format!("'{bin}' {args} '{fixture}'; echo \"memscope exited $?\"; stty -a | tr ' ' '\\n' | grep -x -- '-\\?icanon'; sleep 60");
    let out = t.cmd(&[
        "new-session",
        "-d",
        "-x",
        &w.to_string(),
        "-y",
        &h.to_string(),
        "-s",
        &t.session,
        "sh",
        "-c",
        &script,
    ]);
    assert!(
        out.status.success(),
        "tmux new-session: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(t)
}

/// `q`, then: exit status 0, raw mode off, the alternate screen gone.
fn quit_and_check_restored(t: &Tmux) {
    t.keys("q");
    t.wait_for("memscope exited");
    // `stty` prints `icanon` (cooked) or `-icanon` (still raw) on the next line.
    let s = t.wait_for("icanon");
    assert!(s.contains("memscope exited 0"), "{s}");
    assert!(
        s.lines().any(|l| l.trim() == "icanon"),
        "terminal left in raw mode:\n{s}"
    );
    assert!(
        !s.contains("VERDICT"),
        "the TUI's screen is still shown:\n{s}"
    );
}

#[test]
fn tui_in_tmux_opens_navigates_quits_and_restores_the_terminal() {
    // `memscope FILE` on a terminal opens the TUI.
    let Some(t) = start("snap", "", "fragmentation_oom.pickle", 100) else {
        return;
    };
    let s = t.wait_for("VERDICT");
    assert!(s.contains("OOM on cuda:0 requesting 512.0 MiB"), "{s}");
    assert!(
        s.contains("fragmentation_oom.pickle │ cuda:0 │ event 696/696"),
        "{s}"
    );
    t.keys("2");
    let s = t.wait_for("markers");
    assert!(s.contains("event 696/696"), "{s}");
    t.keys("g");
    t.wait_for("event 0/696");
    t.keys("p");
    t.wait_for("here: peak 1.5 GiB allocated");
    t.keys("3");
    t.wait_for("after event 347:");
    t.keys("?");
    t.wait_for("memscope TUI: a snapshot's keys");
    t.keys("Escape");
    quit_and_check_restored(&t);
}

#[test]
fn tui_in_tmux_opens_a_trace_and_drills_into_a_step() {
    let Some(t) = start("trace", "tui", "trace_total_loss.trace.json.gz", 120) else {
        return;
    };
    let s = t.wait_for("VERDICT");
    assert!(s.contains("autograd graph grows"), "{s}");
    assert!(s.contains("3 Steps  4 Graph"), "{s}");
    t.keys("3");
    t.wait_for("10 profiled steps on cuda:0");
    t.keys("Enter");
    let s = t.wait_for("top-level ops in the step");
    assert!(s.contains("ProfilerStep#2 on cuda:0"), "{s}");
    t.keys("4");
    t.wait_for("AUTOGRAD GRAPH");
    t.keys("Enter");
    t.wait_for("ProfilerStep#10 on cuda:0");
    quit_and_check_restored(&t);
}

/// No line of the pane has a letter or digit in its last column: a word there is a cut word.
fn assert_nothing_runs_into_the_edge(s: &str, w: usize) {
    for line in s.lines() {
        let cells: Vec<char> = line.chars().collect();
        if cells.len() >= w && !line.starts_with("  markers ") {
            assert!(
                !cells[w - 1].is_alphanumeric(),
                "a word runs into the edge: {line:?}\n{s}"
            );
        }
    }
}

#[test]
fn tui_in_tmux_at_80x24_visits_every_view_and_scrolls_an_explanation_to_its_fix() {
    let Some(t) = start_sized("small", "tui", "leak_oom.pickle", 80, 24) else {
        return;
    };
    let s = t.wait_for("VERDICT");
    assert_nothing_runs_into_the_edge(&s, 80);
    for (k, what) in [
        ("2", "markers"),
        ("3", "segments, reserved"),
        ("4", "blocks, 6 sites"),
        ("5", "LEAKS AND GROWTH"),
    ] {
        t.keys(k);
        let s = t.wait_for(what);
        assert_nothing_runs_into_the_edge(&s, 80);
    }
    // The leak's explanation is longer than the pane: its fix is below, reached with PgDn.
    let s = t.capture();
    assert!(
        !s.contains("fix: "),
        "the fix is not on the first page:\n{s}"
    );
    let mut s = s;
    for _ in 0..10 {
        if s.contains("fix: ") {
            break;
        }
        t.keys("PageDown");
        std::thread::sleep(Duration::from_millis(300));
        s = t.capture();
    }
    assert!(s.contains("fix: "), "PgDn never reached the fix:\n{s}");
    assert!(s.contains("allocation stack"), "{s}");
    assert_nothing_runs_into_the_edge(&s, 80);
    // The list still has its keys, and the text scrolls back with PgUp.
    for _ in 0..10 {
        t.keys("PageUp");
    }
    t.wait_for("growth from step 2 to step 24");
    quit_and_check_restored(&t);
}

/// Whether the tmux session is gone (its program ended and nothing is left in it).
fn ended(t: &Tmux) -> bool {
    let gone = Instant::now();
    while gone.elapsed() < Duration::from_secs(20) {
        if !t.cmd(&["has-session", "-t", &t.session]).status.success() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// `memscope tui TARGET` alone in a detached `w`x`h` session: the session ends when memscope
/// does, and memscope's exit status is written to `status`.
fn start_alone(tag: &str, target: &str, w: u16, h: u16, status: &std::path::Path) -> Option<Tmux> {
    if Command::new("tmux").arg("-V").output().is_err() {
        assert!(
            !crate::shared::ci(),
            "no tmux, and CI runs the terminal test (.ci/run installs tmux)"
        );
        println!("SKIP: tmux is not installed (apt-get install -y tmux to run this test)");
        return None;
    }
    let bin = env!("CARGO_BIN_EXE_memscope");
    let target = format!("{}/fixtures/{target}", env!("CARGO_MANIFEST_DIR"));
    let id = std::process::id();
    let t = Tmux {
        socket: format!("memscope-test-{tag}-{w}x{h}-{id}"),
        session: format!("{tag}{w}x{h}{id}"),
    };
    let script = format!("'{bin}' tui '{target}'; echo $? > '{}'", status.display());
    let (ws, hs) = (w.to_string(), h.to_string());
    let args = [
        "new-session",
        "-d",
        "-x",
        &ws,
        "-y",
        &hs,
        "-s",
        &t.session,
        "sh",
        "-c",
        &script,
    ];
    let out = t.cmd(&args);
    assert!(
        out.status.success(),
        "tmux: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(t)
}

/// The pane once `what` has left it.
fn wait_gone(t: &Tmux, what: &str) -> String {
    let start = Instant::now();
    loop {
        let s = t.capture();
        if !s.contains(what) {
            return s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what:?} stays:\n{s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Writes the pane to `MEMSCOPE_TUI_DUMP` (the closing note's pictures).
fn dump_pane(name: &str, s: &str) {
    if let Ok(dir) = std::env::var("MEMSCOPE_TUI_DUMP") {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            std::path::Path::new(&dir).join(format!("tmux-{name}.txt")),
            s,
        )
        .unwrap();
    }
}

const SIZES: [(u16, u16); 3] = [(40, 12), (80, 24), (120, 40)];

/// The real binary in tmux at 40x12, 80x24 and 120x40 (issue 42): a snapshot opens on its
/// verdict with every tab's number in the tab bar; Tab, a number, Enter (the leak's evidence on
/// the timeline) and Esc (back to the leak) switch views; `?` opens the help and Esc closes
/// it; q ends memscope with status 0, and with it the session. No word runs into the screen's
/// edge at 80 columns and more.
#[test]
fn tui_in_tmux_at_three_sizes_switches_tabs_goes_back_and_quits() {
    for (w, h) in SIZES {
        let status = crate::bounded_inputs::tmpdir(&format!("tmux-sizes-{w}")).join("status");
        let Some(t) = start_alone("sizes", "leak_oom.pickle", w, h, &status) else {
            return;
        };
        let s = t.wait_for("VERDICT");
        dump_pane(&format!("leak_oom-overview-{w}x{h}"), &s);
        let tabs = s.lines().next().unwrap_or("");
        for n in 1..=5 {
            assert!(
                tabs.contains(&format!(" {n} ")),
                "{w}x{h}: tab {n}: {tabs:?}"
            );
        }
        assert!(s.contains("OOM on cuda:0"), "{w}x{h}: the verdict:\n{s}");
        if w >= 80 {
            assert_nothing_runs_into_the_edge(&s, w as usize);
        }
        t.keys("Tab");
        let s = wait_gone(&t, "VERDICT");
        assert!(s.contains("event 3666/3666"), "{w}x{h}: Tab:\n{s}");
        t.keys("5");
        let s = t.wait_for("LEAKS");
        dump_pane(&format!("leak_oom-leaks-{w}x{h}"), &s);
        t.keys("Enter");
        let s = t.wait_for("markers");
        dump_pane(&format!("leak_oom-leaks-enter-{w}x{h}"), &s);
        t.keys("Escape");
        t.wait_for("LEAKS");
        t.keys("?");
        let s = t.wait_for("memscope TUI");
        dump_pane(&format!("leak_oom-help-{w}x{h}"), &s);
        t.keys("Escape");
        t.wait_for("LEAKS");
        t.keys("q");
        assert!(
            ended(&t),
            "{w}x{h}: q did not end the session:\n{}",
            t.capture()
        );
        let rc = std::fs::read_to_string(&status).unwrap_or_default();
        assert_eq!(rc.trim(), "0", "{w}x{h}: memscope's exit status");
    }
}

/// A job's Ranks view in tmux at the three sizes: its verdict and the rank table are on the
/// screen; Esc does nothing there; Enter opens rank 0's capture, whose status line says q goes
/// back; q comes back to the ranks, and q there ends memscope (status 0) and the session.
#[test]
fn the_ranks_view_in_tmux_at_three_sizes() {
    for (w, h) in SIZES {
        let status = crate::bounded_inputs::tmpdir(&format!("tmux-ranks-{w}")).join("status");
        let Some(t) = start_alone("ranks", "ranks/bridge", w, h, &status) else {
            return;
        };
        let s = t.wait_for("RANKS");
        dump_pane(&format!("ranks-{w}x{h}"), &s);
        assert!(s.contains("VERDICT rank 2"), "{w}x{h}:\n{s}");
        if w >= 80 {
            assert!(
                s.contains("q here quits)"),
                "{w}x{h}: the hint is cut:\n{s}"
            );
            assert!(s.contains("2.56x the lowest (rank 0)"), "{w}x{h}:\n{s}");
            assert_nothing_runs_into_the_edge(&s, w as usize);
        }
        t.keys("Escape");
        std::thread::sleep(Duration::from_millis(300));
        assert!(t.capture().contains("RANKS"), "{w}x{h}: Esc left the ranks");
        t.keys("Enter");
        let s = t.wait_for(" 1 Over");
        assert!(
            s.contains("VERDICT") && !s.contains("RANKS"),
            "{w}x{h}:\n{s}"
        );
        dump_pane(&format!("ranks-rank0-{w}x{h}"), &s);
        if w >= 80 {
            assert!(s.contains("q:ranks list"), "{w}x{h}: the status line:\n{s}");
        }
        t.keys("q");
        t.wait_for("RANKS");
        t.keys("q");
        assert!(
            ended(&t),
            "{w}x{h}: q did not end the session:\n{}",
            t.capture()
        );
        let rc = std::fs::read_to_string(&status).unwrap_or_default();
        assert_eq!(rc.trim(), "0", "{w}x{h}: memscope's exit status");
    }
}
