//! The docs' lists are held to the catalogue: the built-in limiters and their options
//! (`plug_limit_options::Builtin`), and the attribute's arguments
//! (`plug_limit_options::ATTRIBUTE_ARGUMENTS`). Each list names every entry once, in the
//! catalogue's order, and nothing else, so an entry added to the catalogue fails here until
//! every list names it.

use std::path::Path;

use plug_limit_options::{ATTRIBUTE_ARGUMENTS, Builtin};

/// The rows of the table in `text` whose header row starts with `header`, each as its cells.
fn table(text: &str, header: &str) -> Vec<Vec<String>> {
    let rows: Vec<Vec<String>> = text
        .lines()
        .map(|line| {
            line.trim_start_matches("//!")
                .trim_start_matches("///")
                .trim()
        })
        .skip_while(|line| !line.starts_with(header))
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            let cells = line.trim_matches('|').split(" | ");
            cells.map(|cell| cell.trim().to_owned()).collect()
        })
        .collect();
    assert!(!rows.is_empty(), "no table headed `{header}`");
    rows
}

/// The text of a cell between its first pair of backticks.
fn code(cell: &str) -> &str {
    cell.split('`').nth(1).unwrap_or_default()
}

fn read(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|error| panic!("{path}: {error}"))
}

fn built_ins() -> Vec<&'static str> {
    Builtin::ALL.iter().map(|builtin| builtin.name()).collect()
}

/// The tables of built-ins: their names, and their options in the words errors use
/// (`Builtin::shown`), in the column `opts` is in.
#[test]
fn every_table_of_built_ins_names_the_catalogue_and_its_options() {
    for (path, opts_column) in [
        ("plug_limit/src/lib.rs", 2),
        ("plug_limit/docs/guide/limiters.md", 2),
        ("plug_limit/docs/guide/limiting.md", 1),
    ] {
        let rows = table(&read(path), "| limiter |");
        let names: Vec<&str> = rows.iter().map(|row| code(&row[0])).collect();
        assert_eq!(names, built_ins(), "{path}");
        for (row, builtin) in rows.iter().zip(Builtin::ALL) {
            assert_eq!(
                code(&row[opts_column]),
                builtin.shown(),
                "{path}: {}",
                builtin.name()
            );
        }
    }
}

/// The attribute's docs (its rustdoc and the guide's chapter) list every argument, in the
/// catalogue's order; the `limiter` argument's row names every built-in; the rustdoc's list
/// of built-ins gives each its options.
#[test]
fn the_attributes_docs_list_its_arguments_and_the_built_ins() {
    for path in [
        "plug_limit_macros/src/lib.rs",
        "plug_limit/docs/guide/limiting.md",
    ] {
        let text = read(path);
        let rows = table(&text, "| argument |");
        let arguments: Vec<&str> = rows
            .iter()
            .map(|row| code(&row[0]).split(" =").next().unwrap_or_default())
            .collect();
        assert_eq!(arguments, ATTRIBUTE_ARGUMENTS, "{path}");
        let limiter_row = &rows[0][2];
        let listed: Vec<&str> = limiter_row
            .split_once('(')
            .and_then(|(_, rest)| rest.split_once(';'))
            .map(|(list, _)| {
                list.split(", ")
                    .map(|name| name.trim_matches('`'))
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(listed, built_ins(), "{path}: the `limiter` row");
    }
    let macros = read("plug_limit_macros/src/lib.rs");
    for builtin in Builtin::ALL {
        let item = format!("/// - `{}`: `{}`,", builtin.name(), builtin.shown());
        assert!(
            macros.contains(&item),
            "plug_limit_macros/src/lib.rs lacks {item}"
        );
    }
}

/// The configuration guide names every field of `Config`, as a file spells it: a field added
/// to `Config` fails here until the guide names it.
#[test]
fn the_configuration_guide_names_every_field_of_config() {
    let source = read("plug_limit/src/build/file.rs");
    let body = source
        .split_once("pub struct Config {")
        .and_then(|(_, rest)| rest.split_once("\n}"))
        .map(|(body, _)| body)
        .expect("Config in build/file.rs");
    let fields: Vec<&str> = body
        .lines()
        .filter_map(|line| line.trim().strip_prefix("pub ")?.split_once(':'))
        .map(|(name, _)| name)
        .collect();
    assert!(fields.len() >= 16, "{fields:?}");
    let guide = read("plug_limit/docs/guide/configuration.md");
    let paragraph = guide
        .split("\n\n")
        .find(|paragraph| paragraph.starts_with("The serializable part"))
        .expect("the guide's paragraph on Config");
    for field in fields {
        assert!(
            paragraph.contains(&format!("`{field}`")),
            "the configuration guide does not name `{field}`"
        );
    }
}

/// The migration chapter has a row for each breaking change of the CHANGELOG's unreleased
/// section: a breaking entry added there fails here until the chapter says what to write now.
#[test]
fn the_migration_chapter_has_a_row_for_each_breaking_change() {
    let changelog = read("CHANGELOG.md");
    let unreleased = changelog
        .split_once("# Unreleased")
        .map(|(_, rest)| rest.split("\n# ").next().unwrap_or(rest))
        .expect("an Unreleased section");
    let breaking = unreleased
        .lines()
        .filter(|line| line.starts_with("- **Breaking"))
        .count();
    let chapter = read("plug_limit/docs/guide/migrating.md");
    let section = chapter
        .split_once("## From an earlier version of plug_limit")
        .map(|(_, rest)| rest)
        .expect("the chapter's section on this crate");
    let rows = table(section, "| was |");
    assert_eq!(
        rows.len(),
        breaking,
        "rows of the migration table, breaking entries"
    );
}

/// The crate docs' table of feature flags is `plug_limit/Cargo.toml`'s `[features]`: every
/// feature once, in its order, and `yes` in the default column for the default ones alone.
#[test]
fn the_feature_table_is_the_manifests_features() {
    let manifest: toml::Table = read("plug_limit/Cargo.toml").parse().expect("a manifest");
    let features = manifest["features"].as_table().expect("[features]");
    let defaults: Vec<&str> = features["default"]
        .as_array()
        .expect("default = [..]")
        .iter()
        .filter_map(toml::Value::as_str)
        .collect();
    let declared: Vec<&str> = features
        .keys()
        .map(String::as_str)
        .filter(|name| *name != "default")
        .collect();
    let rows = table(
        &read("plug_limit/src/lib.rs"),
        "| name | description | default? |",
    );
    let listed: Vec<&str> = rows.iter().map(|row| code(&row[0])).collect();
    let mut sorted_declared = declared.clone();
    sorted_declared.sort_unstable();
    let mut sorted_listed = listed.clone();
    sorted_listed.sort_unstable();
    assert_eq!(
        sorted_listed, sorted_declared,
        "the crate docs' feature table"
    );
    for row in &rows {
        let name = code(&row[0]);
        let default = row.last().map(String::as_str) == Some("yes");
        assert_eq!(default, defaults.contains(&name), "default? of `{name}`");
    }
}

/// The README's table of examples is `examples/Cargo.toml`'s: every example once, each
/// naming the features it needs (`--features grpc`), so `cargo run --example NAME` as the
/// README writes it runs.
#[test]
fn the_readmes_examples_are_the_packages() {
    let manifest: toml::Table = read("examples/Cargo.toml").parse().expect("a manifest");
    let examples = manifest["example"].as_array().expect("[[example]]");
    let rows = table(&read("README.md"), "| example | shows |");
    let mut listed: Vec<&str> = rows.iter().map(|row| code(&row[0])).collect();
    let mut declared: Vec<&str> = examples
        .iter()
        .filter_map(|example| example["name"].as_str())
        .collect();
    for example in examples {
        let name = example["name"].as_str().expect("a name");
        let row = rows
            .iter()
            .find(|row| code(&row[0]) == name)
            .unwrap_or_else(|| panic!("the README has no row for `{name}`"));
        let needs = example
            .get("required-features")
            .and_then(toml::Value::as_array);
        for feature in needs.into_iter().flatten().filter_map(toml::Value::as_str) {
            let flag = format!("`--features {feature}`");
            assert!(row[1].contains(&flag), "`{name}`'s row lacks {flag}");
        }
    }
    listed.sort_unstable();
    declared.sort_unstable();
    assert_eq!(listed, declared);
}
