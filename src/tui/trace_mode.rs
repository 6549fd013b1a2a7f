//! What the app asks of a profiler trace ([`Capture`]): its devices' memory events, their
//! markers and times, its findings, its status line and its keys. A trace has no allocator
//! state to rebuild at the cursor, so its views share nothing but the [`TraceData`] itself;
//! their own state (the steps' drill-down, the graph's and the leaks' lists) is theirs, in
//! [`super::views`].

use std::path::Path;

use super::action::{Action, Effect};
use super::capture::Capture;
use super::data::{Finding, Marker};
use super::help::{Page, TRACE_HELP};
use super::trace::TraceData;

impl Capture for TraceData {
    fn path(&self) -> &Path {
        &self.path
    }

    fn devices(&self) -> usize {
        self.devs.len()
    }

    fn events(&self, dev: usize) -> usize {
        self.devs.get(dev).map(|d| d.events.len()).unwrap_or(0)
    }

    fn markers(&self, dev: usize) -> &[Marker] {
        self.devs
            .get(dev)
            .map(|d| d.markers.as_slice())
            .unwrap_or(&[])
    }

    fn times(&self, dev: usize) -> Option<&[f64]> {
        self.devs.get(dev).map(|d| d.times.as_slice())
    }

    fn findings(&self) -> &[Finding] {
        &self.findings
    }

    fn device_name(&self, dev: usize) -> Option<String> {
        self.devs.get(dev).map(|d| d.label.clone())
    }

    fn status(&self, dev: usize, cursor: Option<usize>) -> String {
        let file = self
            .path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let d = self.devs.get(dev);
        let cur = match (cursor, d) {
            (Some(c), Some(d)) => {
                let step = self
                    .step_of_event(dev, c)
                    .and_then(|s| self.trace.steps.get(s))
                    .map(|s| format!(" {}", s.name))
                    .unwrap_or_default();
                format!(
                    "event {c}/{} +{:.3}s{step}",
                    d.events.len().saturating_sub(1),
                    self.rel_time_us(dev, c).unwrap_or(0.0) / 1e6
                )
            }
            _ => "no memory events".to_owned(),
        };
        let devname = d.map(|d| d.label.clone()).unwrap_or_default();
        format!(" {file} │ {devname} │ {cur}")
    }

    fn help(&self) -> &'static Page {
        &TRACE_HELP
    }

    /// A trace has no allocator map: `c` says where it would act.
    fn unclaimed(&self, a: Action) -> Effect {
        match a {
            Action::CategoryToggle => {
                Effect::Message("c colours the allocator map by category (view 3)".into())
            }
            _ => Effect::None,
        }
    }
}
