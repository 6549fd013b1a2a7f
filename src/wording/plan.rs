//! The words of `memscope plan`: what each basis of a request's terms rests on, why no
//! largest batch is given, how the terms were found, and what a reader must know to trust the
//! figures.

use crate::analysis::plan::{
    band, Band, BandEvidence, BandRule, Basis, Fit, NextCapture, NoMaxBatch, Plan, Shape, Verdict,
};
use crate::units::bytes;

/// A basis's short label (a column of the split).
pub fn plan_basis(b: Basis) -> &'static str {
    match b {
        Basis::BeforeRecording => "alive before recording (weights, earlier state)",
        Basis::Parameter => "parameters",
        Basis::OptimizerState => "optimizer state",
        Basis::OptimizerTemporary => "optimizer temporaries",
        Basis::ParameterGradient => "parameter gradients",
        Basis::Workspace => "cuBLAS workspaces",
        Basis::MadeOnce => "made once and kept (lazy buffers, workspaces)",
        Basis::NotPerSample => "sizes no multiple of the batch",
        Basis::ParameterSizedGradient => "backward blocks of a weight's size or half (activation gradients, or 16-bit weight gradients)",
        Basis::WeightCast => "16-bit casts of weights (made by a Linear or Conv call before its output)",
        Basis::ParameterSizedForward => "forward blocks of a weight's size or half (activations, or 16-bit weight casts)",
        Basis::Activation => "activations",
        Basis::ForwardTemporary => "forward temporaries",
        Basis::GradientTemporary => "backward temporaries",
        Basis::Output => "outputs (inference)",
        Basis::KvCache => "KV cache",
        Basis::UserTemporary => "inputs and temporaries of user code",
        Basis::UserKept => "kept by user code (inputs of the last step?)",
        Basis::Native => "native work with no Python frame",
        Basis::MatchedSame => "same size in both captures",
        Basis::MatchedFitted => "fitted from both captures",
    }
}

/// Why the plan gives no largest batch.
pub fn no_max_batch(r: NoMaxBatch) -> &'static str {
    match r {
        NoMaxBatch::NoCap => "no cap: the capture records neither an OOM nor the device's size (memscope run records it); pass --cap (e.g. --cap 80GiB) to get the largest batch and OOM predictions",
        NoMaxBatch::EndsInOom => "the capture ends at an OOM: the rest of that step was never requested, so the peaks are lower bounds and no batch can be promised to fit; capture a complete step at a smaller batch",
        NoMaxBatch::NothingFits => "even batch 1 does not fit under the cap",
    }
}

/// After the largest batch: how far under the likelier reading's it lies, and the room it keeps
/// (`kept`, already written as bytes).
pub fn plan_max_batch_kept(rounded_down_by: u64, central_batch: u64, kept: &str) -> String {
    format!(
        "rounded down by {rounded_down_by} from {central_batch} (the likelier reading): the largest batch the column under the cap says fits, its upper reading replaying under the cap and {kept} under it (the band's lower side)"
    )
}

/// After the largest batch, when the search reached its limit without a failure.
pub fn plan_search_limit() -> String {
    format!(
        " or more (the search stops at {}x the recorded batch: further out, kernels chosen by size may make requests the capture does not show; capture at a larger batch to plan beyond)",
        crate::analysis::plan::SEARCH_LIMIT
    )
}

/// How the terms were found.
pub fn plan_fit(f: &Fit, recorded: Shape) -> String {
    match f {
        Fit::OneCapture => "one capture: which requests grow is inferred from their stacks, categories, sizes and lifetimes; a second capture at another batch size (--with OTHER --with-batch M) makes the linear terms exact".into(),
        Fit::TwoCaptures {
            other,
            more,
            matched,
            by_python_stack,
            requests,
            unmatched,
        } => {
            let axis = match other.seq {
                Some(s) if other.batch == recorded.batch => format!("sequence length {s}"),
                _ => format!("batch {}", other.batch),
            };
            let rest = if *unmatched > 0 {
                format!("; the other {unmatched} (no counterpart of the same or a proportional size: workspaces sized by the algorithm picked, paths taken at one size only) keep what one capture infers")
            } else {
                String::new()
            };
            let python = if *by_python_stack > 0 {
                format!(" ({by_python_stack} of them by their Python frames alone, in log order: their native frames differ or are missing)")
            } else {
                String::new()
            };
            if !more.is_empty() {
                let also: Vec<String> = more.iter().map(|s| s.batch.to_string()).collect();
                return format!("{} captures (the others at {axis} and batch {}): {matched} of {requests} requests matched by stack and order{python} in at least one of them, each term the one that gives every size seen, else the line through the two largest captures{rest}", more.len() + 2, also.join(", "));
            }
            format!("two captures (the other at {axis}): {matched} of {requests} requests matched by stack and order{python}, each fixed or proportional from its two sizes{rest}")
        }
    }
}

/// What the plan did with the layout its log starts from (recording began mid-run).
fn mid_run(p: &Plan) -> String {
    let Some(f) = &p.prelog else {
        if p.fit != Fit::OneCapture && p.step_sizes.data_dependent {
            return "the log starts mid-run: the blocks and cached segments alive at its first event are replayed as recorded at every size (the iterations ask other sizes from one to the next, so the segments cached before recording follow no batch term)".to_string();
        }
        return "the log starts mid-run: its first event's blocks and cached segments are replayed as recorded (one capture cannot tell which grow; --with a second fits them)".to_string();
    };
    let check = p
        .band_evidence
        .layout_replays
        .iter()
        .map(|r| format!("batch {} off by {:.1}%", r.shape.batch, 100.0 * r.error()))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "the log starts mid-run ({} blocks, {} in {} segments): each capture's replay starts from its own layout, paired with the others' ({} of {} blocks and {} of {} segments paired; {} blocks and {} segments of other sizes there, fitted to the batch: blocks by their exact term, segments by the request that made them); another size starts from the nearest capture's layout, its paired values moved to that size, its unpaired blocks and segments holding blocks as recorded, and its empty cached segments with no counterpart left out ({} blocks and {} segments of the other captures had none here); each capture's peaks replayed from the other captures' layouts, against its own ({check}), widen the band where larger",
        f.blocks,
        bytes(f.block_bytes),
        f.segments,
        f.blocks_paired,
        f.blocks,
        f.segments_paired,
        f.segments,
        f.blocks_fitted,
        f.segments_fitted,
        f.others_unpaired_blocks,
        f.others_unpaired_segments,
    )
}

/// What a reader must know to trust the figures, one sentence each.
pub fn plan_notes(p: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    if p.starts_mid_run {
        out.push(mid_run(p));
    }
    if p.ends_in_oom {
        out.push("the capture ends at an OOM: peaks at other batch sizes are lower bounds (the requests after it were never made)".to_string());
    }
    if let Some(m) = p.max_batch_at_most {
        out.push(format!(
            "the largest batch is at most {m}: up to the OOM, the requests of batch {} no longer fit under the cap, and the rest of the step can only add to them",
            m + 1
        ));
    }
    if let Some(r) = p
        .predictions
        .iter()
        .filter(|r| {
            r.peak_reserved_upper_bytes > r.peak_reserved_bytes + r.peak_reserved_bytes / 20
        })
        .max_by_key(|r| r.batch)
    {
        out.push(format!(
            "one capture is not enough here: at batch {} the readings differ by {} ({} against {} reserved); a second capture at another batch size (--with) decides which requests grow",
            r.batch,
            bytes(r.peak_reserved_upper_bytes - r.peak_reserved_bytes),
            bytes(r.peak_reserved_upper_bytes),
            bytes(r.peak_reserved_bytes)
        ));
    }
    if p.unsure_requests > 0 {
        out.push(format!(
            "{} of {} requests could not be placed for sure ({} at the recorded peak): the upper figures let them all grow, and OOMs and the largest batch are judged on those",
            p.unsure_requests,
            p.requests,
            bytes(p.split.unsure_bytes)
        ));
    }
    if p.recorded.seq.is_some() {
        out.push(if p.flash_attention {
            "sequence: the capture runs flash or memory-efficient attention, so growing requests are linear in the sequence length".to_string()
        } else if p.seq_ambiguous {
            "sequence: some growing requests have sizes that could be attention scores (quadratic in the sequence); one capture cannot tell, so the upper figures take them as quadratic; a second capture at another --seq (--with OTHER --with-seq S) decides".to_string()
        } else {
            "sequence: growing requests are linear in the sequence length (none has a size that could be attention scores)".to_string()
        });
    }
    if p.convolution_requests > 0 {
        out.push(format!(
            "{} requests come from convolutions: cuDNN picks an algorithm, and with it a workspace, for each shape, so at another batch size they ask for other sizes; without a cap the reserved peak can be well above this prediction (on the ground truth's CNN, 24% above it at 8x the recorded batch, fixtures/plan). Under a cap cuDNN runs another algorithm when a workspace does not fit, so the replay under the cap goes on without the workspaces it cannot place, as real runs do; near the cap, confirm with a capture at the batch you pick",
            p.convolution_requests
        ));
    }
    if p.varying_workspaces > 0 {
        out.push(format!(
            "workspace band: {} cuDNN workspace requests changed size between the captures by no exact term (the algorithm is picked per shape, so two sizes are no law for a third): the upper figures grow them on the line through their sizes, fits and the largest batch are judged with them grown, and an OOM is said only where they fail at their recorded sizes too; in between the column says it cannot tell",
            p.varying_workspaces
        ));
    }
    let ss = &p.step_sizes;
    if ss.data_dependent {
        out.push(format!(
            "data-dependent sizes: {} of {} requests changed size from one recorded iteration to the next (by up to {:.0}%; {} at their larger sizes), so at another batch the layout under the cap is not the recorded one scaled: a fit is said only where the replay stays under the cap less the band without releasing cached segments",
            ss.varying,
            ss.requests,
            ss.largest_change_permille as f64 / 10.0,
            bytes(ss.varying_bytes)
        ));
    }
    out.push(plan_band(p.band, &p.band_evidence));
    out.push("the prediction replays the recorded requests, scaled: a program whose work depends on the batch in other ways (a different algorithm picked at another size, dynamic shapes) asks for other things".to_string());
    out
}

/// A prediction's cell under the cap (`lower_bounds`: the capture ends at an OOM).
pub fn plan_verdict(v: Option<Verdict>, lower_bounds: bool) -> &'static str {
    match v {
        Some(Verdict::Oom) => "OOM",
        Some(Verdict::Fits) if lower_bounds => "fits up to the OOM's request",
        Some(Verdict::Fits) => "fits",
        Some(Verdict::WithinBand) => "cannot tell (within the error band)",
        None => "-",
    }
}

/// How the fit/OOM column clears the model's reserved error, and what the band is made of.
pub fn plan_band(b: Band, ev: &BandEvidence) -> String {
    let pct = |x: f64| format!("{:.1}%", x * 100.0);
    let why = match b.rule {
        BandRule::OneCapture => format!(
            "the measured {} (one capture: every term is inferred, the safe mode)",
            pct(band::MEASURED)
        ),
        BandRule::Convolutions => format!(
            "the measured {} ({} requests come from convolutions, whose cuDNN workspaces the captures cannot give at another shape)",
            pct(band::MEASURED),
            ev.convolution_requests
        ),
        BandRule::InexactTerms => format!(
            "the measured {} ({} requests paired across the captures fit no exact term)",
            pct(band::MEASURED),
            ev.inexact_terms
        ),
        BandRule::Explained => format!(
            "this plan's own: {} of {} requests paired across {} captures, each on an exact term ({} inferred, {} of the recorded peak), so the band is the largest of {}, the allocator's {} segment against the cap ({}) and that inferred share, at most the measured {}",
            ev.exact_terms,
            ev.requests,
            ev.captures,
            ev.inferred,
            pct(b.inferred_share),
            pct(band::FLOOR),
            bytes(ev.segment_bytes),
            pct(b.segment_share),
            pct(band::MEASURED)
        ),
    };
    let replays: Vec<String> = ev
        .replays
        .iter()
        .map(|r| format!("{} off by {}", r.shape, pct(r.error())))
        .collect();
    format!(
        "under the cap: an OOM is said only where the replay also fails under the cap raised by {}, and a fit only where it also fits under the cap lowered by {}: {why}, or the model's replay error where larger (each capture's peaks replayed at its shape: {}); between them the column says it cannot tell, and the largest batch is the largest it says fits",
        pct(b.over),
        pct(b.under),
        replays.join(", ")
    )
}

/// The capture to take next and the commands that take it and plan from both.
pub fn plan_next_capture(n: NextCapture, recorded: Shape, file: &str) -> Vec<String> {
    let seq = recorded
        .seq
        .map(|s| format!(" --seq {s}"))
        .unwrap_or_default();
    vec![
        format!(
            "the two readings differ: a second capture at batch {} settles which requests grow (each request's term is then fitted from both sizes)",
            n.batch
        ),
        format!(
            "memscope run --snapshot-on exit --max-steps {} -o capture_b{} -- python train.py --batch {}",
            n.steps, n.batch, n.batch
        ),
        format!(
            "memscope plan {file} --batch {}{seq} --with capture_b{}/memscope-exit.pickle --with-batch {}",
            recorded.batch, n.batch, n.batch
        ),
    ]
}
