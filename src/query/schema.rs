//! The tables `memscope query` offers: one list, the single source of truth from which the
//! database is declared, `.schema` prints and docs/query.md's reference is generated (a test
//! checks the document against [`markdown`]).
//!
//! Conventions every table follows: sizes in bytes, times in microseconds, and a site (the
//! line of user code a stack is blamed on, as `analyze` blames it) as three columns `file`,
//! `line`, `function`, with `site_id` into `sites` and `stack_id` into `frames`.

/// A column's SQLite type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    Int,
    Real,
    Text,
}

impl Ty {
    pub fn sql(self) -> &'static str {
        match self {
            Ty::Int => "INTEGER",
            Ty::Real => "REAL",
            Ty::Text => "TEXT",
        }
    }
}

/// Which capture a table describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum For {
    Snapshot,
    Trace,
    Both,
}

impl For {
    pub fn covers(self, trace: bool) -> bool {
        match self {
            For::Both => true,
            For::Snapshot => !trace,
            For::Trace => trace,
        }
    }
}

/// How the table is held: copied into SQLite, or read in place (a virtual table over
/// memscope's own vectors, for the tables with one row per event or frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    Copied,
    Virtual,
}

#[derive(Clone, Copy)]
pub struct Column {
    pub name: &'static str,
    pub ty: Ty,
    pub doc: &'static str,
}

pub struct Table {
    pub name: &'static str,
    pub covers: For,
    pub storage: Storage,
    pub doc: &'static str,
    pub columns: &'static [Column],
}

impl Table {
    /// `CREATE TABLE name(col TYPE, ...)`.
    pub fn create_sql(&self, name: &str) -> String {
        let cols: Vec<String> = self
            .columns
            .iter()
            .map(|c| format!("{} {}", c.name, c.ty.sql()))
            .collect();
        format!("CREATE TABLE {name}({})", cols.join(", "))
    }
}

const fn c(name: &'static str, ty: Ty, doc: &'static str) -> Column {
    Column { name, ty, doc }
}

use Ty::{Int, Real, Text};

macro_rules! site {
    () => {
        [
            c(
                "stack_id",
                Int,
                "The stack (`frames.stack_id`); 0 is the empty stack.",
            ),
            c(
                "site_id",
                Int,
                "The site (`sites.site_id`); NULL when the stack has no Python frame.",
            ),
            c(
                "file",
                Text,
                "Site: file of the user's frame (else the innermost Python frame).",
            ),
            c("line", Int, "Site: line."),
            c("function", Text, "Site: function."),
        ]
    };
}

macro_rules! cols {
    ([$($a:expr),* $(,)?] + site) => {{
        const S: [Column; 5] = site!();
        &[$($a,)* S[0], S[1], S[2], S[3], S[4]]
    }};
    ([$($a:expr),* $(,)?]) => { &[$($a),*] };
}

/// Every table, snapshot tables first.
pub static TABLES: &[Table] = &[
    Table {
        name: "devices",
        covers: For::Both,
        storage: Storage::Copied,
        doc: "One row per device: the figures `analyze` reports.",
        columns: cols!([
            c("device", Int, "CUDA device index (`cuda:N`)."),
            c("events", Int, "Events in its log (snapshot) or `[memory]` events (trace)."),
            c("allocated_bytes", Int, "Allocated at the end (NULL where unknown)."),
            c("reserved_bytes", Int, "Reserved at the end (NULL where unknown)."),
            c("peak_allocated_bytes", Int, "Allocated peak (NULL where history is missing)."),
            c("observed_peak_allocated_bytes", Int, "Highest allocated seen in the log."),
            c("peak_reserved_bytes", Int, "Reserved peak (NULL where unknown)."),
            c("peak_event", Int, "Event index of the allocated peak (`events.idx`)."),
            c("ooms", Int, "OOMs recorded."),
        ]),
    },
    Table {
        name: "segments",
        covers: For::Snapshot,
        storage: Storage::Copied,
        doc: "The segments of the dump (`torch.cuda.memory_snapshot()['segments']`).",
        columns: cols!([
            c("device", Int, "CUDA device index."),
            c("address", Int, "Start address."),
            c("size", Int, "`total_size`."),
            c("requested_size", Int, "Sum of its blocks' requested sizes."),
            c("allocated_bytes", Int, "Sum of its `active_allocated` blocks."),
            c("active_bytes", Int, "Sum of its active blocks (allocated or pending free)."),
            c("blocks", Int, "Number of blocks."),
            c("state", Text, "`active` when a block is active, else `inactive`."),
            c("pool", Text, "`small` or `large`."),
            c("pool_id", Int, "Private pool id (CUDA graphs, MemPool); NULL for the default pools."),
            c("stream", Int, "Stream."),
            c("expandable", Int, "1 for an expandable segment."),
        ] + site),
    },
    Table {
        name: "blocks",
        covers: For::Snapshot,
        storage: Storage::Copied,
        doc: "The blocks of the dump's segments.",
        columns: cols!([
            c("device", Int, "CUDA device index."),
            c("segment_address", Int, "Address of its segment (`segments.address`)."),
            c("address", Int, "Address."),
            c("size", Int, "Size (rounded, as the allocator counts)."),
            c("requested_size", Int, "Size the program asked for (0 where not recorded)."),
            c("state", Text, "`active_allocated`, `active_pending_free` or `inactive`."),
            c("pool", Text, "Its segment's pool: `small` or `large`."),
            c("stream", Int, "Its segment's stream."),
        ] + site),
    },
    Table {
        name: "events",
        covers: For::Snapshot,
        storage: Storage::Virtual,
        doc: "The allocator's log (`device_traces`), every entry, in order.",
        columns: cols!([
            c("idx", Int, "Index in its device's log."),
            c("device", Int, "CUDA device index."),
            c("action", Text, "`alloc`, `free_requested`, `free_completed`, `segment_alloc`, `segment_free`, `segment_map`, `segment_unmap`, `snapshot`, `oom` or `other`."),
            c("addr", Int, "Block or segment address (0 for `oom`, `snapshot`)."),
            c("size", Int, "Requested size."),
            c("stream", Int, "Stream."),
            c("time_us", Int, "Time (µs since the epoch); NULL in torch 2.1-era logs."),
            c("device_free", Int, "Free device memory, on `oom` entries."),
            c("step", Int, "The step it belongs to (`steps.idx` of the same device)."),
        ] + site),
    },
    Table {
        name: "live",
        covers: For::Snapshot,
        storage: Storage::Virtual,
        doc: "The allocated blocks alive at moments of the replayed log: the allocated peak, each OOM, each step's end and the end. Made when first read; at most 10 million rows (reading a larger one is an error).",
        columns: cols!([
            c("device", Int, "CUDA device index."),
            c("moment", Text, "`peak`, `oom`, `step_end` or `end`."),
            c("at_event", Int, "The event the state is taken after (`events.idx`); NULL: the end."),
            c("step", Int, "The step holding `at_event` (`steps.idx`)."),
            c("address", Int, "Block address."),
            c("size", Int, "Size (rounded)."),
            c("requested_size", Int, "Size asked for."),
            c("stream", Int, "Stream."),
            c("pool", Text, "`small` or `large`."),
            c("alloc_event", Int, "The `alloc` entry that made it (NULL: before the log)."),
        ] + site),
    },
    Table {
        name: "frames",
        covers: For::Both,
        storage: Storage::Virtual,
        doc: "Every recorded stack, one row per frame.",
        columns: cols!([
            c("stack_id", Int, "The stack."),
            c("depth", Int, "0 for the innermost frame."),
            c("file", Text, "File."),
            c("line", Int, "Line."),
            c("function", Text, "Function."),
            c("kind", Text, "`user`, `torch`, `library`, `python`, `native` or `generated` (code torch.compile wrote: inductor output, FX GraphModule files)."),
        ]),
    },
    Table {
        name: "sites",
        covers: For::Both,
        storage: Storage::Copied,
        doc: "Every site a stack is blamed on.",
        columns: cols!([
            c("site_id", Int, "The site."),
            c("file", Text, "File."),
            c("line", Int, "Line."),
            c("function", Text, "Function."),
            c("kind", Text, "`user` (the user's own code) or the innermost Python frame's kind."),
        ]),
    },
    Table {
        name: "steps",
        covers: For::Both,
        storage: Storage::Copied,
        doc: "Snapshot: the stretches of each device's log the step split found (setup and tail included). Trace: the profiler's steps, per device with `[memory]` events.",
        columns: cols!([
            c("device", Int, "CUDA device index (traces: NULL for the CPU)."),
            c("idx", Int, "Position among its device's steps."),
            c("name", Text, "`step 3`, `ProfilerStep#3`, `setup`, ..."),
            c("source", Text, "Snapshot: `setup`, `annotation`, `loop` or `tail`; trace: `profiler`."),
            c("complete", Int, "1 when the step ran to its end."),
            c("start_event", Int, "Snapshot: first event (`events.idx`)."),
            c("end_event", Int, "Snapshot: last event, inclusive."),
            c("start_us", Real, "Start time (snapshot: of its first timed event)."),
            c("end_us", Real, "End time."),
            c("peak_allocated_bytes", Int, "Allocated peak within the step."),
            c("end_allocated_bytes", Int, "Allocated at its end."),
        ]),
    },
    Table {
        name: "leaks",
        covers: For::Both,
        storage: Storage::Copied,
        doc: "The leak findings of `analyze`; the site is the line to change.",
        columns: cols!([
            c("idx", Int, "Position in the report's `leaks`."),
            c("device", Int, "CUDA device index."),
            c("kind", Text, "`accumulated_loss`, `retained_graph`, `hook_cache`, `kept_outputs`, `tensor_cache`, `steady_growth` or `retained_attempt`."),
            c("confidence", Text, "`low`, `medium` or `high`."),
            c("live_bytes", Int, "Survivors of the site at the end of the growth window."),
            c("count", Int, "Their number."),
            c("growth_bytes_per_step", Real, "Growth per step."),
            c("steps", Int, "Steps the growth spans."),
            c("alloc_file", Text, "The allocating line: file."),
            c("alloc_line", Int, "The allocating line: line."),
            c("alloc_function", Text, "The allocating line: function."),
        ] + site),
    },
    Table {
        name: "leak_steps",
        covers: For::Both,
        storage: Storage::Copied,
        doc: "Per leak finding, the bytes its sites held at each step's end.",
        columns: cols!([
            c("leak", Int, "`leaks.idx`."),
            c("step", Int, "Position among the finding's steps."),
            c("name", Text, "The step's name."),
            c("bytes", Int, "Bytes live from the finding's sites."),
        ]),
    },
    Table {
        name: "ooms",
        covers: For::Snapshot,
        storage: Storage::Copied,
        doc: "Each OOM, with the figures `analyze` explains it by.",
        columns: cols!([
            c("device", Int, "CUDA device index."),
            c("event", Int, "Its `oom` entry (`events.idx`)."),
            c("time_us", Int, "Time (µs)."),
            c("stream", Int, "Stream of the failed request."),
            c("pool", Text, "Pool of the failed request."),
            c("step", Int, "The step it happened in (`steps.idx`)."),
            c("cause", Text, "`fragmentation`, `capacity`, `leak`, `retained_attempt` or `unknown`."),
            c("requested_bytes", Int, "The request."),
            c("rounded_bytes", Int, "The request, rounded."),
            c("device_free_bytes", Int, "Free device memory the OOM reported."),
            c("allocated_bytes", Int, "Allocated at the OOM."),
            c("reserved_bytes", Int, "Reserved at the OOM."),
            c("largest_free_block_bytes", Int, "Largest cached free block."),
            c("free_reserved_bytes", Int, "Reserved but not allocated."),
        ] + site),
    },
    Table {
        name: "categories",
        covers: For::Snapshot,
        storage: Storage::Copied,
        doc: "Allocated bytes by category at the peak, each OOM and (no log) the dump.",
        columns: cols!([
            c("device", Int, "CUDA device index."),
            c("moment", Text, "`peak`, `oom` or `dump`."),
            c("at_event", Int, "The event the state was taken after."),
            c("category", Text, "`parameter`, `optimizer_state`, `gradient`, `activation`, `temporary`, `before_recording`, `kv_cache`, `output` or `other`."),
            c("bytes", Int, "Allocated bytes."),
            c("blocks", Int, "Blocks."),
        ]),
    },
    Table {
        name: "top_sites",
        covers: For::Both,
        storage: Storage::Copied,
        doc: "The site lists of `analyze`: live bytes by site at the end, at the peak and at each OOM.",
        columns: cols!([
            c("device", Int, "CUDA device index."),
            c("moment", Text, "`end`, `peak` or `oom`."),
            c("at_event", Int, "For `oom`: its event."),
            c("rank", Int, "1 for the heaviest."),
            c("bytes", Int, "Live bytes."),
            c("blocks", Int, "Live blocks."),
            c("file", Text, "Site: file."),
            c("line", Int, "Site: line."),
            c("function", Text, "Site: function."),
        ]),
    },
    Table {
        name: "ops",
        covers: For::Trace,
        storage: Storage::Virtual,
        doc: "The trace's CPU ops (`cpu_op` events).",
        columns: cols!([
            c("idx", Int, "The op."),
            c("name", Text, "`aten::mm`, ..."),
            c("ts_us", Real, "Start (µs)."),
            c("dur_us", Real, "Duration (µs)."),
            c("tid", Int, "Thread."),
            c("seq", Int, "Autograd sequence number."),
            c("parent", Int, "Enclosing op (`ops.idx`)."),
            c("step", Int, "Profiler step number holding its start."),
        ] + site),
    },
    Table {
        name: "memory_events",
        covers: For::Trace,
        storage: Storage::Virtual,
        doc: "The trace's `[memory]` events, in order, with the free that paired with each allocation.",
        columns: cols!([
            c("idx", Int, "The event."),
            c("device", Int, "Device index (-1 or the index for the CPU; see `device_type`)."),
            c("device_type", Text, "`cuda` or `cpu`."),
            c("ts_us", Real, "Time (µs)."),
            c("action", Text, "`alloc` (bytes > 0) or `free`."),
            c("addr", Int, "Address."),
            c("size", Int, "Bytes (positive for both actions)."),
            c("total_allocated", Int, "Allocated after the event, as recorded."),
            c("total_reserved", Int, "Reserved after the event, as recorded."),
            c("op", Int, "The innermost op running (`ops.idx`)."),
            c("freed_by", Int, "For an allocation: the free that released it (`memory_events.idx`)."),
            c("step", Int, "Profiler step number holding it."),
        ] + site),
    },
    Table {
        name: "graph_nodes",
        covers: For::Trace,
        storage: Storage::Virtual,
        doc: "The autograd graph's forward nodes: the op that made each, and whether a backward consumed it. Built when first read.",
        columns: cols!([
            c("op", Int, "The creating op (`ops.idx`)."),
            c("name", Text, "Its name."),
            c("seq", Int, "Sequence number."),
            c("consumed", Int, "1 when a backward consumed it."),
            c("step", Int, "Profiler step number holding it."),
        ] + site),
    },
];

pub fn table(name: &str) -> Option<&'static Table> {
    TABLES.iter().find(|t| t.name == name)
}

/// The tables of a snapshot (`trace` false) or a trace.
pub fn tables_for(trace: bool) -> impl Iterator<Item = &'static Table> {
    TABLES.iter().filter(move |t| t.covers.covers(trace))
}

/// `.schema`: the `CREATE TABLE` of each table, with each column's meaning as a comment. A
/// table named that this capture lacks gets a comment line saying so (an empty answer read as a
/// command dropped), and which kind of capture has it.
pub fn schema_text(trace: bool, only: Option<&str>) -> String {
    if let Some(name) = only.filter(|o| !tables_for(trace).any(|t| t.name == *o)) {
        let other = table(name).map(|_| if trace { "snapshot" } else { "trace" });
        return crate::wording::no_such_table(name, other);
    }
    let mut s = String::new();
    for t in tables_for(trace).filter(|t| only.is_none_or(|o| o == t.name)) {
        s.push_str(&format!("-- {}\nCREATE TABLE {} (\n", t.doc, t.name));
        for (i, col) in t.columns.iter().enumerate() {
            let comma = if i + 1 < t.columns.len() { "," } else { "" };
            s.push_str(&format!(
                "  {:<28} -- {}\n",
                format!("{} {}{comma}", col.name, col.ty.sql()),
                col.doc
            ));
        }
        s.push_str(");\n");
    }
    s
}

/// The reference section of docs/query.md.
pub fn markdown() -> String {
    let mut s = String::new();
    for t in TABLES {
        let of = match t.covers {
            For::Snapshot => "snapshots",
            For::Trace => "traces",
            For::Both => "snapshots and traces",
        };
        let held = match t.storage {
            Storage::Copied => "",
            Storage::Virtual => ", read in place",
        };
        s.push_str(&format!("### `{}` ({of}{held})\n\n{}\n\n", t.name, t.doc));
        s.push_str("| column | type | meaning |\n|---|---|---|\n");
        for col in t.columns {
            s.push_str(&format!(
                "| `{}` | {} | {} |\n",
                col.name,
                col.ty.sql(),
                col.doc
            ));
        }
        s.push('\n');
    }
    s
}
