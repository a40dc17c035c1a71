//! Which templates of llama.cpp's corpus (models/templates, build 11434) lose which schema facts
//! for one fixed tool set (tests/data/schema/corpus-request.json: an anyOf parameter, a
//! nullable one, an enum, a nested object, an array of objects, a second tool reusing a
//! parameter name).
//!
//! The prompts are reference renders by Python jinja2 configured as transformers'
//! `apply_chat_template` (scripts/schema-render.py --corpus), stored in
//! tests/data/schema/corpus/. The table is docs/schema-corpus.md; regenerate it with
//! `TOOLSCOPE_BLESS=1 cargo test --test template schema_corpus::`.

use std::path::PathBuf;

use serde_json::Value;
use toolscope::schema::loss::{FactKind, LossReport, loss_report};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/schema")
}

struct Row {
    template: String,
    cells: Vec<String>,
    score: Option<u32>,
}

/// `✓` all reached, `✗` none, `k/n` partly; `·` when no such fact was checked.
fn cell(r: &LossReport, tool: &str, pred: impl Fn(&str, FactKind) -> bool) -> String {
    let facts: Vec<bool> = r
        .tools
        .iter()
        .filter(|t| t.tool == tool)
        .flat_map(|t| t.params.iter().flat_map(|p| p.facts.iter()))
        .filter(|f| pred(&f.pointer, f.kind))
        .map(|f| f.reached)
        .collect();
    let n = facts.len();
    let k = facts.iter().filter(|x| **x).count();
    if n == 0 {
        "·".into()
    } else if k == n {
        "✓".into()
    } else if k == 0 {
        "✗".into()
    } else {
        format!("{k}/{n}")
    }
}

const COLUMNS: &[&str] = &[
    "tools shown",
    "anyOf string\\|integer",
    "nullable",
    "enum values",
    "nested object",
    "array items",
    "required",
    "descriptions",
    "plain types",
];

fn row(name: &str, r: &LossReport) -> Vec<String> {
    let n_shown = r.tools.iter().filter(|t| t.span.is_some()).count();
    let shown = format!("{n_shown}/{}", r.tools.len());
    if n_shown == 0 {
        let mut v = vec![shown];
        v.extend(std::iter::repeat_n("✗".to_string(), COLUMNS.len() - 1));
        return v;
    }
    let s = "ship_order";
    vec![
        shown,
        cell(r, s, |p, k| {
            p.starts_with("/properties/order_id")
                && matches!(k, FactKind::Type | FactKind::Alternative)
        }),
        cell(r, s, |p, k| {
            p.starts_with("/properties/note") && matches!(k, FactKind::Nullable)
        }),
        cell(r, s, |p, k| {
            p.starts_with("/properties/priority/enum") && k == FactKind::EnumValue
        }),
        cell(r, s, |p, k| {
            p.starts_with("/properties/address/properties/")
                && matches!(k, FactKind::Name | FactKind::Type)
        }),
        cell(r, s, |p, k| {
            p.starts_with("/properties/parcels/items")
                && (k == FactKind::Type || (k == FactKind::Name && !p.ends_with("/items")))
        }),
        {
            let a = cell(r, s, |_, k| k == FactKind::Required);
            let _ = name;
            a
        },
        cell(r, s, |_, k| k == FactKind::Description),
        {
            let plain = |p: &str, k: FactKind| {
                k == FactKind::Type
                    && (p == "/properties/priority"
                        || p == "/properties/refund"
                        || p == "/properties/order_id")
            };
            let a = cell(r, "cancel_order", plain);
            let b = cell(r, s, |p, k| {
                k == FactKind::Type && p == "/properties/priority"
            });
            if a == "✓" && b == "✓" {
                "✓".into()
            } else {
                format!("{b} / {a}")
            }
        },
    ]
}

fn rows() -> Option<Vec<Row>> {
    let req: Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join("corpus-request.json")).ok()?)
            .ok()?;
    let mut names: Vec<String> = std::fs::read_dir(dir().join("corpus"))
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter_map(|n| {
            n.strip_suffix(".txt")
                .or_else(|| n.strip_suffix(".error"))
                .map(str::to_string)
        })
        .collect();
    names.sort();
    names.dedup();
    let mut out = Vec::new();
    for n in names {
        let txt = dir().join("corpus").join(format!("{n}.txt"));
        match std::fs::read_to_string(&txt) {
            Ok(prompt) => {
                let r = loss_report(&req, &prompt);
                out.push(Row {
                    template: n.clone(),
                    cells: row(&n, &r),
                    score: Some(r.score()),
                });
            }
            Err(_) => {
                let err = std::fs::read_to_string(dir().join("corpus").join(format!("{n}.error")))
                    .unwrap_or_default();
                let mut cells = vec![format!("render error: {}", err.trim().replace('|', "\\|"))];
                cells.extend(std::iter::repeat_n("—".to_string(), COLUMNS.len() - 1));
                out.push(Row {
                    template: n,
                    cells,
                    score: None,
                });
            }
        }
    }
    Some(out)
}

fn table(rows: &[Row]) -> String {
    let mut s = String::new();
    s.push_str("| template | ");
    s.push_str(&COLUMNS.join(" | "));
    s.push_str(" | loss score |\n|---|");
    s.push_str(&"---|".repeat(COLUMNS.len() + 1));
    s.push('\n');
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} |\n",
            r.template,
            r.cells.join(" | "),
            r.score.map(|x| x.to_string()).unwrap_or_else(|| "—".into())
        ));
    }
    s
}

fn document(rows: &[Row]) -> String {
    let rendered = rows.iter().filter(|r| r.score.is_some()).count();
    let lossless = rows.iter().filter(|r| r.score == Some(0)).count();
    let no_tools = rows.iter().filter(|r| r.cells[0].starts_with("0/")).count();
    format!(
        "# Schema loss across the template corpus\n\n\
         Generated by `TOOLSCOPE_BLESS=1 cargo test --test template schema_corpus::` from the reference renders in\n\
         `tests/data/schema/corpus/` (Python jinja2 configured as transformers' `apply_chat_template`,\n\
         `scripts/schema-render.py --corpus`) of llama.cpp's `models/templates/` (build 11434), for the tool\n\
         set in `tests/data/schema/corpus-request.json`: `ship_order(order_id: anyOf[string, integer],\n\
         note: anyOf[string, null], priority: enum[standard, express, overnight], address: object{{street, city,\n\
         postcode}}, parcels: array of object{{sku, weight_kg}})` and `cancel_order(order_id: string, refund: boolean)`.\n\n\
         Cells: ✓ every fact of the column reached the prompt, ✗ none did, k/n some did, · not applicable,\n\
         — the template failed to render. \"plain types\" is `priority`'s type / `cancel_order`'s types.\n\
         \"loss score\" is the weighted count of lost facts (name 5, type/ref 4, alternative/nullable 2,\n\
         enum value/required/description 1) that `toolscope flatten --template` minimises.\n\n\
         {rendered} of {} templates render; {lossless} lose nothing; {no_tools} do not print the tools at all.\n\n{}",
        rows.len(),
        table(rows)
    )
}

#[test]
fn corpus_table_is_current() {
    let Some(rows) = rows() else {
        panic!("tests/data/schema/corpus-request.json or corpus/ missing")
    };
    assert!(
        rows.len() >= 70,
        "expected the whole corpus, got {}",
        rows.len()
    );
    let doc = document(&rows);
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/schema-corpus.md");
    if std::env::var("TOOLSCOPE_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &doc).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        on_disk, doc,
        "docs/schema-corpus.md is stale: run TOOLSCOPE_BLESS=1 cargo test --test template schema_corpus::"
    );
}

/// Rows checked by reading the renders by hand.
#[test]
fn hand_checked_rows() {
    let rows = rows().unwrap();
    let get = |n: &str| {
        rows.iter()
            .find(|r| r.template == n)
            .unwrap_or_else(|| panic!("{n}"))
    };
    // Hermes 2 Pro dumps every tool as JSON: nothing lost.
    let h = get("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use");
    assert_eq!(h.score, Some(0), "{:?}", h.cells);
    // Gemma 4: `type:<|"|><|"|>` for order_id and note.
    let g = get("google-gemma-4-31B-it");
    assert_eq!(g.cells[1], "✗");
    assert_eq!(g.cells[2], "✗");
    assert_eq!(g.cells[3], "✓");
    // Functionary v3.2: `order_id: ,` and `note?: ,`.
    let f = get("meetkai-functionary-medium-v3.2");
    assert_eq!(f.cells[1], "✗");
    assert_eq!(f.cells[3], "✓", "enum printed as a string-literal union");
    // Gemma 2 has no tool support: the tools never appear.
    let g2 = get("google-gemma-2-2b-it");
    assert_eq!(g2.cells[0], "0/2");
}
