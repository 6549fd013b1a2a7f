//! The timeline view of a snapshot: its memory over the event log, on the shared [`Chart`].
//!
//! A capture can hold a million events and a terminal has a hundred columns, so each column
//! shows the minimum and maximum of its bucket of events: one pass over the visible window per
//! frame, and a one-event spike (the peak, an OOM's transient) is never averaged away.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::Widget;

use super::data::Data;
use super::layout::TimelineAt;
pub use super::widgets::chart::{
    column_of, column_of_bucket, downsample, downsample_buckets, event_at_column, tick_label,
    tick_step, time_buckets, Chart,
};
use crate::units::bytes;

fn put(area: Rect, buf: &mut Buffer, dy: u16, s: &str, st: Style) {
    super::widgets::put(buf, area, dy, s, st)
}

/// The timeline view of a snapshot: its data at what the app shows.
pub struct TimelineView<'a>(pub &'a Data, pub TimelineAt);

impl Widget for TimelineView<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let (data, at) = (self.0, self.1);
        let (Some(dev), Some(tl)) = (data.snap.devices.get(at.dev), data.timelines.get(at.dev))
        else {
            buf.set_string(
                area.x,
                area.y,
                "no devices in this capture",
                Style::default(),
            );
            return;
        };
        let n = dev.events.len();
        if n == 0 {
            let msg = "this capture has no event history (recorded without _record_memory_history, or torch 2.0): nothing to plot";
            let w = area.width.saturating_sub(1) as usize;
            for (k, l) in super::widgets::wrap(msg, w).iter().enumerate() {
                put(area, buf, k as u16, l, Style::default());
            }
            return;
        }
        let cur = at.cursor.unwrap_or(0);
        let s = &tl.series;
        // Header: the figures at the cursor.
        let e = &dev.events[cur];
        let t = data
            .rel_time_us(at.dev, cur)
            .map(|t| format!(" +{:.3} s", t as f64 / 1e6))
            .unwrap_or_default();
        let site = data
            .snap
            .stacks
            .site_frame(e.stack)
            .map(|f| {
                format!(
                    " at {}:{}",
                    super::sites::short(data.snap.stacks.str(f.file)),
                    f.line
                )
            })
            .unwrap_or_default();
        let header = format!(
            "event {cur}/{}{t}  {} {}{site}  │ alloc {} active {} reserved {}",
            n - 1,
            e.action.name(),
            bytes(e.size),
            bytes(s.allocated.get(cur).copied().unwrap_or(0)),
            bytes(s.active.get(cur).copied().unwrap_or(0)),
            bytes(s.reserved.get(cur).copied().unwrap_or(0)),
        );
        Chart {
            header,
            allocated: &s.allocated,
            active: Some(&s.active),
            reserved: Some(&s.reserved),
            window: at.window,
            cursor: cur,
            markers: data
                .markers
                .get(at.dev)
                .map(|v| v.as_slice())
                .unwrap_or(&[]),
            marker_legend: "│ step/annotation",
            hints: "p: peak  o: OOM  [ ]: markers +/- zoom t: time axis Enter: map",
            times: if at.by_time {
                data.times.get(at.dev).and_then(|t| t.as_deref())
            } else {
                None
            },
            reserved_shown: at.reserved_shown,
            axis_from_start: None,
        }
        .render(area, buf);
    }
}
