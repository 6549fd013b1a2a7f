//! A stretch of events as one reader thread hands it to the applying thread (issue #43), and
//! the one conversion of an event's record into the trace's records (the one-thread read
//! fills a single batch the same way).
//!
//! Why: the events of a large trace are read on every core, but applied on one thread in file
//! order, so that every interned id (op names, Python frames, named threads) is the one a
//! single-threaded read gives. Applying record by record made that thread the bottleneck of
//! the read (a string hash and lookup per event, for a few thousand distinct names). Here the
//! reader does that work for its own stretch: it gives each distinct name a local number, in
//! the order the stretch first uses it, and builds the trace's own records ([`Op`],
//! [`PyCall`], [`MemEvent`]) with those local numbers. The applying thread then interns each
//! distinct name once, in that order, renumbers the records and moves them to the trace.
//!
//! Why the ids come out the same: interning is idempotent, so of a stretch's calls only the
//! first for each name can change the interner, and those are made in the same order as a
//! record-by-record read makes them (the order of first use); names of different kinds (ops
//! and Python frames share the string table) are kept in one list for that reason. The records
//! of each kind keep their file order, and no list's order depends on another's.

use std::borrow::Cow;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Mutex;
use std::thread::{Scope, ScopedJoinHandle};

use rustc_hash::FxHashMap as HashMap;

use super::{apply_user, bounded, Rec, Scalar};
use crate::model::frames::{FrameId, StackId, Sym};
use crate::model::roles::FrameRole;
use crate::model::trace::{MemEvent, Op, PyCall, Tid, TraceBuilder};

/// What a stretch's name is: the interner each kind goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Op,
    Python,
    Thread,
}

/// Which list a record whose thread is named by a string sits in.
#[derive(Clone, Copy, Debug)]
enum List {
    Op,
    Python,
    Memory,
    Flow,
}

/// A thread id read in the stretch: a number, or the local number of a thread name.
type TidRef = Result<Tid, u32>;

/// The events of one stretch, their names numbered locally (see the module's doc).
#[derive(Default)]
pub(super) struct Batch<'a> {
    /// The distinct names, in the order the stretch first uses them.
    names: Vec<(Kind, Cow<'a, str>)>,
    ops_by_name: HashMap<Cow<'a, str>, u32>,
    python_by_name: HashMap<Cow<'a, str>, u32>,
    threads_by_name: HashMap<Cow<'a, str>, u32>,
    /// `Op::name` is the local number of the name (a [`Sym`] once applied).
    ops: Vec<Op>,
    /// `PyCall::frame` is the local number of the name (a [`FrameId`] once applied).
    python: Vec<PyCall>,
    memory: Vec<MemEvent>,
    /// `(id, start, tid, ts)` of `fwdbwd` flow ends.
    flows: Vec<(i64, bool, Tid, f64)>,
    /// Records whose thread is a name: (list, position in it, local number).
    named: Vec<(List, u32, u32)>,
    /// Steps and other annotations (a few per step).
    users: Vec<(Cow<'a, str>, f64, f64, TidRef)>,
    gpu_step_duplicates: u64,
    /// Scratch for [`Batch::apply`]: each local number's ids in the trace.
    resolved: Vec<(u32, FrameRole, Tid)>,
}

impl<'a> Batch<'a> {
    fn local(&mut self, kind: Kind, name: Cow<'a, str>) -> u32 {
        let map = match kind {
            Kind::Op => &mut self.ops_by_name,
            Kind::Python => &mut self.python_by_name,
            Kind::Thread => &mut self.threads_by_name,
        };
        if let Some(&i) = map.get(&*name) {
            return i;
        }
        let i = self.names.len() as u32;
        map.insert(name.clone(), i);
        self.names.push((kind, name));
        i
    }

    /// The thread of a record, as `tid_of` reads it (a name is numbered locally).
    fn tid(&mut self, s: &Scalar<'a>) -> TidRef {
        match s {
            Scalar::Str(name) => match name.trim().parse::<i64>() {
                Ok(n) => Ok(Tid(n)),
                Err(_) => Err(self.local(Kind::Thread, bounded(name))),
            },
            other => Ok(Tid(other.as_i64().unwrap_or(0))),
        }
    }

    /// The thread of a record at `pos` of `list`: its number, or a placeholder noted to be
    /// replaced by the name's id when the batch is applied.
    fn tid_in(&mut self, s: &Scalar<'a>, list: List, pos: usize) -> Tid {
        match self.tid(s) {
            Ok(t) => t,
            Err(local) => {
                self.named.push((list, pos as u32, local));
                Tid(0)
            }
        }
    }

    /// Adds one event's record, as `apply` would add it to the trace.
    pub(super) fn push(&mut self, r: Rec<'a>) {
        match r {
            Rec::Op {
                name,
                ts,
                dur,
                tid,
                seq,
                fwd_tid,
                external_id,
                scalar_inputs,
            } => {
                let tid = self.tid_in(&tid, List::Op, self.ops.len());
                let local = self.local(Kind::Op, name);
                self.ops.push(Op {
                    name: Sym(local),
                    role: FrameRole::NONE,
                    ts,
                    dur: dur.max(0.0),
                    tid,
                    seq,
                    fwd_tid,
                    external_id,
                    scalar_inputs,
                    parent: None,
                    stack: StackId::EMPTY,
                });
            }
            Rec::User { name, ts, dur, tid } => {
                let tid = self.tid(&tid);
                self.users.push((name, ts, dur, tid));
            }
            Rec::GpuStepDuplicate => self.gpu_step_duplicates += 1,
            Rec::Python {
                name,
                ts,
                dur,
                tid,
                python_id,
                parent_id,
            } => {
                let tid = self.tid_in(&tid, List::Python, self.python.len());
                let local = self.local(Kind::Python, name);
                self.python.push(PyCall {
                    frame: FrameId(local),
                    ts,
                    dur: dur.max(0.0),
                    tid,
                    python_id,
                    parent_id,
                    preexisting: false,
                });
            }
            Rec::Memory {
                ts,
                tid,
                addr,
                bytes,
                total_allocated,
                total_reserved,
                device,
            } => {
                let tid = self.tid_in(&tid, List::Memory, self.memory.len());
                self.memory.push(MemEvent {
                    ts,
                    tid,
                    addr,
                    bytes,
                    total_allocated,
                    total_reserved,
                    device,
                    op: None,
                    stack: StackId::EMPTY,
                });
            }
            Rec::Flow { id, start, tid, ts } => {
                let tid = self.tid_in(&tid, List::Flow, self.flows.len());
                self.flows.push((id, start, tid, ts));
            }
        }
    }

    /// Takes lists for the next stretch from the spares where it has none.
    pub(super) fn refill(&mut self, spares: &Spares) {
        if self.ops.capacity() == 0 {
            self.ops = spares.ops.take();
        }
        if self.python.capacity() == 0 {
            self.python = spares.python.take();
        }
        if self.memory.capacity() == 0 {
            self.memory = spares.memory.take();
        }
    }

    /// Adds the stretch to the trace (interning its names in the order it first used them),
    /// its ops, Python calls and memory events through `sinks`, and empties the batch for the
    /// next stretch, its memory kept.
    pub(super) fn apply<'s>(&mut self, b: &mut TraceBuilder, sinks: &mut Sinks<'s, '_>) {
        let mut resolved = std::mem::take(&mut self.resolved);
        resolved.clear();
        for (kind, name) in &self.names {
            resolved.push(match kind {
                Kind::Op => {
                    let (s, role) = b.intern_op(name);
                    (s.0, role, Tid(0))
                }
                Kind::Python => (b.python_frame(name).0, FrameRole::NONE, Tid(0)),
                Kind::Thread => (0, FrameRole::NONE, b.named_tid(name)),
            });
        }
        for op in &mut self.ops {
            let (s, role, _) = resolved[op.name.0 as usize];
            op.name = Sym(s);
            op.role = role;
        }
        for p in &mut self.python {
            p.frame = FrameId(resolved[p.frame.0 as usize].0);
        }
        for &(list, pos, local) in &self.named {
            let tid = resolved[local as usize].2;
            let pos = pos as usize;
            match list {
                List::Op => self.ops[pos].tid = tid,
                List::Python => self.python[pos].tid = tid,
                List::Memory => self.memory[pos].tid = tid,
                List::Flow => self.flows[pos].2 = tid,
            }
        }
        sinks.ops.send(std::mem::take(&mut self.ops));
        sinks.python.send(std::mem::take(&mut self.python));
        sinks.memory.send(std::mem::take(&mut self.memory));
        for (id, start, tid, ts) in self.flows.drain(..) {
            b.add_flow_end(id, start, tid, ts);
        }
        for (name, ts, dur, tid) in self.users.drain(..) {
            let tid = tid.unwrap_or_else(|local| resolved[local as usize].2);
            apply_user(b, &name, ts, dur, tid);
        }
        b.counts_mut().gpu_step_duplicates += std::mem::take(&mut self.gpu_step_duplicates);
        self.names.clear();
        self.ops_by_name.clear();
        self.python_by_name.clear();
        self.threads_by_name.clear();
        self.named.clear();
        self.resolved = resolved;
    }
}

impl Batch<'_> {
    /// Adds the batch to the trace on this thread (the one-thread read's single batch).
    pub(super) fn apply_alone(&mut self, b: &mut TraceBuilder) {
        let spares = Spares::default();
        std::thread::scope(|scope| {
            let mut sinks = Sinks::new(scope, &spares, 1, false);
            self.apply(b, &mut sinks);
            sinks.finish(b);
        });
    }
}

/// Emptied lists of one kind, for the readers' next batches (so that their memory is reused,
/// not given back to the system and faulted in again).
pub(super) struct Spare<T>(Mutex<Vec<Vec<T>>>);

impl<T> Spare<T> {
    fn take(&self) -> Vec<T> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default()
    }
    fn put(&self, v: Vec<T>) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(v);
    }
}

impl<T> Default for Spare<T> {
    fn default() -> Self {
        Spare(Mutex::new(Vec::new()))
    }
}

/// The spare lists of each kind.
#[derive(Default)]
pub(super) struct Spares {
    ops: Spare<Op>,
    python: Spare<PyCall>,
    memory: Spare<MemEvent>,
}

/// One of the trace's large lists, filled in the order its parts are sent, on a thread of its
/// own (issue #43: on a 9 GB trace, copying 2 GB of records into the lists, and faulting their
/// memory in, took the applying thread 1.6 s; the three lists fill side by side, beside it).
/// Where the thread cannot start, the parts are appended on the sender's.
pub(super) struct Sink<'scope, T> {
    tx: Option<SyncSender<Vec<T>>>,
    handle: Option<ScopedJoinHandle<'scope, Vec<T>>>,
    here: Vec<T>,
}

impl<'scope, T: Send + 'scope> Sink<'scope, T> {
    fn new<'env>(
        scope: &'scope Scope<'scope, 'env>,
        spare: &'scope Spare<T>,
        bound: usize,
        on_thread: bool,
    ) -> Self {
        let mut sink = Sink {
            tx: None,
            handle: None,
            here: Vec::new(),
        };
        if !on_thread {
            return sink;
        }
        let (tx, rx) = sync_channel::<Vec<T>>(bound);
        let spawned = std::thread::Builder::new().spawn_scoped(scope, move || {
            let mut all: Vec<T> = Vec::new();
            for mut part in rx {
                append(&mut all, &mut part);
                spare.put(part);
            }
            all
        });
        if let Ok(h) = spawned {
            sink.tx = Some(tx);
            sink.handle = Some(h);
        }
        sink
    }

    fn send(&mut self, mut part: Vec<T>) {
        if part.capacity() == 0 {
            return;
        }
        match &self.tx {
            Some(tx) => {
                if let Err(e) = tx.send(part) {
                    // The thread is gone (it panicked): joining it in `finish` says why.
                    drop(e);
                }
            }
            None => append(&mut self.here, &mut part),
        }
    }

    /// The whole list, in the order of the parts sent.
    fn finish(mut self) -> Vec<T> {
        drop(self.tx.take());
        match self.handle.take() {
            Some(h) => h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)),
            None => std::mem::take(&mut self.here),
        }
    }
}

/// `part` moved to the end of `all` (without a copy where `all` is empty).
fn append<T>(all: &mut Vec<T>, part: &mut Vec<T>) {
    if all.is_empty() && all.capacity() < part.capacity() {
        std::mem::swap(all, part);
    } else {
        all.append(part);
    }
}

/// The three lists' sinks.
pub(super) struct Sinks<'scope, 'env> {
    ops: Sink<'scope, Op>,
    python: Sink<'scope, PyCall>,
    memory: Sink<'scope, MemEvent>,
    _env: std::marker::PhantomData<&'env ()>,
}

impl<'scope, 'env> Sinks<'scope, 'env> {
    /// Sinks filling on threads of `scope` when `on_threads`, each with at most `bound`
    /// parts waiting; their emptied parts go to `spares`.
    pub(super) fn new(
        scope: &'scope Scope<'scope, 'env>,
        spares: &'scope Spares,
        bound: usize,
        on_threads: bool,
    ) -> Self {
        Sinks {
            ops: Sink::new(scope, &spares.ops, bound, on_threads),
            python: Sink::new(scope, &spares.python, bound, on_threads),
            memory: Sink::new(scope, &spares.memory, bound, on_threads),
            _env: std::marker::PhantomData,
        }
    }

    /// Adds the filled lists to the trace, after what it holds.
    pub(super) fn finish(self, b: &mut TraceBuilder) {
        let (mut ops, mut python, mut memory) = (
            self.ops.finish(),
            self.python.finish(),
            self.memory.finish(),
        );
        b.append(&mut ops, &mut python, &mut memory);
    }
}
