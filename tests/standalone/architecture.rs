//! The layering rule of `ARCHITECTURE.md`, enforced: every path into the crate (`crate::..`,
//! `super::..`, in `use` items, in code, and in macro calls) in `plug_limit/src` points to its
//! own room or one listed before it, but for the exceptions the map names, each for one file
//! and one module, and each still needed.
//!
//! The rooms and the exceptions are read from the map itself (its `rooms` and `exceptions`
//! blocks), so the map and the rule cannot drift apart. Files are parsed with `syn`, so a path
//! is found whatever its layout (a `use` list over many lines, a path inside an expression) and
//! nothing in a string or a comment is taken for one. Unit tests (`#[cfg(test)]` items) are
//! left out: they may reach for anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::visit::Visit;

/// The map's rooms, bottom first, and the room of each top-level module.
struct Rooms {
    order: Vec<String>,
    of_module: BTreeMap<String, String>,
}

/// A path into the crate: where it is, and the top-level module it names first.
#[derive(Debug, PartialEq, Eq)]
struct Import {
    line: usize,
    module: String,
}

/// How a name at the crate root resolves: to a top-level module of the crate, or to something
/// no room holds (a crate re-exported whole, a module of docs only).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Root {
    Module(String),
    Outside,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The lines of the fenced block whose info string is `info`.
fn block<'a>(map: &'a str, info: &str) -> Vec<&'a str> {
    let fence = format!("```{info}");
    let start = map
        .lines()
        .position(|line| line.trim() == fence)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no ```{info} block"));
    map.lines()
        .skip(start + 1)
        .take_while(|line| line.trim() != "```")
        .filter(|line| !line.trim().is_empty())
        .collect()
}

fn rooms(map: &str) -> Rooms {
    let mut order = Vec::new();
    let mut of_module = BTreeMap::new();
    for line in block(map, "rooms") {
        let (room, modules) = line
            .split_once(':')
            .unwrap_or_else(|| panic!("a room is `name: module, module`: {line}"));
        let room = room.trim().to_owned();
        for module in modules.split(',') {
            let previous = of_module.insert(module.trim().to_owned(), room.clone());
            assert!(previous.is_none(), "module {module} is in two rooms");
        }
        order.push(room);
    }
    Rooms { order, of_module }
}

/// The allowed upward imports, each `file -> module` (a file of `plug_limit/src`, a top-level
/// module), with its reason.
fn exceptions(map: &str) -> BTreeSet<(String, String)> {
    block(map, "exceptions")
        .into_iter()
        .map(|line| {
            let (pair, reason) = line
                .split_once(':')
                .unwrap_or_else(|| panic!("an exception is `file -> module: reason`: {line}"));
            assert!(
                reason.trim().len() > 20,
                "an exception needs its reason: {line}"
            );
            let (file, module) = pair
                .split_once("->")
                .unwrap_or_else(|| panic!("an exception is `file -> module: reason`: {line}"));
            (file.trim().to_owned(), module.trim().to_owned())
        })
        .collect()
}

/// Every `.rs` file below `dir`.
fn sources(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
}

/// The module path of a source file: `a/b.rs` and `a/b/mod.rs` are `[a, b]`.
fn module_path(relative: &Path) -> Vec<String> {
    let mut path: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if path.last().is_some_and(|last| last == "mod") {
        path.pop();
    }
    path
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr.meta.require_list().is_ok_and(|list| {
                list.tokens
                    .clone()
                    .into_iter()
                    .any(|token| matches!(&token, TokenTree::Ident(ident) if ident == "test"))
            })
    })
}

/// Whether `item` is compiled for unit tests only (`#[cfg(test)]`).
fn is_test_only_item(item: &syn::Item) -> bool {
    let attrs = match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => return false,
    };
    is_test_only(attrs)
}

/// `segments` as written in the module `module`, made absolute from the crate root; `None` for
/// a path into another crate or a name of the module alone.
fn absolute(module: &[String], segments: &[String]) -> Option<Vec<String>> {
    let mut at: Vec<String> = match segments.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("super") => module[..module.len().saturating_sub(1)].to_vec(),
        Some("self") => module.to_vec(),
        _ => return None,
    };
    let mut rest = &segments[1..];
    while rest.first().is_some_and(|s| s == "super") {
        at.pop();
        rest = &rest[1..];
    }
    at.extend(rest.iter().cloned());
    Some(at)
}

/// Walks one file, keeping the module it is in (inline modules included).
struct Reader<'a> {
    module: Vec<String>,
    roots: &'a BTreeMap<String, Root>,
    found: Vec<Import>,
    /// Paths that name no module: a glob of the crate root, a name the root does not have.
    unplaced: Vec<(usize, String)>,
}

impl Reader<'_> {
    /// A path of `segments` (as written, `crate`/`super`/`self` included) at `line`; `tail`
    /// is what follows the written segments in a `use` tree: the names of a group, or a glob.
    fn path(&mut self, segments: &[String], line: usize, tail: Option<&[String]>) {
        // `self::` stays in its module; other paths name another crate.
        if segments.first().is_some_and(|first| first == "self") {
            return;
        }
        let Some(at) = absolute(&self.module, segments) else {
            return;
        };
        let firsts: Vec<String> = match (at.first(), tail) {
            (Some(first), _) => vec![first.clone()],
            (None, Some(names)) => names.to_vec(),
            (None, None) => return,
        };
        for first in firsts {
            match self.roots.get(&first) {
                Some(Root::Module(module)) => self.found.push(Import {
                    line,
                    module: module.clone(),
                }),
                Some(Root::Outside) => {}
                None if first == "*" => self
                    .unplaced
                    .push((line, "a glob of the crate root names every room".to_owned())),
                None => self
                    .unplaced
                    .push((line, format!("`{first}` is nothing the crate root holds"))),
            }
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => {
                prefix.push(name.ident.to_string());
                self.path(prefix, name.ident.span().start().line, None);
                prefix.pop();
            }
            syn::UseTree::Rename(rename) => {
                prefix.push(rename.ident.to_string());
                self.path(prefix, rename.ident.span().start().line, None);
                prefix.pop();
            }
            syn::UseTree::Glob(glob) => {
                let star = ["*".to_owned()];
                self.path(prefix, glob.star_token.span.start().line, Some(&star));
            }
            syn::UseTree::Group(group) => {
                for item in &group.items {
                    self.use_tree(prefix, item);
                }
            }
        }
    }

    /// `crate::a` and `super::a` written in a macro's tokens (`$crate` aside).
    fn tokens(&mut self, tokens: TokenStream) {
        let mut paths = Vec::new();
        macro_paths(tokens, &mut paths);
        for (line, segments) in paths {
            self.path(&segments, line, None);
        }
    }
}

impl<'ast> Visit<'ast> for Reader<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test_only_item(item) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        self.module.push(item.ident.to_string());
        syn::visit::visit_item_mod(self, item);
        self.module.pop();
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if path.leading_colon.is_none() {
            let span = path
                .segments
                .first()
                .map_or_else(Span::call_site, |s| s.ident.span());
            self.path(&segments, span.start().line, None);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.tokens(mac.tokens.clone());
        syn::visit::visit_macro(self, mac);
    }
}

/// Every path into the crate that the file `text`, at `module`, takes, and the paths that
/// name nothing the root holds.
fn imports(
    module: &[String],
    text: &str,
    roots: &BTreeMap<String, Root>,
) -> (Vec<Import>, Vec<(usize, String)>) {
    let file = syn::parse_file(text).expect("a source file syn parses");
    let mut reader = Reader {
        module: module.to_vec(),
        roots,
        found: Vec::new(),
        unplaced: Vec::new(),
    };
    reader.visit_file(&file);
    // The names of one group or path are one import.
    reader.found.dedup();
    (reader.found, reader.unplaced)
}

/// What each name at the crate root is: a top-level module (by its file: a `#[path]` module is
/// its file's), a name re-exported from one, or something no room holds.
fn roots(lib: &str) -> BTreeMap<String, Root> {
    let file = syn::parse_file(lib).expect("lib.rs parses");
    let mut roots = BTreeMap::new();
    for item in &file.items {
        match item {
            syn::Item::Mod(module) => {
                let file = module.attrs.iter().find_map(|attr| {
                    let syn::Meta::NameValue(meta) = &attr.meta else {
                        return None;
                    };
                    let syn::Expr::Lit(lit) = &meta.value else {
                        return None;
                    };
                    let syn::Lit::Str(path) = &lit.lit else {
                        return None;
                    };
                    attr.path()
                        .is_ident("path")
                        .then(|| path.value().trim_end_matches(".rs").to_owned())
                });
                let root = match (&module.content, file) {
                    (_, Some(file)) => Root::Module(file),
                    (None, None) => Root::Module(module.ident.to_string()),
                    // A module written in lib.rs itself: docs, no code of a room.
                    (Some(_), None) => Root::Outside,
                };
                roots.insert(module.ident.to_string(), root);
            }
            syn::Item::Use(reexport) => {
                let mut names = Vec::new();
                leaves(&reexport.tree, &mut Vec::new(), &mut names);
                for (path, name) in names {
                    let root = match path.as_slice() {
                        [first, module, ..] if first == "self" => Root::Module(module.clone()),
                        _ => Root::Outside,
                    };
                    roots.insert(name, root);
                }
            }
            _ => {}
        }
    }
    roots
}

/// The names a `use` tree brings in, each with the path before it.
fn leaves(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    match tree {
        syn::UseTree::Path(path) => {
            prefix.push(path.ident.to_string());
            leaves(&path.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(name) => out.push((prefix.clone(), name.ident.to_string())),
        syn::UseTree::Rename(rename) => out.push((prefix.clone(), rename.rename.to_string())),
        syn::UseTree::Glob(_) => {}
        syn::UseTree::Group(group) => {
            for item in &group.items {
                leaves(item, prefix, out);
            }
        }
    }
}

#[test]
fn every_import_of_the_crate_points_down_the_map() {
    let map = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let rooms = rooms(&map);
    let allowed = exceptions(&map);
    let src = root().join("plug_limit/src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let roots = roots(&lib);
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();

    let mut wrong = Vec::new();
    let mut used = BTreeSet::new();
    let mut placed = BTreeSet::new();
    for path in &files {
        let relative = path.strip_prefix(&src).unwrap();
        let module = module_path(relative);
        let file = relative.display().to_string();
        // The root declares the rooms and re-exports them; a unit-test file tests.
        if module == ["lib"] || module.last().is_some_and(|last| last == "tests") {
            continue;
        }
        let top = &module[0];
        let room = rooms
            .of_module
            .get(top)
            .unwrap_or_else(|| panic!("ARCHITECTURE.md places module `{top}` ({file}) in no room"));
        placed.insert(top.clone());
        let at = rooms.order.iter().position(|r| r == room).unwrap();
        let text = std::fs::read_to_string(path).unwrap();
        let (found, unplaced) = imports(&module, &text, &roots);
        for (line, why) in unplaced {
            wrong.push(format!("{file}:{line}: {why}"));
        }
        for import in found {
            let Some(target) = rooms.of_module.get(&import.module) else {
                wrong.push(format!(
                    "{file}:{}: `{}` is in no room of ARCHITECTURE.md",
                    import.line, import.module
                ));
                continue;
            };
            if rooms.order.iter().position(|r| r == target).unwrap() <= at {
                continue;
            }
            let pair = (file.clone(), import.module.clone());
            if allowed.contains(&pair) {
                used.insert(pair);
                continue;
            }
            wrong.push(format!(
                "{file}:{}: room `{room}` imports `{}`, of room `{target}`, which is above it",
                import.line, import.module
            ));
        }
    }
    for (file, module) in allowed.difference(&used) {
        wrong.push(format!(
            "the exception `{file} -> {module}` of ARCHITECTURE.md is no longer needed: remove it"
        ));
    }
    for module in rooms.of_module.keys() {
        if !placed.contains(module) {
            wrong.push(format!(
                "ARCHITECTURE.md names module `{module}`, which has no file"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "against the layering rule:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_reader_finds_imports_of_every_form() {
    let roots = roots(
        "mod decide;\nmod key;\nmod limit;\nmod outcome;\nmod backend;\nmod handle;\n\
         mod build;\n#[path = \"private.rs\"]\npub mod __private;\npub mod docs {}\n\
         pub use self::handle::PlugLimit;\npub use self::build::{\n    Builder,\n};\n\
         pub use deadpool_redis::redis;\n",
    );
    let module = ["decide".to_owned(), "stack".to_owned()];
    let text = r#"
use super::{Decided, refuse};
use crate::{
    limit::Charge,
    PlugLimit,
};
// use crate::commented::Out;
fn f() {
    let _ = crate::backend::Backend::name(&b);
    let _ = "crate::in_a_string::X";
    tracing::debug!(target: "t", "{}", crate::key::Key::new());
}
use super::super::outcome::Outcome;
use crate::redis::Value;
use crate::docs::X;
use crate::__private::Y;
macro_rules! m { () => { $crate::ignored::X } }
#[cfg(test)]
mod tests {
    use crate::test_only::X;
}
use crate::build::Builder as B;
mod inner {
    use super::super::key::Inner;
}
use crate::*;
"#;
    let (found, unplaced) = imports(&module, text, &roots);
    let found: Vec<(usize, &str)> = found
        .iter()
        .map(|import| (import.line, import.module.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (2, "decide"),
            (4, "limit"),
            (5, "handle"),
            (9, "backend"),
            (11, "key"),
            (13, "outcome"),
            (16, "private"),
            (22, "build"),
            (24, "decide"),
        ]
    );
    assert_eq!(
        unplaced,
        [(26, "a glob of the crate root names every room".to_owned())]
    );
}

/// A file's paths into the crate, each as the absolute module path it names (`crate::`,
/// `super::` and `self::` resolved), with the line it is on; and the names its `use` items
/// bring in, each with the absolute path it stands for.
#[derive(Default)]
struct FilePaths {
    paths: Vec<(usize, Vec<String>)>,
    uses: BTreeMap<String, Vec<String>>,
    /// What its visible `use` items re-export: an import of the file's own code only where
    /// the file names it elsewhere (a module's facade is not its code's dependency).
    reexports: Vec<(String, Vec<String>)>,
    /// The first names of the paths in its code.
    named: BTreeSet<String>,
    /// The methods its inherent `impl` blocks define, each with its type's name.
    methods: BTreeSet<(String, String)>,
    /// The methods it calls on `self` within an inherent `impl`, or on a value named for its
    /// type (`decider` for `Decider`): a type's `impl` split over files ties the files that
    /// call each other's methods, which no path shows.
    calls: BTreeSet<(String, String)>,
}

/// Walks one file for [`FilePaths`], keeping the module it is in.
struct PathReader {
    module: Vec<String>,
    out: FilePaths,
    /// Whether the `use` item being read is visible outside the file.
    reexporting: bool,
    /// The type of the inherent `impl` being read, if any.
    within: Option<String>,
}

impl PathReader {
    /// `segments` as written here, made absolute (see [`absolute`]).
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        absolute(&self.module, segments)
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => self.used(prefix, &name.ident, &name.ident),
            syn::UseTree::Rename(rename) => self.used(prefix, &rename.ident, &rename.rename),
            syn::UseTree::Glob(glob) => {
                if let Some(path) = self.absolute(prefix) {
                    self.out
                        .paths
                        .push((glob.star_token.span.start().line, path));
                }
            }
            syn::UseTree::Group(group) => {
                for item in &group.items {
                    self.use_tree(prefix, item);
                }
            }
        }
    }

    fn used(&mut self, prefix: &mut Vec<String>, ident: &syn::Ident, name: &syn::Ident) {
        // `use super::settle::{self, Deadline}`: `self` names the module the group is in.
        if ident != "self" {
            prefix.push(ident.to_string());
        }
        if let Some(path) = self.absolute(prefix) {
            let name = if ident == "self" {
                prefix.last().cloned().unwrap_or_default()
            } else {
                name.to_string()
            };
            if self.reexporting {
                self.out.reexports.push((name.clone(), path.clone()));
            } else {
                let line = ident.span().start().line;
                self.out.paths.push((line, path.clone()));
            }
            self.out.uses.insert(name, path);
        }
        if ident != "self" {
            prefix.pop();
        }
    }
}

impl<'ast> Visit<'ast> for PathReader {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test_only_item(item) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        // A module of its own file is that file's; an inline one is read as this file.
        if item.content.is_some() {
            self.module.push(item.ident.to_string());
            syn::visit::visit_item_mod(self, item);
            self.module.pop();
        }
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        let own = match (&item.trait_, &*item.self_ty) {
            (None, syn::Type::Path(path)) => path.path.segments.last().map(|s| s.ident.to_string()),
            _ => None,
        };
        if let Some(own) = &own {
            for inner in &item.items {
                if let syn::ImplItem::Fn(method) = inner
                    && !is_test_only(&method.attrs)
                {
                    let name = method.sig.ident.to_string();
                    self.out.methods.insert((own.clone(), name));
                }
            }
        }
        let outer = std::mem::replace(&mut self.within, own);
        syn::visit::visit_item_impl(self, item);
        self.within = outer;
    }

    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        if let syn::Expr::Path(receiver) = &*call.receiver
            && let Some(ident) = receiver.path.get_ident()
        {
            let ty = if ident == "self" {
                self.within.clone()
            } else {
                Some(type_named(&ident.to_string()))
            };
            if let Some(ty) = ty {
                self.out.calls.insert((ty, call.method.to_string()));
            }
        }
        syn::visit::visit_expr_method_call(self, call);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // `crate::` and `super::` paths written in a macro's tokens, as the layering reader
        // reads them.
        let mut paths = Vec::new();
        macro_paths(mac.tokens.clone(), &mut paths);
        for (line, segments) in paths {
            if let Some(absolute) = self.absolute(&segments) {
                self.out.paths.push((line, absolute));
            }
        }
        syn::visit::visit_macro(self, mac);
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.reexporting = !matches!(item.vis, syn::Visibility::Inherited);
        self.use_tree(&mut Vec::new(), &item.tree);
        self.reexporting = false;
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if let Some(first) = segments.first() {
            self.out.named.insert(first.clone());
        }
        if path.leading_colon.is_none()
            && segments.len() > 1
            && let Some(absolute) = self.absolute(&segments)
        {
            let line = path.segments[0].ident.span().start().line;
            self.out.paths.push((line, absolute));
        }
        syn::visit::visit_path(self, path);
    }
}

/// The paths `crate::a::b` and `super::a` written in a macro's tokens (`$crate` aside), each
/// with its line.
fn macro_paths(tokens: TokenStream, out: &mut Vec<(usize, Vec<String>)>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, token) in tokens.iter().enumerate() {
        match token {
            TokenTree::Group(group) => macro_paths(group.stream(), out),
            TokenTree::Ident(ident) if ident == "crate" || ident == "super" || ident == "self" => {
                let after_dollar =
                    i > 0 && matches!(&tokens[i - 1], TokenTree::Punct(p) if p.as_char() == '$');
                if after_dollar {
                    continue;
                }
                let mut segments = vec![ident.to_string()];
                let mut j = i + 1;
                while let (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)), Some(next)) =
                    (tokens.get(j), tokens.get(j + 1), tokens.get(j + 2))
                {
                    if a.as_char() != ':' || b.as_char() != ':' {
                        break;
                    }
                    match next {
                        TokenTree::Ident(next) => segments.push(next.to_string()),
                        _ => break,
                    }
                    j += 3;
                }
                if segments.len() > 1 {
                    out.push((ident.span().start().line, segments));
                }
            }
            _ => {}
        }
    }
}

/// The type a value of this name holds, by the crate's habit: `decider` is a `Decider`.
fn type_named(snake: &str) -> String {
    snake
        .split('_')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_uppercase().chain(chars).collect()
            })
        })
        .collect()
}

/// The file an absolute path lands in: down the modules that are files, then through the
/// `use` items that re-export the rest (`crate::engine::DenyCache` is `engine/deny_cache.rs`'s).
fn landing(
    path: &[String],
    modules: &BTreeMap<Vec<String>, String>,
    files: &BTreeMap<String, FilePaths>,
    depth: usize,
) -> Option<String> {
    let mut at: Vec<String> = Vec::new();
    for (i, segment) in path.iter().enumerate() {
        let mut next = at.clone();
        next.push(segment.clone());
        if modules.contains_key(&next) {
            at = next;
            continue;
        }
        let file = modules.get(&at)?;
        let through = files.get(file).and_then(|paths| paths.uses.get(segment));
        return match through {
            Some(target) if depth < 8 => {
                let mut target = target.clone();
                target.extend(path[i + 1..].iter().cloned());
                landing(&target, modules, files, depth + 1)
            }
            _ => Some(file.clone()),
        };
    }
    modules.get(&at).cloned()
}

/// A circle of files in `edges`, if there is one: the files in order, the first again last.
fn circle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        file: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        trail: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = trail.iter().position(|f| f == file) {
            let mut found = trail[at..].to_vec();
            found.push(file.to_owned());
            return Some(found);
        }
        if done.contains(file) {
            return None;
        }
        trail.push(file.to_owned());
        for next in edges.get(file).into_iter().flatten() {
            if let Some(found) = visit(next, edges, trail, done) {
                return Some(found);
            }
        }
        trail.pop();
        done.insert(file.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|file| visit(file, edges, &mut Vec::new(), &mut done))
}

/// Every file of `plug_limit/src` that is code (not `lib.rs`, not a unit-test file), by its
/// module path, and the imports between them.
fn file_edges(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut paths = Vec::new();
    sources(src, &mut paths);
    let mut modules = BTreeMap::new();
    let mut files = BTreeMap::new();
    for path in &paths {
        let relative = path.strip_prefix(src).unwrap();
        let module = module_path(relative);
        if module == ["lib"] || module.last().is_some_and(|last| last == "tests") {
            continue;
        }
        let file = relative.display().to_string();
        let text = std::fs::read_to_string(path).unwrap();
        let mut reader = PathReader {
            module: module.clone(),
            out: FilePaths::default(),
            reexporting: false,
            within: None,
        };
        reader.visit_file(&syn::parse_file(&text).expect("a source file syn parses"));
        modules.insert(module, file.clone());
        files.insert(file, reader.out);
    }
    // Where each method of a type whose inherent `impl` is split over files is defined.
    let mut defined: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for (file, found) in &files {
        for method in &found.methods {
            defined
                .entry(method.clone())
                .or_default()
                .insert(file.clone());
        }
    }
    // Only a type whose `impl` is split over files ties files by its method calls: a value is
    // known by its name alone (`decider`), which names a one-file type's values too loosely.
    let mut files_of_type: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for ((ty, _), at) in &defined {
        files_of_type
            .entry(ty)
            .or_default()
            .extend(at.iter().map(String::as_str));
    }
    let split = |ty: &str| files_of_type.get(ty).is_some_and(|at| at.len() > 1);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, found) in &files {
        for call in found.calls.iter().filter(|(ty, _)| split(ty)) {
            if let Some(at) = defined.get(call)
                && let [target] = at.iter().collect::<Vec<_>>().as_slice()
                && *target != file
            {
                edges
                    .entry(file.clone())
                    .or_default()
                    .insert((*target).clone());
            }
        }
        let reexports = found
            .reexports
            .iter()
            .filter(|(name, _)| found.named.contains(name))
            .map(|(_, path)| path);
        for path in found.paths.iter().map(|(_, path)| path).chain(reexports) {
            if let Some(target) = landing(path, &modules, &files, 0)
                && &target != file
            {
                edges.entry(file.clone()).or_default().insert(target);
            }
        }
    }
    edges
}

#[test]
fn no_two_files_import_each_other_even_by_a_longer_circle() {
    let edges = file_edges(&root().join("plug_limit/src"));
    let mut edges = edges;
    let mut circles = Vec::new();
    // Each circle found is reported and broken, so one run names them all.
    while let Some(found) = circle(&edges) {
        if let [from, to, ..] = found.as_slice()
            && let Some(targets) = edges.get_mut(from)
        {
            targets.remove(to);
        }
        circles.push(found.join(" -> "));
    }
    assert!(
        circles.is_empty(),
        "files that import each other (a file's types, functions or re-exports):\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_file_graph_follows_re_exports_to_the_file_that_defines() {
    let dir = std::env::temp_dir().join(format!("plug_limit_arch_{}", std::process::id()));
    let write = |path: &str, text: &str| {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "mod engine;\nmod backend;\n");
    write(
        "engine/mod.rs",
        "pub(crate) use self::cache::DenyCache;\npub(crate) use self::run::Step;\nmod cache;\nmod run;\n\
         pub(crate) struct Decider(DenyCache);\n",
    );
    write(
        "engine/cache.rs",
        "use crate::backend::Backend;\npub(crate) struct DenyCache;\n",
    );
    write(
        "engine/run.rs",
        "use super::Decider;\npub(crate) struct Step;\nfn f() { let _ = crate::engine::DenyCache::new(); }\n",
    );
    write(
        "backend/mod.rs",
        "use crate::engine::DenyCache;\npub(crate) struct Backend;\n",
    );
    let edges = file_edges(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let of = |file: &str| edges.get(file).cloned().unwrap_or_default();
    assert_eq!(
        of("engine/run.rs"),
        BTreeSet::from(["engine/mod.rs".to_owned(), "engine/cache.rs".to_owned()])
    );
    assert_eq!(
        of("engine/mod.rs"),
        BTreeSet::from(["engine/cache.rs".to_owned()])
    );
    assert_eq!(
        of("backend/mod.rs"),
        BTreeSet::from(["engine/cache.rs".to_owned()])
    );
    assert_eq!(
        circle(&edges),
        Some(vec![
            "backend/mod.rs".to_owned(),
            "engine/cache.rs".to_owned(),
            "backend/mod.rs".to_owned()
        ])
    );
}

#[test]
fn the_file_graph_ties_the_files_of_a_split_impl_that_call_each_other() {
    let dir = std::env::temp_dir().join(format!("plug_limit_arch_calls_{}", std::process::id()));
    let write = |path: &str, text: &str| {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "mod engine;\n");
    write(
        "engine/mod.rs",
        "mod run;\nmod conclude;\nmod stack;\npub(crate) struct Decider;\n",
    );
    write(
        "engine/run.rs",
        "use super::Decider;\nimpl Decider {\n    fn run(&self) { self.conclude(); }\n}\n",
    );
    write(
        "engine/conclude.rs",
        "use super::Decider;\nimpl Decider {\n    fn conclude(&self) { self.run(); }\n}\n",
    );
    write(
        "engine/stack.rs",
        "fn f(decider: &super::Decider) {\n    decider.conclude();\n    \
         tracing::debug!(\"{}\", crate::engine::run::X);\n}\n",
    );
    let edges = file_edges(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let of = |file: &str| edges.get(file).cloned().unwrap_or_default();
    assert_eq!(
        of("engine/stack.rs"),
        BTreeSet::from([
            "engine/conclude.rs".to_owned(),
            "engine/mod.rs".to_owned(),
            "engine/run.rs".to_owned()
        ])
    );
    assert_eq!(
        circle(&edges),
        Some(vec![
            "engine/conclude.rs".to_owned(),
            "engine/run.rs".to_owned(),
            "engine/conclude.rs".to_owned()
        ])
    );
}
