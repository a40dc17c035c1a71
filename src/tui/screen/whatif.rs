//! The what-if view (`x` on a finding with a fix): the fix, then `toolscope try`'s runs of the
//! original request and the fixed one against the engine — the session's recorded upstream,
//! which for `toolscope proxy` is the proxy's upstream — filling in as they finish, and per
//! variant the valid-call rate with its 95 % interval, the finish reasons and the findings that
//! remain. `o` shows the what-if session beside the original (`diff --against`).
//!
//! The runs are [`crate::record::whatif`]'s: [`crate::record::whatif::plan_variants`] and
//! [`crate::record::whatif::run_variants`], the code `toolscope try` runs, in a background task
//! ([`run`]) that reports through [`Message::Try`]; the UI task only draws what arrived.
//! Esc/q (or Ctrl-C) while runs go cancels them and keeps what finished.

use std::path::PathBuf;
use std::sync::Arc;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use tokio::sync::mpsc::UnboundedSender;

use crate::analysis::whatif::{RunOutcome, Tally};
use crate::finding::Fix;
use crate::record::whatif::{self as runs, VariantReport};
use crate::session::Header;
use crate::tui::analysis::ExchangeAnalysis;
use crate::tui::doc::Doc;
use crate::tui::keymap::Action;
use crate::tui::message::{Effect, Message};
use crate::tui::state::{Scroll, SessionView, State};
use crate::tui::theme::Theme;

use super::widgets::{block, draw_doc};

/// What a what-if job needs, taken from the selected exchange when `x` is pressed.
#[derive(Debug, Clone)]
pub struct TryJob {
    pub epoch: u64,
    /// Job number (later reports of an older job are dropped).
    pub job: u64,
    pub analysis: Arc<ExchangeAnalysis>,
    pub header: Header,
    /// The fix id to run (the finding's).
    pub fix: String,
    /// Runs per variant.
    pub runs: usize,
    /// The engine: the session's recorded upstream, or the live proxy's real one.
    pub url: Option<String>,
    /// True when `url` is the live proxy's own upstream.
    pub proxy: bool,

    /// The what-if session to record into.
    pub out: PathBuf,
}

impl PartialEq for TryJob {
    fn eq(&self, o: &TryJob) -> bool {
        (
            self.epoch, self.job, &self.fix, self.runs, &self.url, self.proxy, &self.out,
        ) == (o.epoch, o.job, &o.fix, o.runs, &o.url, o.proxy, &o.out)
    }
}

/// The what-if session to diff against the original, for the exchanges one job recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffJob {
    pub epoch: u64,
    pub job: u64,
    pub original: PathBuf,
    pub what_if: PathBuf,
    /// The what-if exchanges to show (this job's runs).
    pub exchanges: Vec<u64>,
}

/// What a job reports.
#[derive(Debug, Clone)]
pub enum TryReport {
    /// The variants planned: (name, fix, runs), and notes on fixes skipped.
    Planned {
        variants: Vec<(String, Option<Fix>, usize)>,
        notes: Vec<String>,
    },
    /// Run `index` of variant `variant` finished.
    Run {
        variant: usize,
        outcome: RunOutcome,
        exchange: Option<u64>,
        error: Option<String>,
    },
    /// The job ended: every variant's report (`complete` false when cancelled), or why it
    /// could not run.
    Done(Result<(Vec<VariantReport>, bool), String>),
    /// `o`: the `diff --against` text of this job's runs, or why not.
    Diffed(Result<String, String>),
}

/// One variant as the view shows it.
#[derive(Debug, Clone, Default)]
pub struct VariantView {
    pub name: String,
    pub fix: Option<Fix>,
    pub planned: usize,
    pub outcomes: Vec<RunOutcome>,
    pub exchanges: Vec<u64>,
    pub errors: Vec<String>,
}

/// Where the job is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    Running,
    /// Ended: `complete` false when cancelled.
    Done {
        complete: bool,
    },
    Failed(String),
}

/// The view's state.
#[derive(Debug, Clone)]
pub struct WhatIfView {
    pub job: u64,
    pub exchange: u64,
    pub rule: String,
    pub fix: Fix,
    pub runs: usize,
    pub url: Option<String>,
    /// True when `url` is the live proxy's own upstream.
    pub proxy: bool,
    /// The session file (the `toolscope try` command the view prints).
    pub session: String,
    pub out: PathBuf,
    pub phase: Phase,
    pub variants: Vec<VariantView>,
    pub notes: Vec<String>,
    /// `o`: the diff shown instead of the results (`None` while it is computed).
    pub diff: Option<Option<Result<String, String>>>,
    pub doc: Doc,
    pub scroll: Scroll,
}

impl WhatIfView {
    /// True while runs go.
    pub fn running(&self) -> bool {
        self.phase == Phase::Running
    }

    fn apply(&mut self, r: TryReport) {
        match r {
            TryReport::Planned { variants, notes } => {
                self.variants = variants
                    .into_iter()
                    .map(|(name, fix, planned)| VariantView {
                        name,
                        fix,
                        planned,
                        ..Default::default()
                    })
                    .collect();
                self.notes = notes;
            }
            TryReport::Run {
                variant,
                outcome,
                exchange,
                error,
            } => {
                if let Some(v) = self.variants.get_mut(variant) {
                    v.outcomes.push(outcome);
                    v.exchanges.extend(exchange);
                    v.errors.extend(error);
                }
            }
            TryReport::Done(Ok((reports, complete))) => {
                // the final word: the reports as `try` prints them
                for r in reports {
                    if let Some(v) = self.variants.iter_mut().find(|v| v.name == r.name) {
                        v.outcomes = r.runs;
                        v.exchanges = r.exchanges;
                    }
                }
                self.phase = Phase::Done { complete };
            }
            TryReport::Done(Err(e)) => self.phase = Phase::Failed(e),
            TryReport::Diffed(d) => {
                if self.diff.is_some() {
                    self.diff = Some(Some(d));
                }
            }
        }
    }

    /// Rebuilds the document from the state.
    pub fn rebuild(&mut self, theme: &Theme) {
        self.doc = match &self.diff {
            Some(d) => diff_doc(self, d.as_ref(), theme),
            None => build(self, theme),
        };
        let len = self.doc.lines.len();
        self.scroll.cursor = self.scroll.cursor.min(len.saturating_sub(1));
    }

    /// Every run exchange this job recorded.
    pub fn exchanges(&self) -> Vec<u64> {
        self.variants
            .iter()
            .flat_map(|v| v.exchanges.iter().copied())
            .collect()
    }
}

/// `x` on the Findings pane: the fix of the finding under the cursor, shown and run. Returns
/// the effects and a status line (no fix, no analysis).
pub(crate) fn open(
    s: &mut SessionView,
    findings: &[crate::finding::Finding],
    epoch: u64,
    job: u64,
    runs: usize,
    live_upstream: Option<String>,
    theme: &Theme,
) -> (Vec<Effect>, Option<String>) {
    let cursor = s.panes[crate::finding::Pane::Findings.index()].cursor;
    let item = s.docs[crate::finding::Pane::Findings.index()]
        .items
        .get(cursor)
        .copied()
        .flatten();
    let Some(f) = item.and_then(|i| findings.get(i)) else {
        return (Vec::new(), None);
    };
    let Some(fix) = f.fix.clone() else {
        return (
            Vec::new(),
            Some(format!(
                "{}: no fix for this finding (docs/check.md, Fixes)",
                f.rule.id()
            )),
        );
    };
    let Some(a) = s.analysis.clone() else {
        return (Vec::new(), None);
    };
    let mut v = WhatIfView {
        job,
        exchange: a.exchange.id,
        rule: f.rule.id().to_owned(),
        fix,
        runs,
        proxy: live_upstream.is_some(),
        url: live_upstream.or_else(|| s.source.header.upstream.clone()),
        session: s.source.name.clone(),
        out: runs::default_out(std::path::Path::new(&s.source.name)),
        phase: Phase::Running,
        variants: Vec::new(),
        notes: Vec::new(),
        diff: None,
        doc: Doc::default(),
        scroll: Scroll::default(),
    };
    let fx = start(&mut v, s, epoch, job, theme);
    s.whatif = Some(v);
    (fx, None)
}

/// Starts job `job` of view `v` (a fresh run of its fix).
fn start(v: &mut WhatIfView, s: &SessionView, epoch: u64, job: u64, theme: &Theme) -> Vec<Effect> {
    let Some(a) = s.analysis.clone().filter(|a| a.exchange.id == v.exchange) else {
        return Vec::new();
    };
    v.job = job;
    v.phase = Phase::Running;
    v.variants.clear();
    v.notes.clear();
    v.diff = None;
    v.rebuild(theme);
    vec![Effect::Try(Box::new(TryJob {
        epoch,
        job,
        analysis: a,
        header: s.source.header.clone(),
        fix: v.fix.id().to_owned(),
        runs: v.runs,
        url: v.url.clone(),
        proxy: v.proxy,
        out: v.out.clone(),
    }))]
}

/// A report of job `job` arrived.
pub(crate) fn on_report(s: &mut SessionView, job: u64, r: TryReport, theme: &Theme) {
    let Some(v) = s.whatif.as_mut().filter(|v| v.job == job) else {
        return;
    };
    v.apply(r);
    v.rebuild(theme);
}

/// A key while the view is open (`h`: its height in lines; `next_job`: the number a new run
/// takes). Returns the effects and a status line.
pub(crate) fn action(
    s: &mut SessionView,
    a: Action,
    h: usize,
    epoch: u64,
    next_job: u64,
    theme: &Theme,
) -> Vec<Effect> {
    let Some(mut v) = s.whatif.take() else {
        return Vec::new();
    };
    let len = v.doc.lines.len();
    let mut fx = Vec::new();
    match a {
        Action::Up => v.scroll.move_by(-1, len, h),
        Action::Down => v.scroll.move_by(1, len, h),
        Action::PageUp => v.scroll.move_by(-(h as isize), len, h),
        Action::PageDown => v.scroll.move_by(h as isize, len, h),
        Action::Top => v.scroll.set(0, len, h),
        Action::Bottom => v.scroll.set(len.saturating_sub(1), len, h),
        Action::Wrap => s.wrap = !s.wrap,
        Action::Back if v.running() => fx.push(Effect::CancelTry),
        Action::Back => return Vec::new(),
        Action::MoreRuns | Action::FewerRuns if !v.running() => {
            v.runs = if a == Action::MoreRuns {
                v.runs + 1
            } else {
                v.runs.saturating_sub(1).max(1)
            };
            v.rebuild(theme);
        }
        Action::TryFix if !v.running() => fx = start(&mut v, s, epoch, next_job, theme),
        Action::WhatIfDiff if v.diff.is_some() => {
            v.diff = None;
            v.rebuild(theme);
        }
        Action::WhatIfDiff if !v.running() && !v.exchanges().is_empty() => {
            v.diff = Some(None);
            v.scroll = Scroll::default();
            v.rebuild(theme);
            fx.push(Effect::TryDiff(DiffJob {
                epoch,
                job: v.job,
                original: PathBuf::from(&s.source.name),
                what_if: v.out.clone(),
                exchanges: v.exchanges(),
            }));
        }
        _ => {}
    }
    s.whatif = Some(v);
    fx
}

/// Why a recorded session's upstream cannot be run against.
pub const REDACTED_UPSTREAM: &str = "the session's upstream credentials were redacted when recorded; run it from a shell with --url";

/// Why a recorded session's upstream is not run against from the inspector: a session file
/// can come from anyone, and one key would replay its requests, K times per variant, to any
/// host it names. The live proxy's own upstream and loopback addresses are run against.
pub const NOT_LOOPBACK: &str = "the session's recorded upstream is not a loopback address: the inspector replays requests only to 127.0.0.1/localhost or the live proxy's upstream; run it from a shell with --url";

/// Whether `url`'s host is `localhost` or a loopback IP.
fn loopback(url: &str) -> bool {
    let Ok(u) = url.parse::<hyper::Uri>() else {
        return false;
    };
    let Some(host) = u.host() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The background task of a what-if job: plans the variants and runs them as `toolscope try`
/// does, reporting the plan, each finished run and the end to `tx`. `cancel` stops it after
/// the runs that finished.
pub async fn run(
    job: Box<TryJob>,
    cancel: impl std::future::Future<Output = ()>,
    tx: UnboundedSender<Message>,
) {
    let send = |report| {
        let _ = tx.send(Message::Try {
            epoch: job.epoch,
            job: job.job,
            report,
        });
    };
    let result = async {
        let original = &job.analysis.exchange;
        let request = original
            .request_json()
            .ok_or_else(|| format!("exchange #{}: request body is not JSON", original.id))?;
        let (variants, notes) = runs::plan_variants(
            std::slice::from_ref(&job.fix),
            None,
            &job.header,
            original,
            &request,
            &job.analysis.analysed,
        )
        .map_err(|e| format!("{e:#}"))?;
        let url = job.url.clone().ok_or_else(|| {
            "the session names no upstream to run against; run it from a shell with --url"
                .to_owned()
        })?;
        if !job.proxy && url.contains(crate::session::redact::REDACTED) {
            return Err(REDACTED_UPSTREAM.to_owned());
        }
        if !job.proxy && !loopback(&url) {
            return Err(NOT_LOOPBACK.to_owned());
        }
        if !original.request.method.eq_ignore_ascii_case("POST") {
            return Err(format!(
                "exchange #{} is a {} request: what-if runs replay chat requests (POST) only",
                original.id,
                crate::text::visible(&original.request.method)
            ));
        }
        send(TryReport::Planned {
            variants: variants
                .iter()
                .map(|v| (v.name.clone(), v.fix.clone(), runs::runs_of(v, job.runs)))
                .collect(),
            notes,
        });
        let opts = runs::TryOptions {
            url,
            session: job.out.clone(),
            engine: job
                .header
                .engine
                .as_ref()
                .map(|e| e.kind.clone())
                .unwrap_or_else(crate::session::ServerKind::unknown),
            seed: None,
            headers: Vec::new(),
            timeout: runs::DEFAULT_TIMEOUT,
        };
        let progress = |p: runs::Progress<'_>| {
            let variant = variants
                .iter()
                .position(|v| std::ptr::eq(v, p.variant))
                .unwrap_or(0);
            send(TryReport::Run {
                variant,
                outcome: p.outcome.clone(),
                exchange: p.run.exchange.as_ref().map(|e| e.id),
                error: p.run.error.clone(),
            });
        };
        let run = runs::Job {
            original,
            header: &job.header,
            request: &request,
            variants: &variants,
            runs: job.runs,
            opts: &opts,
        };
        runs::run_variants(run, cancel, progress)
            .await
            .map_err(|e| format!("{e:#}"))
    }
    .await;
    send(TryReport::Done(result));
}

/// ` · o: diff against the original` when the job recorded run exchanges (what `o` diffs;
/// after a cancel before any run, or with parser-only variants, there is nothing to diff).
fn diff_key(v: &WhatIfView) -> &'static str {
    if v.exchanges().is_empty() {
        ""
    } else {
        " · o: diff against the original"
    }
}

/// The `diff --against` text of a job's runs (off the UI task).
pub fn diff(job: &DiffJob) -> Result<String, String> {
    let read = |p: &std::path::Path| {
        crate::session::read_session(p).map_err(|e| format!("{}: {e}", p.display()))
    };
    let a = read(&job.original)?;
    let b = read(&job.what_if)?;
    let diffs: Vec<_> = crate::analysis::whatif::session_diffs(&a, &b)
        .into_iter()
        .filter(|d| job.exchanges.contains(&d.b))
        .collect();
    Ok(crate::diff::sessions::render_text(&diffs))
}

/// The results document.
fn build(v: &WhatIfView, theme: &Theme) -> Doc {
    let st = &theme.styles;
    let mut d = Doc::default();
    let line = |d: &mut Doc, spans: Vec<Span<'static>>| d.lines.push(Line::from(spans));
    let field = |d: &mut Doc, name: &str, value: String| {
        d.lines.push(Line::from(vec![
            Span::styled(format!("{name:<10}"), st.muted),
            Span::styled(value, st.base),
        ]))
    };
    field(&mut d, "finding", v.rule.clone());
    field(
        &mut d,
        "fix",
        format!("{}: {}", v.fix.id(), crate::text::visible(&v.fix.change)),
    );
    field(
        &mut d,
        "engine",
        format!(
            "{} ({})",
            v.url
                .as_deref()
                .map(|u| crate::text::visible(&crate::session::redact::redact_url(u)).into_owned())
                .unwrap_or_else(|| "none recorded".into()),
            if v.proxy {
                "the proxy's upstream".to_owned()
            } else {
                format!("exchange #{}'s recorded upstream", v.exchange)
            }
        ),
    );
    field(
        &mut d,
        "runs",
        format!(
            "{} per variant: the original and the fix (+/- change it, x runs again)",
            v.runs
        ),
    );
    field(
        &mut d,
        "recorded",
        format!("{} (labels try:{}:<variant>)", v.out.display(), v.exchange),
    );
    for n in &v.notes {
        line(&mut d, vec![Span::styled(n.clone(), st.muted)]);
    }
    let (done, total): (usize, usize) = v
        .variants
        .iter()
        .fold((0, 0), |(d, t), x| (d + x.outcomes.len(), t + x.planned));
    let phase = match &v.phase {
        Phase::Running if v.variants.is_empty() => Span::styled("planning…", st.info),
        Phase::Running => Span::styled(
            format!("running: {done}/{total} runs finished (Esc cancels, keeps them)"),
            st.info,
        ),
        Phase::Done { complete: true } => Span::styled(
            format!("finished: {done}/{total} runs{}", diff_key(v)),
            st.status_ok,
        ),
        Phase::Done { complete: false } => Span::styled(
            format!(
                "cancelled: {done}/{total} runs finished (kept){}",
                diff_key(v)
            ),
            st.severity_warning,
        ),
        Phase::Failed(e) => Span::styled(
            format!("could not run: {}", crate::text::visible(e)),
            st.severity_error,
        ),
    };
    line(&mut d, vec![phase]);
    try_hint(&mut d, v, theme);
    for x in &v.variants {
        d.lines.push(Line::default());
        let t = Tally::of(&x.outcomes);
        let mut head = vec![Span::styled(format!("{:<18} ", x.name), st.title)];
        head.push(Span::styled(
            format!("{}/{} runs  ", x.outcomes.len(), x.planned),
            st.muted,
        ));
        head.push(Span::styled(t.rate_line(), st.base));
        line(&mut d, head);
        if t.runs == 0 {
            continue;
        }
        line(
            &mut d,
            vec![
                Span::styled("  finish:   ", st.muted),
                Span::styled(crate::text::visible(&t.finish_line()).into_owned(), st.base),
            ],
        );
        line(
            &mut d,
            vec![
                Span::styled("  findings: ", st.muted),
                Span::styled(
                    crate::text::visible(&t.findings_line()).into_owned(),
                    st.base,
                ),
            ],
        );
        if t.unstable() {
            line(
                &mut d,
                vec![Span::styled(
                    "  UNSTABLE: the outcome changed between runs of the same request",
                    st.severity_warning,
                )],
            );
        } else if t.runs > 1 {
            line(
                &mut d,
                vec![Span::styled(
                    "  repeatable: the same outcome in every run",
                    st.muted,
                )],
            );
        }
        for (l, n) in &t.outcomes {
            line(
                &mut d,
                vec![
                    Span::styled(format!("    ×{n} "), st.muted),
                    Span::styled(crate::text::visible(l).into_owned(), st.base),
                ],
            );
        }
        for e in &x.errors {
            line(
                &mut d,
                vec![Span::styled(
                    format!("    error: {}", crate::text::visible(e)),
                    st.severity_error,
                )],
            );
        }
    }
    d.items = vec![Some(0); d.lines.len()];
    d
}

/// A job that could not run: the `toolscope try` command to run it from a shell.
fn try_hint(d: &mut Doc, v: &WhatIfView, theme: &Theme) {
    let st = &theme.styles;
    let line = |d: &mut Doc, spans: Vec<Span<'static>>| d.lines.push(Line::from(spans));
    if matches!(v.phase, Phase::Failed(_)) {
        line(
            d,
            vec![Span::styled(
                format!(
                    "from a shell, with the options it needs (--template SRC, --url URL): \
                     toolscope try {} --exchange {} --fix {}",
                    crate::text::visible(&v.session),
                    v.exchange,
                    v.fix.id()
                ),
                st.muted,
            )],
        );
    }
}

/// The diff document (`o`).
fn diff_doc(v: &WhatIfView, d: Option<&Result<String, String>>, theme: &Theme) -> Doc {
    let st = &theme.styles;
    let mut doc = Doc::default();
    doc.lines.push(Line::from(Span::styled(
        format!("A: the original #{} · B: {}", v.exchange, v.out.display()),
        st.muted,
    )));
    match d {
        None => doc
            .lines
            .push(Line::from(Span::styled("diffing the sessions…", st.info))),
        Some(Err(e)) => doc.lines.push(Line::from(Span::styled(
            crate::text::visible(e).into_owned(),
            st.severity_error,
        ))),
        Some(Ok(text)) => {
            for l in text.lines() {
                doc.lines.push(Line::from(Span::styled(
                    crate::text::visible(l).into_owned(),
                    st.base,
                )));
            }
        }
    }
    doc.items = vec![Some(0); doc.lines.len()];
    doc
}

/// Draws the view over the list and panes.
pub(crate) fn draw(state: &State, f: &mut Frame, area: Rect, v: &WhatIfView) {
    let title = match (&v.diff, &v.phase) {
        (Some(_), _) => format!(
            "What-if · #{} · diff --against the original (o: results)",
            v.exchange
        ),
        (None, Phase::Running) => format!("What-if · #{} · {} · running…", v.exchange, v.fix.id()),
        (None, _) => format!("What-if · #{} · {}", v.exchange, v.fix.id()),
    };
    let b = block(&title, true, state);
    let inner = b.inner(area);
    f.render_widget(b, area);
    draw_doc(state, f, inner, &v.doc, v.scroll, false, None);
}
