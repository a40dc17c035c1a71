//! The inspector's state and its update step. Owned by the UI task; changed only by
//! [`State::on_event`] (input) and [`State::on_message`] (background reports), which return the
//! [`Effect`]s to start. Drawing ([`super::draw`], the areas in [`super::screen`]) reads it.

use std::path::PathBuf;
use std::sync::Arc;

use crossterm::event::{Event, KeyCode, KeyEventKind, MouseButton, MouseEventKind};
use ratatui::layout::{Position, Rect};

use crate::finding::{Finding, Pane};

use super::analysis::{Chunking, ExchangeAnalysis, Summary};
use super::doc::{self, Doc, Modes};
use super::keymap::{Action, Ctx, Key, Keymap};
use super::layout;
use super::message::{Effect, Message};
use super::screen::browser::{Browser, BrowserEntry};
use super::screen::findings::{findings_of, jump_to_evidence};
use super::screen::list::{Filter, put_summary, row_text, select_row};
use super::screen::loop_view;
use super::screen::replay::replay_action;
use super::screen::template::{DiffView, diff_action, diff_unavailable};
use super::screen::tools;
use super::screen::whatif;
use super::theme::Theme;
use crate::session::index::SessionSource;

pub use super::layout::{ListLayout, PANES};

/// Which part has the keyboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    List,
    Detail,
}

/// A popup over the screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlay {
    None,
    /// `?` help, scrolled by this many lines.
    Help(usize),
    /// A one-line prompt at the bottom.
    Input {
        kind: InputKind,
        text: String,
    },
    /// `quit toolscope? (y/n)` after q/Esc at the top level (mitmproxy's habit: y or a second
    /// q quits, anything else stays).
    ConfirmQuit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    Search,
    Filter,
}

/// Cursor and scroll of a scrollable list or document.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scroll {
    pub cursor: usize,
    pub offset: usize,
}

impl Scroll {
    /// Moves the cursor by `delta` within `len` rows and keeps it inside a window of `height`.
    pub fn move_by(&mut self, delta: isize, len: usize, height: usize) {
        if len == 0 {
            *self = Scroll::default();
            return;
        }
        self.cursor = (self.cursor as isize + delta).clamp(0, len as isize - 1) as usize;
        self.follow(height);
    }

    pub fn set(&mut self, cursor: usize, len: usize, height: usize) {
        self.cursor = cursor.min(len.saturating_sub(1));
        self.follow(height);
    }

    fn follow(&mut self, height: usize) {
        let h = height.max(1);
        if self.cursor < self.offset {
            self.offset = self.cursor;
        } else if self.cursor >= self.offset + h {
            self.offset = self.cursor + 1 - h;
        }
    }
}

/// An active search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Search {
    pub query: String,
    /// Matching lines (rows for the list).
    pub matches: Vec<usize>,
    pub current: usize,
}

/// The open session.
#[derive(Debug, Clone)]
pub struct SessionView {
    pub source: Arc<SessionSource>,
    pub summaries: Vec<Option<Summary>>,
    pub summarized: usize,
    /// Rows whose summary is analysed (tool calls and findings counted; see
    /// [`Summary::analyzed`]). The background analysis runs until this reaches the row count.
    pub analyzed: usize,
    /// Rows shown (after the filter), as indices into `source.rows`.
    pub visible: Vec<usize>,
    pub filter: String,
    pub list: Scroll,
    pub focus: Focus,
    /// The detail pane shown.
    pub pane: Pane,
    pub analysis: Option<Arc<ExchangeAnalysis>>,
    /// Row being analysed.
    pub analyzing: Option<usize>,
    pub cache: super::analysis::Lru<Arc<ExchangeAnalysis>>,
    pub panes: [Scroll; 6],
    pub docs: [Doc; 6],
    pub modes: Modes,
    /// Stream pane: show the selected event's JSON full size.
    pub stream_zoom: bool,
    /// Text panes wrap long lines (`w`).
    pub wrap: bool,
    /// Template pane: the side-by-side diff view, when open.
    pub diff: Option<DiffView>,
    /// Replay chunking shown.
    pub chunking: Chunking,
    pub step: usize,
    /// Replay right side.
    pub server_doc: Doc,
    /// Replay: the engines view (`e`), shown instead of the server stream when open.
    pub replay_engines: super::screen::engines::EnginesView,
    /// Replay: lines the right half (server stream or engines view) is scrolled by (`J`/`K`);
    /// back to 0 when the exchange or the view changes.
    pub side_scroll: usize,
    /// Replay: the largest useful [`Self::side_scroll`] as the right half was last drawn (its
    /// wrapped rows below the title that do not fit; `usize::MAX` before the first draw).
    pub side_max: std::cell::Cell<usize>,
    pub search: Option<Search>,
    pub session_findings: Vec<Finding>,
    /// Live proxy session (rows arrive while open).
    pub live: bool,
    /// Live rows with a summary request in flight / changed again since.
    pub live_pending: std::collections::HashSet<usize>,
    pub live_dirty: std::collections::HashSet<usize>,
    /// The selected exchange changed while its analysis was running.
    pub analysis_stale: bool,
    /// The loop view (`L`), when open.
    pub loop_view: Option<super::screen::loop_view::LoopView>,
    /// The what-if view (`x` on a finding with a fix), when open.
    pub whatif: Option<super::screen::whatif::WhatIfView>,
}

/// Indexing progress.
#[derive(Debug, Clone, PartialEq)]
pub struct Loading {
    pub what: String,
    pub done: u64,
    pub total: u64,
}

/// Which screen is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screen {
    Browser,
    Session,
}

/// The whole UI state.
#[derive(Debug, Clone)]
pub struct State {
    pub keymap: Keymap,
    pub theme: Theme,
    /// Terminal size (columns, rows).
    pub size: (u16, u16),
    pub screen: Screen,
    pub browser: Option<Browser>,
    pub session: Option<SessionView>,
    pub overlay: Overlay,
    /// One-line status (errors, "copied …").
    pub status: Option<String>,
    pub loading: Option<Loading>,
    pub quit: bool,
    /// Bumped when another session opens; stale messages are dropped.
    pub epoch: u64,
    /// How tall the exchange list is (`-` switches).
    pub layout: ListLayout,
    /// What-if jobs started so far (a job's number tells its reports from an older job's).
    pub try_jobs: u64,
    /// `toolscope proxy`'s real upstream (credentials included; never shown): what-if runs
    /// from the live view go there, not to the header's redacted copy.
    pub live_upstream: Option<String>,
}

/// Analysed exchanges kept for quick re-selection: at most this many…
const CACHE: usize = 8;
/// …and at most this many bytes of their session lines (the newest is always kept).
const CACHE_BYTES: u64 = 64 << 20;

impl State {
    /// A state showing a browser over `files` (several files, or a sessions folder), or the
    /// single file directly. Returns the effects to start.
    pub fn new(keymap: Keymap, theme: Theme, size: (u16, u16)) -> State {
        State {
            keymap,
            theme,
            size,
            screen: Screen::Browser,
            browser: None,
            session: None,
            overlay: Overlay::None,
            status: None,
            loading: None,
            quit: false,
            epoch: 0,
            layout: ListLayout::Fit,
            try_jobs: 0,
            live_upstream: None,
        }
    }

    /// Opens the browser over `files` (`dir` = the folder they came from, for the empty state).
    /// One file (and no folder) opens directly.
    pub fn open_files(&mut self, files: Vec<PathBuf>, dir: Option<PathBuf>) -> Vec<Effect> {
        if files.len() == 1 && dir.is_none() {
            return self.open_session(files[0].clone());
        }
        let entries = files
            .into_iter()
            .map(|path| {
                let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                let info = crate::session::index::first_line(&path, 64 * 1024)
                    .and_then(|l| serde_json::from_str::<crate::session::Line>(&l).ok())
                    .map(|l| match l {
                        crate::session::Line::Header(h) => {
                            // "llama-server b11434 · SmolLM2-135M-Instruct.Q4_1.gguf": the model's
                            // file name, not its path on the recording machine.
                            let engine = h
                                .engine
                                .map(|e| {
                                    let model = e.model.unwrap_or_default();
                                    let model = model.rsplit(['/', '\\']).next().unwrap_or("");
                                    let mut s = e.kind.to_string();
                                    if let Some(v) = e.version.as_deref() {
                                        s = format!("{s} {}", v.trim_end_matches("-unknown"));
                                    }
                                    if !model.is_empty() {
                                        s = format!("{s} · {model}");
                                    }
                                    s
                                })
                                .unwrap_or_default();
                            // RFC 3339 to the minute, as a list shows it.
                            let created: String =
                                h.created.replace('T', " ").chars().take(16).collect();
                            format!("{created}  {engine}")
                        }
                        _ => String::new(),
                    })
                    .unwrap_or_else(|| {
                        if path.extension().is_some_and(|e| e == "har") {
                            "HAR".into()
                        } else {
                            String::new()
                        }
                    });
                BrowserEntry {
                    path,
                    size,
                    info,
                    survey: None,
                }
            })
            .collect::<Vec<_>>();
        let paths = entries.iter().map(|e| e.path.clone()).collect::<Vec<_>>();
        self.browser = Some(Browser {
            entries,
            scroll: Scroll::default(),
            dir,
        });
        self.screen = Screen::Browser;
        if paths.is_empty() {
            Vec::new()
        } else {
            vec![Effect::Survey { paths }]
        }
    }

    /// Starts indexing `path`.
    pub fn open_session(&mut self, path: PathBuf) -> Vec<Effect> {
        self.epoch += 1;
        self.loading = Some(Loading {
            what: path.display().to_string(),
            done: 0,
            total: 0,
        });
        vec![Effect::Open {
            epoch: self.epoch,
            path,
        }]
    }

    /// Shows an in-memory session (live proxy, tests).
    pub fn show_source(&mut self, source: Arc<SessionSource>, live: bool) -> Vec<Effect> {
        self.epoch += 1;
        let n = source.len();
        let session_findings = super::analysis::session_findings(&source.name, &source.warnings);
        self.session = Some(SessionView {
            summaries: vec![None; n],
            summarized: 0,
            analyzed: 0,
            visible: (0..n).collect(),
            filter: String::new(),
            list: Scroll::default(),
            focus: Focus::List,
            pane: Pane::Tools,
            analysis: None,
            analyzing: None,
            cache: super::analysis::Lru::new(CACHE, CACHE_BYTES),
            panes: Default::default(),
            docs: Default::default(),
            modes: Modes::default(),
            stream_zoom: false,
            wrap: false,
            diff: None,
            chunking: Chunking::Recorded,
            step: 0,
            server_doc: Doc::default(),
            replay_engines: Default::default(),
            side_scroll: 0,
            side_max: std::cell::Cell::new(usize::MAX),
            search: None,
            session_findings,
            live,
            live_pending: Default::default(),
            live_dirty: Default::default(),
            analysis_stale: false,
            loop_view: None,
            whatif: None,
            source,
        });
        self.screen = Screen::Session;
        self.loading = None;
        let mut fx = Vec::new();
        if n > 0 {
            let h = self.list_height();
            fx.push(Effect::Summarize {
                epoch: self.epoch,
                rows: 0..n.min(h + 1),
            });
            fx.push(Effect::Summarize {
                epoch: self.epoch,
                rows: h + 1..n,
            });
            fx.push(Effect::Diagnose {
                epoch: self.epoch,
                rows: 0..n,
            });
            fx.push(Effect::Analyze {
                epoch: self.epoch,
                row: 0,
            });
            if let Some(s) = &mut self.session {
                s.analyzing = Some(0);
            }
        }
        fx
    }

    /// What the screen geometry depends on ([`layout::areas`]).
    pub fn shape(&self) -> layout::Shape {
        layout::Shape {
            session_rows: match (self.screen, &self.session) {
                (Screen::Session, Some(s)) => Some(s.visible.len()),
                _ => None,
            },
            layout: self.layout,
        }
    }

    /// The largest help scroll offset at the terminal size (the last line at the bottom).
    pub fn help_max_offset(&self) -> usize {
        let area = Rect::new(0, 0, self.size.0, self.size.1);
        layout::help_lines(&self.keymap, &self.theme)
            .len()
            .saturating_sub(layout::help_height(area))
    }

    /// Rows the exchange list shows at the current size.
    pub fn list_height(&self) -> usize {
        let areas = layout::areas(Rect::new(0, 0, self.size.0, self.size.1), self.shape());
        areas.list.height.saturating_sub(3) as usize
    }

    fn pane_height(&self) -> usize {
        let areas = layout::areas(Rect::new(0, 0, self.size.0, self.size.1), self.shape());
        areas.pane.height.saturating_sub(2) as usize
    }

    /// Contexts for key lookup, most specific first.
    pub fn contexts(&self) -> Vec<Ctx> {
        match (self.screen, &self.session) {
            (Screen::Session, Some(s)) if s.whatif.is_some() => vec![Ctx::WhatIf],
            (Screen::Session, Some(s)) if s.loop_view.is_some() => vec![Ctx::Loop],
            (Screen::Session, Some(s)) => match s.focus {
                Focus::List => vec![Ctx::List],
                Focus::Detail if s.pane == Pane::Template && s.diff.is_some() => vec![Ctx::Diff],
                Focus::Detail => {
                    let p = match s.pane {
                        Pane::Tools => Ctx::Tools,
                        Pane::Template => Ctx::Template,
                        Pane::Stream => Ctx::Stream,
                        Pane::Replay => Ctx::Replay,
                        Pane::Findings => Ctx::Findings,
                        Pane::Schema => Ctx::Detail,
                    };
                    vec![p, Ctx::Detail]
                }
            },
            _ => vec![Ctx::Browser],
        }
    }

    /// Handles a background report.
    pub fn on_message(&mut self, msg: Message) -> Vec<Effect> {
        match msg {
            Message::IndexProgress { epoch, done, total } if epoch == self.epoch => {
                if let Some(l) = &mut self.loading {
                    l.done = done;
                    l.total = total;
                }
                Vec::new()
            }
            Message::Opened { epoch, result } if epoch == self.epoch => match result {
                Ok(src) => self.show_source(src, false),
                Err(e) => {
                    self.loading = None;
                    self.status = Some(e);
                    Vec::new()
                }
            },
            Message::Summaries { epoch, items } if epoch == self.epoch => {
                let mut fx = Vec::new();
                if let Some(s) = &mut self.session {
                    for (row, sum) in items {
                        if s.live_pending.remove(&row) && s.live_dirty.remove(&row) {
                            s.live_pending.insert(row);
                            fx.push(Effect::Diagnose {
                                epoch,
                                rows: row..row + 1,
                            });
                        }
                        put_summary(s, row, sum);
                    }
                }
                if self.session.as_ref().is_some_and(|s| !s.filter.is_empty()) {
                    self.apply_filter();
                }
                fx
            }
            Message::Analyzed {
                epoch,
                row,
                analysis,
            } if epoch == self.epoch => {
                let h = self.pane_height();
                let theme = self.theme.clone();
                if let Some(s) = &mut self.session {
                    let weight = s.source.rows.get(row).map_or(0, |r| r.len);
                    s.cache.insert(row, analysis.clone(), weight);
                    put_summary(s, row, analysis.summary.clone());
                    if s.analyzing == Some(row)
                        || s.live && s.analysis.as_ref().is_some_and(|a| a.row == row)
                    {
                        let same = s.analysis.as_ref().is_some_and(|a| a.row == row);
                        s.analysis = Some(analysis);
                        s.analyzing = None;
                        if !same {
                            s.panes = Default::default();
                            s.step = 0;
                            s.side_scroll = 0;
                            s.modes.collapsed.clear();
                            s.diff = None;
                        }
                        rebuild_all(s, &theme);
                        for p in s.panes.iter_mut() {
                            p.follow(h);
                        }
                    }
                    if std::mem::take(&mut s.analysis_stale)
                        && let Some(&sel) = s.visible.get(s.list.cursor)
                    {
                        s.analyzing = Some(sel);
                        return vec![Effect::Analyze { epoch, row: sel }];
                    }
                }
                Vec::new()
            }
            Message::Record(ev) => self.on_record(ev),
            Message::Looped { epoch, data } if epoch == self.epoch => {
                if let Some(v) = self.session.as_mut().and_then(|s| s.loop_view.as_mut()) {
                    v.set(data, &self.theme);
                }
                Vec::new()
            }
            Message::Try { epoch, job, report } if epoch == self.epoch => {
                if let Some(s) = &mut self.session {
                    super::screen::whatif::on_report(s, job, report, &self.theme);
                }
                Vec::new()
            }
            Message::Surveyed { path, survey } => {
                if let Some(e) = self
                    .browser
                    .as_mut()
                    .and_then(|b| b.entries.iter_mut().find(|e| e.path == path))
                {
                    e.survey = Some(survey);
                }
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    fn on_record(&mut self, ev: crate::record::recorder::RecordEvent) -> Vec<Effect> {
        if let crate::record::recorder::RecordEvent::Warning(w) = &ev {
            self.status = Some(format!("recorder: {w}"));
            return Vec::new();
        }
        let epoch = self.epoch;
        let Some(s) = &mut self.session else {
            return Vec::new();
        };
        let Some(row) = super::live::apply_record(Arc::make_mut(&mut s.source), &ev) else {
            return Vec::new();
        };
        let engine_learnt = matches!(
            &ev,
            crate::record::recorder::RecordEvent::Annotated(
                crate::session::Annotation::Engine { .. }
            )
        );
        if !engine_learnt {
            return self.live_changed(row, epoch);
        }
        // The header now names the engine and its /props (template, BOS): every row recorded
        // so far is analysed again with them.
        let rows = s.source.rows.len();
        (0..rows)
            .flat_map(|r| self.live_changed(r, epoch))
            .collect()
    }

    /// A live row changed: re-summarize it and re-analyse it when selected, at most one
    /// request in flight per row (later changes are picked up when it returns).
    fn live_changed(&mut self, row: usize, epoch: u64) -> Vec<Effect> {
        let Some(s) = &mut self.session else {
            return Vec::new();
        };
        if row >= s.summaries.len() {
            s.summaries.resize(row + 1, None);
            if s.filter.is_empty() {
                s.visible.push(row);
            }
        }
        s.cache.remove(&row);
        let mut fx = Vec::new();
        if s.live_pending.insert(row) {
            fx.push(Effect::Diagnose {
                epoch,
                rows: row..row + 1,
            });
        } else {
            s.live_dirty.insert(row);
        }
        let selected = s.visible.get(s.list.cursor).copied();
        if selected == Some(row) || s.analysis.is_none() {
            if s.analyzing.is_none() {
                s.analyzing = Some(row);
                fx.push(Effect::Analyze { epoch, row });
            } else {
                s.analysis_stale = true;
            }
        }
        fx
    }

    /// Handles a terminal event.
    pub fn on_event(&mut self, ev: &Event) -> Vec<Effect> {
        match ev {
            Event::Resize(w, h) => {
                self.size = (*w, *h);
                Vec::new()
            }
            Event::Key(k) if k.kind != KeyEventKind::Release => {
                use crossterm::event::KeyModifiers;
                let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
                if self.overlay == Overlay::ConfirmQuit {
                    self.overlay = Overlay::None;
                    self.status = None;
                    match k.code {
                        KeyCode::Char('y' | 'Y' | 'q') if !ctrl => self.quit = true,
                        KeyCode::Char('c') if ctrl => self.quit = true,
                        _ => {}
                    }
                    return Vec::new();
                }
                if let Overlay::Input { kind, text } = &mut self.overlay {
                    let kind = *kind;
                    // Readline line editing: Ctrl-U kills the line, Ctrl-W the word before the
                    // cursor, Ctrl-H is Backspace; other control/alt chords insert nothing.
                    match k.code {
                        KeyCode::Esc => self.overlay = Overlay::None,
                        KeyCode::Enter => {
                            let q = text.clone();
                            self.overlay = Overlay::None;
                            return self.submit(kind, q);
                        }
                        KeyCode::Backspace => {
                            text.pop();
                        }
                        KeyCode::Char('c') if ctrl => self.quit = true,
                        KeyCode::Char('u') if ctrl => text.clear(),
                        KeyCode::Char('h') if ctrl => {
                            text.pop();
                        }
                        KeyCode::Char('w') if ctrl => {
                            let kept = text.trim_end().len();
                            text.truncate(kept);
                            let cut = text.rfind(char::is_whitespace).map_or(0, |i| i + 1);
                            text.truncate(cut);
                        }
                        KeyCode::Char(_) if ctrl || k.modifiers.contains(KeyModifiers::ALT) => {}
                        KeyCode::Char(c) => text.push(c),
                        _ => {}
                    }
                    return Vec::new();
                }
                if ctrl && k.code == KeyCode::Char('c') && self.busy() {
                    // Ctrl-C stops the what-if runs (what finished is kept), not the inspector
                    return vec![Effect::CancelTry];
                }
                let key = Key::from_event(k);
                let ctxs = self.contexts();
                match self.keymap.action(key, &ctxs) {
                    Some(a) => self.on_action(a),
                    None => Vec::new(),
                }
            }
            Event::Mouse(m) => self.on_mouse(m.kind, m.column, m.row),
            _ => Vec::new(),
        }
    }

    /// Performs an action in the current context.
    pub fn on_action(&mut self, action: Action) -> Vec<Effect> {
        if action == Action::Quit {
            self.quit = true;
            return Vec::new();
        }
        if let Overlay::Help(off) = self.overlay {
            // Only the help and back keys close the help; moving keys scroll it.
            let max = self.help_max_offset();
            let page = layout::help_height(Rect::new(0, 0, self.size.0, self.size.1)).max(1);
            let off = match action {
                Action::Back | Action::Help => {
                    self.overlay = Overlay::None;
                    return Vec::new();
                }
                Action::Down | Action::Right => off + 1,
                Action::Up | Action::Left => off.saturating_sub(1),
                Action::PageDown => off + page,
                Action::PageUp => off.saturating_sub(page),
                Action::Top | Action::StepFirst => 0,
                Action::Bottom | Action::StepLast => max,
                _ => off,
            };
            self.overlay = Overlay::Help(off.min(max));
            return Vec::new();
        }
        self.status = None;
        match action {
            Action::Help => {
                self.overlay = Overlay::Help(0);
                return Vec::new();
            }
            Action::Search => {
                self.overlay = Overlay::Input {
                    kind: InputKind::Search,
                    text: String::new(),
                };
                return Vec::new();
            }
            Action::Filter => {
                let cur = self
                    .session
                    .as_ref()
                    .map(|s| s.filter.clone())
                    .unwrap_or_default();
                self.overlay = Overlay::Input {
                    kind: InputKind::Filter,
                    text: cur,
                };
                return Vec::new();
            }
            _ => {}
        }
        match self.screen {
            Screen::Browser => self.browser_action(action),
            Screen::Session => self.session_action(action),
        }
    }

    /// q/Esc at the top level: ask before quitting.
    pub(crate) fn confirm_quit(&mut self) {
        self.overlay = Overlay::ConfirmQuit;
    }

    fn session_action(&mut self, action: Action) -> Vec<Effect> {
        if action == Action::Layout {
            self.layout = match self.layout {
                ListLayout::Fit => ListLayout::Fixed,
                ListLayout::Fixed => ListLayout::Fit,
            };
            return Vec::new();
        }
        let lh = self.list_height();
        let ph = self.pane_height();
        let epoch = self.epoch;
        let Some(s) = &mut self.session else {
            return Vec::new();
        };
        let theme = self.theme.clone();
        if s.loop_view.is_some() {
            let vh = loop_height(self.size, self.layout);
            let (fx, status) =
                loop_view::action(s, action, vh, |s| select_row(s, epoch, lh, &theme, ph));
            if status.is_some() {
                self.status = status;
            }
            return fx;
        }
        if s.whatif.is_some() {
            let vh = loop_height(self.size, self.layout);
            self.try_jobs += 1;
            return whatif::action(s, action, vh, epoch, self.try_jobs, &theme);
        }
        if action == Action::LoopView {
            return loop_view::open(s, epoch);
        }
        if action == Action::TryFix && s.focus == Focus::Detail && s.pane == Pane::Findings {
            self.try_jobs += 1;
            let findings = findings_of(s);
            let (fx, status) = whatif::open(
                s,
                &findings,
                epoch,
                self.try_jobs,
                crate::record::whatif::DEFAULT_RUNS,
                self.live_upstream.clone().filter(|_| s.live),
                &theme,
            );
            self.status = status;
            return fx;
        }
        if s.focus == Focus::Detail && s.pane == Pane::Template && s.diff.is_some() {
            diff_action(s, action, ph);
            return Vec::new();
        }
        if let Some(fx) = self.session_common(action) {
            return fx;
        }
        let Some(s) = &mut self.session else {
            return Vec::new();
        };
        match s.focus {
            Focus::List => list_action(s, action, epoch, lh, ph, &theme),
            Focus::Detail => {
                let (fx, status) = detail_action(s, action, &theme, ph);
                if status.is_some() {
                    self.status = status;
                }
                fx
            }
        }
    }

    /// The session keys of every focus (back, panes, copy, wrap, search steps); `None` when
    /// `action` is none of them.
    fn session_common(&mut self, action: Action) -> Option<Vec<Effect>> {
        let has_browser = self.browser.is_some();
        let s = self.session.as_mut()?;
        match (s.focus, action) {
            (_, Action::Back) => {
                if s.search.is_some() {
                    s.search = None;
                } else if s.focus == Focus::Detail {
                    s.focus = Focus::List;
                } else if !s.filter.is_empty() {
                    s.filter.clear();
                    self.apply_filter();
                } else if has_browser && !s.live {
                    self.screen = Screen::Browser;
                    self.session = None;
                } else {
                    self.confirm_quit();
                }
            }
            (_, Action::NextPane) | (_, Action::PrevPane) => {
                if s.focus == Focus::Detail {
                    s.pane = if action == Action::NextPane {
                        s.pane.next()
                    } else {
                        s.pane.prev()
                    };
                }
                s.focus = Focus::Detail;
                s.search = None;
            }
            (_, Action::Pane(n)) => {
                s.pane = Pane::ALL[(n as usize - 1).min(Pane::ALL.len() - 1)];
                s.focus = Focus::Detail;
                s.search = None;
            }
            (_, Action::Copy) => return Some(copy_effect(s)),
            (Focus::Detail, Action::Wrap) => s.wrap = !s.wrap,
            (_, Action::SearchNext) | (_, Action::SearchPrev) => {
                self.search_step(action == Action::SearchNext);
            }
            _ => return None,
        }
        Some(Vec::new())
    }

    fn submit(&mut self, kind: InputKind, q: String) -> Vec<Effect> {
        match kind {
            InputKind::Filter => {
                if let Some(s) = &mut self.session {
                    s.filter = q.trim().to_owned();
                }
                self.apply_filter();
                let lh = self.list_height();
                let ph = self.pane_height();
                let epoch = self.epoch;
                let theme = self.theme.clone();
                if let Some(s) = &mut self.session {
                    s.list = Scroll::default();
                    return select_row(s, epoch, lh, &theme, ph);
                }
                Vec::new()
            }
            InputKind::Search => {
                let needle = q.to_lowercase();
                if needle.is_empty() {
                    return Vec::new();
                }
                let matches: Vec<usize> = match (self.screen, &self.session) {
                    (Screen::Browser, _) => self
                        .browser
                        .as_ref()
                        .map(|b| {
                            b.entries
                                .iter()
                                .enumerate()
                                .filter(|(_, e)| {
                                    format!("{} {}", e.path.display(), e.info)
                                        .to_lowercase()
                                        .contains(&needle)
                                })
                                .map(|(i, _)| i)
                                .collect()
                        })
                        .unwrap_or_default(),
                    (_, Some(s)) if s.focus == Focus::List => s
                        .visible
                        .iter()
                        .enumerate()
                        .filter(|(_, r)| {
                            s.summaries[**r]
                                .as_ref()
                                .is_some_and(|x| row_text(x).to_lowercase().contains(&needle))
                        })
                        .map(|(i, _)| i)
                        .collect(),
                    (_, Some(s)) => {
                        let d = if s.pane == Pane::Replay {
                            &s.docs[Pane::Replay.index()]
                        } else {
                            &s.docs[s.pane.index()]
                        };
                        (0..d.lines.len())
                            .filter(|&i| d.plain(i).to_lowercase().contains(&needle))
                            .collect()
                    }
                    _ => Vec::new(),
                };
                if matches.is_empty() {
                    self.status = Some(format!("no match for {q:?}"));
                }
                let search = Search {
                    query: q,
                    matches,
                    current: usize::MAX,
                };
                match &mut self.session {
                    Some(s) if self.screen == Screen::Session => s.search = Some(search),
                    _ => {
                        if let Some(b) = &mut self.browser
                            && let Some(&m) = search.matches.first()
                        {
                            let len = b.entries.len();
                            b.scroll
                                .set(m, len, (self.size.1 as usize).saturating_sub(6));
                        }
                        return Vec::new();
                    }
                }
                self.search_step(true);
                let lh = self.list_height();
                let ph = self.pane_height();
                let epoch = self.epoch;
                let theme = self.theme.clone();
                if let Some(s) = &mut self.session
                    && s.focus == Focus::List
                    && s.analysis.as_ref().map(|a| a.row) != s.visible.get(s.list.cursor).copied()
                {
                    return select_row(s, epoch, lh, &theme, ph);
                }
                Vec::new()
            }
        }
    }

    pub(crate) fn search_step(&mut self, forward: bool) {
        let lh = self.list_height();
        let ph = self.pane_height();
        let Some(s) = &mut self.session else { return };
        let Some(search) = &mut s.search else { return };
        if search.matches.is_empty() {
            return;
        }
        let n = search.matches.len();
        search.current = if search.current == usize::MAX {
            0
        } else if forward {
            (search.current + 1) % n
        } else {
            (search.current + n - 1) % n
        };
        let line = search.matches[search.current];
        self.status = Some(format!(
            "match {}/{} for {:?}",
            search.current + 1,
            n,
            search.query
        ));
        match s.focus {
            Focus::List => {
                let len = s.visible.len();
                s.list.set(line, len, lh);
            }
            Focus::Detail => {
                let len = s.docs[s.pane.index()].lines.len();
                s.panes[s.pane.index()].set(line, len, ph);
            }
        }
    }

    /// Recomputes the visible rows from the filter expression.
    pub fn apply_filter(&mut self) {
        let Some(s) = &mut self.session else { return };
        let f = Filter::parse(&s.filter);
        let keep = s.visible.get(s.list.cursor).copied();
        s.visible = (0..s.summaries.len())
            .filter(|&r| {
                s.summaries[r]
                    .as_ref()
                    .map_or(f.is_empty(), |x| f.matches(x))
            })
            .collect();
        if let Some(k) = keep
            && let Some(p) = s.visible.iter().position(|&r| r == k)
        {
            s.list.cursor = p;
        }
        if s.list.cursor >= s.visible.len() {
            s.list = Scroll::default();
        }
    }

    fn on_mouse(&mut self, kind: MouseEventKind, x: u16, y: u16) -> Vec<Effect> {
        let areas = layout::areas(Rect::new(0, 0, self.size.0, self.size.1), self.shape());
        let pos = Position { x, y };
        match kind {
            MouseEventKind::ScrollDown | MouseEventKind::ScrollUp => {
                let a = if kind == MouseEventKind::ScrollDown {
                    Action::Down
                } else {
                    Action::Up
                };
                if let Some(s) = &mut self.session
                    && self.screen == Screen::Session
                {
                    if areas.list.contains(pos) {
                        s.focus = Focus::List;
                    } else if areas.pane.contains(pos) {
                        s.focus = Focus::Detail;
                    }
                }
                let mut fx = Vec::new();
                for _ in 0..3 {
                    fx.extend(self.on_action(a));
                }
                fx
            }
            MouseEventKind::Down(MouseButton::Left) => {
                // The what-if view covers the exchange it runs for: a click never changes the
                // selection behind it (x would then run nothing).
                if self.screen == Screen::Session
                    && self.session.as_ref().is_some_and(|s| s.whatif.is_some())
                {
                    return Vec::new();
                }
                if self.screen == Screen::Browser {
                    if let Some(b) = &mut self.browser {
                        let first = areas.list.y + 2;
                        if y >= first {
                            let i = b.scroll.offset + (y - first) as usize;
                            if i < b.entries.len() {
                                if b.scroll.cursor == i {
                                    return self.browser_action(Action::Select);
                                }
                                b.scroll.cursor = i;
                            }
                        }
                    }
                    return Vec::new();
                }
                if areas.tabs.contains(pos) {
                    for (i, r) in layout::tab_ranges().iter().enumerate() {
                        if x >= areas.tabs.x + r.0 && x < areas.tabs.x + r.1 {
                            return self.on_action(Action::Pane(i as u8 + 1));
                        }
                    }
                    return Vec::new();
                }
                let lh = self.list_height();
                let ph = self.pane_height();
                let epoch = self.epoch;
                let theme = self.theme.clone();
                let Some(s) = &mut self.session else {
                    return Vec::new();
                };
                if areas.list.contains(pos) {
                    s.focus = Focus::List;
                    let first = areas.list.y + 2;
                    if y >= first && y < areas.list.bottom() - 1 {
                        let i = s.list.offset + (y - first) as usize;
                        if i < s.visible.len() && i != s.list.cursor {
                            s.list.cursor = i;
                            return select_row(s, epoch, lh, &theme, ph);
                        }
                    }
                } else if areas.pane.contains(pos) {
                    s.focus = Focus::Detail;
                    let first = areas.pane.y + 1;
                    if y >= first && s.pane != Pane::Replay {
                        let i = s.panes[s.pane.index()].offset + (y - first) as usize;
                        let len = s.docs[s.pane.index()].lines.len();
                        if i < len {
                            s.panes[s.pane.index()].cursor = i;
                        }
                    }
                }
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// True while background work the screen shows is running outside the worker (what-if
    /// runs): [`super::Tui::run`] waits for it before ending on a finite input.
    pub fn busy(&self) -> bool {
        self.session
            .as_ref()
            .and_then(|s| s.whatif.as_ref())
            .is_some_and(|v| v.running())
    }

    /// The selected exchange's analysis, if loaded.
    pub fn analysis(&self) -> Option<&ExchangeAnalysis> {
        self.session.as_ref()?.analysis.as_deref()
    }

    /// Findings shown in the Findings pane: the exchange's, then the session's.
    pub fn findings(&self) -> Vec<Finding> {
        let Some(s) = &self.session else {
            return Vec::new();
        };
        findings_of(s)
    }
}

/// Keys on the exchange list: move the cursor (analysing the row it lands on); Enter focuses
/// the panes.
fn list_action(
    s: &mut SessionView,
    action: Action,
    epoch: u64,
    lh: usize,
    ph: usize,
    theme: &Theme,
) -> Vec<Effect> {
    let len = s.visible.len();
    let before = s.list.cursor;
    match action {
        Action::Up => s.list.move_by(-1, len, lh),
        Action::Down => s.list.move_by(1, len, lh),
        Action::PageUp => s.list.move_by(-(lh as isize), len, lh),
        Action::PageDown => s.list.move_by(lh as isize, len, lh),
        Action::Top => s.list.set(0, len, lh),
        Action::Bottom => s.list.set(len.saturating_sub(1), len, lh),
        Action::Select => {
            s.focus = Focus::Detail;
            return Vec::new();
        }
        _ => return Vec::new(),
    }
    if s.list.cursor != before || s.analysis.is_none() {
        return select_row(s, epoch, lh, theme, ph);
    }
    Vec::new()
}

/// Keys in a detail pane (but the diff view's and the loop view's): move, and the pane's own
/// keys. Returns the effects and a status line to show.
fn detail_action(
    s: &mut SessionView,
    action: Action,
    theme: &Theme,
    ph: usize,
) -> (Vec<Effect>, Option<String>) {
    let mut status = None;
    if s.pane == Pane::Replay {
        return (replay_action(s, action, theme), None);
    }
    let pane = s.pane;
    let len = s.docs[pane.index()].lines.len();
    let cur = &mut s.panes[pane.index()];
    match action {
        Action::Up => cur.move_by(-1, len, ph),
        Action::Down => cur.move_by(1, len, ph),
        Action::PageUp => cur.move_by(-(ph as isize), len, ph),
        Action::PageDown => cur.move_by(ph as isize, len, ph),
        Action::Top => cur.set(0, len, ph),
        Action::Bottom => cur.set(len.saturating_sub(1), len, ph),
        Action::Toggle | Action::Left | Action::Right if pane == Pane::Tools => {
            tools::toggle(s, action, theme, ph)
        }
        Action::TemplateTokens => {
            s.modes.tokens = !s.modes.tokens;
            rebuild(s, Pane::Template, theme);
            s.panes[Pane::Template.index()] = Scroll::default();
        }
        Action::TemplateSource => {
            s.modes.local = !s.modes.local;
            rebuild(s, Pane::Template, theme);
            s.panes[Pane::Template.index()] = Scroll::default();
        }
        Action::TemplateDiff if pane == Pane::Template => {
            match s.analysis.as_ref().map(|a| diff_unavailable(&a.template)) {
                Some(Some(why)) => status = Some(why),
                Some(None) => {
                    s.diff = Some(DiffView::default());
                    diff_action(s, Action::NextChange, ph);
                }
                None => {}
            }
        }
        Action::Select if pane == Pane::Stream => s.stream_zoom = !s.stream_zoom,
        Action::Select if pane == Pane::Findings => jump_to_evidence(s, theme, ph),
        _ => {}
    }
    (Vec::new(), status)
}

/// Lines the loop view shows: the list's top to the pane's bottom, less the borders.
fn loop_height(size: (u16, u16), layout: ListLayout) -> usize {
    let shape = layout::Shape {
        session_rows: Some(0),
        layout,
    };
    let a = layout::areas(Rect::new(0, 0, size.0, size.1), shape);
    a.pane.bottom().saturating_sub(a.list.y).saturating_sub(2) as usize
}

pub(crate) fn rebuild(s: &mut SessionView, pane: Pane, theme: &Theme) {
    let Some(a) = s.analysis.clone() else { return };
    s.docs[pane.index()] = match pane {
        Pane::Tools => doc::tools(&a, &s.modes, theme),
        Pane::Schema => doc::schema(&a, theme),
        Pane::Template => doc::template(&a, &s.modes, theme),
        Pane::Stream => doc::stream(&a, theme),
        Pane::Replay => {
            let steps = a.replay.len(s.chunking);
            s.step = s.step.min(steps.saturating_sub(1));
            let n = a
                .replay
                .step(s.chunking, s.step)
                .map_or(a.events.len(), |st| st.server_events);
            s.server_doc = doc::server_view(&a, n, theme);
            s.replay_engines.refresh(&a, theme);
            doc::replay(&a, s.chunking, s.step, theme)
        }
        Pane::Findings => doc::findings(&findings_of(s), theme),
    };
}

pub(crate) fn rebuild_all(s: &mut SessionView, theme: &Theme) {
    for p in Pane::ALL {
        rebuild(s, p, theme);
    }
}

fn copy_effect(s: &SessionView) -> Vec<Effect> {
    let text = match s.focus {
        Focus::List => s
            .analysis
            .as_ref()
            .and_then(|a| serde_json::to_string(&a.exchange).ok()),
        Focus::Detail => {
            let d = &s.docs[s.pane.index()];
            let item = d
                .items
                .get(s.panes[s.pane.index()].cursor)
                .copied()
                .flatten()
                .unwrap_or(0);
            d.copy
                .get(item)
                .cloned()
                .or_else(|| d.copy.first().cloned())
        }
    };
    text.map(|t| vec![Effect::Copy(t)]).unwrap_or_default()
}
