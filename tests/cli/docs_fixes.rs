//! docs/check.md's Fixes table names every rule (issue #24: "every rule in docs/check.md says
//! whether it has a fix and what it is"). The rule ids come from `src/finding.rs` itself (the
//! `#[serde(rename = "…")]` names of `enum Rule`), not from the library, so a rule added to the
//! enum without a row fails here.

use crate::support;

/// The serde names of `enum Rule` in src/finding.rs, in source order.
fn rule_ids() -> Vec<String> {
    let src = std::fs::read_to_string(support::root().join("src/finding.rs")).unwrap();
    let start = src
        .find("pub enum Rule {")
        .expect("enum Rule in src/finding.rs");
    let body = &src[start..start + src[start..].find("\n}").expect("end of enum Rule")];
    body.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l.strip_prefix("#[serde(rename = \"")?;
            Some(rest[..rest.find('"')?].to_owned())
        })
        .collect()
}

/// The backticked names in the first column of the table under `## Fixes` in docs/check.md.
fn fixes_table_rules() -> Vec<String> {
    let doc = std::fs::read_to_string(support::root().join("docs/check.md")).unwrap();
    let start = doc
        .find("\n## Fixes\n")
        .expect("a Fixes section in docs/check.md");
    let section = &doc[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    let mut out = Vec::new();
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let first = row[1..].split(" | ").next().unwrap_or("");
        out.extend(first.split('`').skip(1).step_by(2).map(str::to_owned));
    }
    out
}

#[test]
fn every_rule_has_a_row_in_the_fixes_table() {
    let rules = rule_ids();
    // the enum as the library sees it: the parse above found every variant
    assert_eq!(
        rules.len(),
        toolscope::finding::Rule::ALL.len(),
        "{rules:?}"
    );
    let table = fixes_table_rules();
    let missing: Vec<&String> = rules.iter().filter(|r| !table.contains(r)).collect();
    assert!(
        missing.is_empty(),
        "docs/check.md, Fixes: no row for {missing:?} (each rule says its fix or \"none\" and why)"
    );
    let unknown: Vec<&String> = table.iter().filter(|t| !rules.contains(t)).collect();
    assert!(
        unknown.is_empty(),
        "Fixes rows name no such rule: {unknown:?}"
    );
}
