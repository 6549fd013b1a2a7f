//! The tables' columns, once: their names, types and nullability, read by both formats. A row
//! is turned into a JSON object by serde (its struct in [`super::rows`]); the Parquet writer
//! takes each column's values from those objects by name, and the reader turns Parquet rows back
//! into the same objects, so both formats go through one definition of each row.

use serde_json::{Map, Value};

/// A column's type, as the engines see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    I64,
    F64,
    Bool,
    Str,
}

/// One column.
#[derive(Clone, Copy, Debug)]
pub struct Column {
    pub name: &'static str,
    pub ty: Ty,
    pub nullable: bool,
}

const fn c(name: &'static str, ty: Ty, nullable: bool) -> Column {
    Column { name, ty, nullable }
}

use Ty::{Bool, Str, F64, I64};

/// The partition columns every table starts with.
macro_rules! head {
    ($($rest:expr),* $(,)?) => {
        &[
            c("schema", Str, false),
            c("job", Str, false),
            c("step", Str, false),
            c("rank", I64, true),
            $($rest),*
        ]
    };
}

const RANK_SUMMARY: &[Column] = head![
    c("rank_from", Str, true),
    c("host", Str, true),
    c("host_from", Str, true),
    c("path", Str, false),
    c("status", Str, false),
    c("status_detail", Str, true),
    c("kind", Str, true),
    c("torch_layout", Str, true),
    c("torch_version", Str, true),
    c("cuda_version", Str, true),
    c("device", Str, true),
    c("devices", I64, true),
    c("device_total_bytes", I64, true),
    c("history_complete", Bool, true),
    c("peak_allocated_bytes", I64, true),
    c("peak_reserved_bytes", I64, true),
    c("end_allocated_bytes", I64, true),
    c("end_reserved_bytes", I64, true),
    c("ooms", I64, true),
    c("oom_cause", Str, true),
    c("oom_requested_bytes", I64, true),
    c("first_oom_time_us", I64, true),
    c("outside_allocator_bytes", I64, true),
    c("leaks", I64, true),
    c("leak_live_bytes", I64, true),
    c("verdict", Str, true),
    c("sites_listed", I64, true),
];

const SITE_AT_PEAK: &[Column] = head![
    c("position", I64, false),
    c("site_id", Str, true),
    c("rel_path", Str, true),
    c("file", Str, true),
    c("function", Str, true),
    c("line", I64, true),
    c("bytes", I64, false),
    c("blocks", I64, false),
];

const STEP_SERIES: &[Column] = head![
    c("index", I64, false),
    c("name", Str, false),
    c("peak_allocated_bytes", I64, false),
    c("end_allocated_bytes", I64, false),
];

const LEAK_SITE: &[Column] = head![
    c("site_id", Str, true),
    c("rel_path", Str, true),
    c("file", Str, true),
    c("function", Str, true),
    c("line", I64, true),
    c("leak_kind", Str, false),
    c("live_bytes", I64, false),
    c("growth_bytes_per_step", F64, false),
    c("steps", I64, false),
];

/// One of the tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    RankSummary,
    SiteAtPeak,
    StepSeries,
    LeakSite,
}

pub const TABLES: [Table; 4] = [
    Table::RankSummary,
    Table::SiteAtPeak,
    Table::StepSeries,
    Table::LeakSite,
];

impl Table {
    pub fn name(self) -> &'static str {
        match self {
            Table::RankSummary => "rank_summary",
            Table::SiteAtPeak => "site_at_peak",
            Table::StepSeries => "step_series",
            Table::LeakSite => "leak_site",
        }
    }

    pub fn columns(self) -> &'static [Column] {
        match self {
            Table::RankSummary => RANK_SUMMARY,
            Table::SiteAtPeak => SITE_AT_PEAK,
            Table::StepSeries => STEP_SERIES,
            Table::LeakSite => LEAK_SITE,
        }
    }

    /// The table a file holds, from its name (`rank_summary.parquet`, `site_at_peak-<hash>.jsonl`).
    pub fn of_file_name(name: &str) -> Option<Table> {
        TABLES.into_iter().find(|t| {
            name.strip_prefix(t.name())
                .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('-'))
        })
    }
}

/// A row as one JSON line, its keys in the table's column order (a column the row lacks is
/// `null`), whatever order the JSON map keeps its keys in.
pub fn line(table: Table, v: &Value) -> String {
    let empty = Map::new();
    let m = v.as_object().unwrap_or(&empty);
    let mut out = String::from("{");
    for (i, col) in table.columns().iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::String(col.name.to_owned()).to_string());
        out.push(':');
        out.push_str(&m.get(col.name).unwrap_or(&Value::Null).to_string());
    }
    out.push('}');
    out
}
