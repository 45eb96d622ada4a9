//! The import graph of every crate of the workspace, at the granularity of
//! top-level modules: no crate may have an import circle between two of its
//! top-level modules, and leasehold-core's modules keep a declared layering
//! (`CORE_LAYERS`, lowest first) that a module may only break upward through
//! one of the arrows `CORE_ALLOWED_UPWARD` names with its reason
//! (docs/design.md, "Module layering", lists the same).
//!
//! Each crate's `src/` is parsed with `syn`; an import is a `use` of a path
//! starting with `crate::`, `super::` or `self::`, or such a path in code
//! (types, expressions, patterns, and the tokens of macro calls). A name the
//! crate root re-exports (`crate::Queue`) counts as an import of the module it
//! comes from. Test modules count like any other code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The crates of the workspace: their directory under the root and their root file.
const CRATES: &[(&str, &str)] = &[
    (".", "src/lib.rs"),
    ("core", "src/lib.rs"),
    ("cli", "src/main.rs"),
    ("macros", "src/lib.rs"),
    ("syntax", "src/lib.rs"),
    ("testkit", "src/lib.rs"),
];

/// leasehold-core's top-level modules, lowest first: a module may import the
/// modules before it, never one after it (unless `CORE_ALLOWED_UPWARD` says so).
const CORE_LAYERS: &[&str] = &[
    // the model: states, the table, errors, names, records, policies
    "state",
    "transitions",
    "error",
    "name",
    "visible",
    "id",
    "template",
    "record",
    "group",
    "flow",
    "schedule",
    "lease",
    "answers",
    "config",
    "trace",
    "job_spec",
    "pipeline_spec",
    "contract",
    "json_jobs",
    // Redis, the wire and the client of one queue
    "pool",
    "round_trip",
    "wire",
    "metrics",
    "settle",
    "queue",
    // what a step sees, and the clients above the queue
    "lease_clock",
    "notify",
    "pipeline",
    "inspect",
    "client",
    // the runtime
    "process",
    "worker",
    "otel",
    "__private",
];

/// Upward arrows of leasehold-core that stay, each with why it is benign.
const CORE_ALLOWED_UPWARD: &[(&str, &str, &str)] = &[];

/// One crate's top-level modules and the arrows between them.
#[derive(Default)]
struct Graph {
    /// Every top-level module the crate root declares.
    modules: BTreeSet<String>,
    /// `from -> to`, with the files where `from` imports `to`.
    edges: BTreeMap<(String, String), BTreeSet<String>>,
}

/// The module path of a source file under `src/` (`worker/runner.rs` is
/// `["worker", "runner"]`, `worker/mod.rs` is `["worker"]`), the crate root
/// being `[]`; a root `#[path]` module is renamed by `renames`.
fn module_path(src: &Path, file: &Path, renames: &BTreeMap<String, String>) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("a file under src/");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("a file name");
    let stem = last.strip_suffix(".rs").expect("a .rs file").to_owned();
    if !(parts.is_empty() && (stem == "lib" || stem == "main")) && stem != "mod" {
        parts.push(stem);
    }
    if let Some(first) = parts.first_mut() {
        if let Some(name) = renames.get(first.as_str()) {
            *first = name.clone();
        }
    }
    parts
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The string value of a `#[path = "..."]` attribute, if any.
fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// The leaves of a `use` tree with the path leading to each: `(name, path)`.
fn use_leaves(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(String, Vec<String>)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_leaves(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut full = prefix.clone();
            full.push(n.ident.to_string());
            out.push((n.ident.to_string(), full));
        }
        syn::UseTree::Rename(r) => {
            let mut full = prefix.clone();
            full.push(r.ident.to_string());
            out.push((r.rename.to_string(), full));
        }
        syn::UseTree::Glob(_) => out.push(("*".into(), prefix.clone())),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_leaves(t, prefix, out);
            }
        }
    }
}

/// What the crate root declares: its top-level modules (with the files a
/// `#[path]` gives them) and the names it re-exports from them.
struct Root {
    /// Top-level module names.
    modules: BTreeSet<String>,
    /// A `#[path]` file stem to its module's name.
    renames: BTreeMap<String, String>,
    /// A name at the crate root to the top-level module it comes from.
    reexports: BTreeMap<String, String>,
}

/// Reads the crate root `file`.
fn read_root(file: &syn::File) -> Root {
    let mut root = Root {
        modules: BTreeSet::new(),
        renames: BTreeMap::new(),
        reexports: BTreeMap::new(),
    };
    for item in &file.items {
        if let syn::Item::Mod(m) = item {
            let name = m.ident.to_string();
            if let Some(path) = path_attr(&m.attrs) {
                let stem = path.trim_end_matches(".rs").to_owned();
                root.renames.insert(stem, name.clone());
            }
            root.modules.insert(name);
        }
    }
    for item in &file.items {
        if let syn::Item::Use(u) = item {
            let mut leaves = Vec::new();
            use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
            for (name, path) in leaves {
                let start = match path.first().map(String::as_str) {
                    Some("crate" | "self") => path.get(1),
                    _ => path.first(),
                };
                if let Some(module) = start.filter(|m| root.modules.contains(*m)) {
                    root.reexports.insert(name, module.clone());
                }
            }
        }
    }
    root
}

/// Collects the imports of one file.
struct Imports<'a> {
    /// The crate root's declarations.
    root: &'a Root,
    /// The module the visitor is in (the file's path plus inline modules).
    at: Vec<String>,
    /// The file, as the report names it.
    file: String,
    /// Where the arrows go.
    graph: &'a mut Graph,
}

impl Imports<'_> {
    /// Records the path `segments` (as written, from its first segment) if it
    /// leaves the current top-level module.
    fn path(&mut self, segments: &[String]) {
        let absolute: Vec<String> = match segments.first().map(String::as_str) {
            Some("crate") => segments[1..].to_vec(),
            Some("self") => [&self.at[..], &segments[1..]].concat(),
            Some("super") => {
                let ups = segments.iter().take_while(|s| *s == "super").count();
                if ups > self.at.len() {
                    return;
                }
                [&self.at[..self.at.len() - ups], &segments[ups..]].concat()
            }
            _ => return,
        };
        let Some(first) = absolute.first().cloned() else {
            return;
        };
        let target = if self.root.modules.contains(&first) {
            first
        } else if let Some(module) = self.root.reexports.get(&first) {
            module.clone()
        } else {
            return;
        };
        let Some(from) = self.at.first() else {
            return;
        };
        if *from != target {
            self.graph
                .edges
                .entry((from.clone(), target))
                .or_default()
                .insert(self.file.clone());
        }
    }

    /// Records the `crate::`, `super::` and `self::` paths among the tokens of a macro call.
    fn tokens(&mut self, tokens: proc_macro2::TokenStream) {
        let mut words: Vec<String> = Vec::new();
        let flush = |words: &mut Vec<String>, this: &mut Self| {
            if words.len() > 1 {
                this.path(words);
            }
            words.clear();
        };
        let mut pending_colon = false;
        for tt in tokens {
            match tt {
                proc_macro2::TokenTree::Group(g) => {
                    flush(&mut words, self);
                    self.tokens(g.stream());
                }
                proc_macro2::TokenTree::Ident(i) => {
                    let word = i.to_string();
                    if words.is_empty() {
                        if matches!(word.as_str(), "crate" | "super" | "self") {
                            words.push(word);
                        }
                    } else if pending_colon {
                        words.push(word);
                    } else {
                        flush(&mut words, self);
                        if matches!(word.as_str(), "crate" | "super" | "self") {
                            words.push(word);
                        }
                    }
                    pending_colon = false;
                }
                proc_macro2::TokenTree::Punct(p) if p.as_char() == ':' && !words.is_empty() => {
                    // `::` arrives as two joint colons
                    pending_colon = p.spacing() == proc_macro2::Spacing::Alone;
                }
                _ => {
                    flush(&mut words, self);
                    pending_colon = false;
                }
            }
        }
        flush(&mut words, self);
    }
}

impl<'ast> Visit<'ast> for Imports<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.at.push(m.ident.to_string());
        syn::visit::visit_item_mod(self, m);
        self.at.pop();
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut leaves = Vec::new();
        use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
        for (_, path) in leaves {
            self.path(&path);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.path(&segments);
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }
}

/// The workspace's root directory.
fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The graph of the crate in `dir` whose root file is `root_file`.
fn graph_of(dir: &str, root_file: &str) -> Graph {
    let base = workspace().join(dir);
    let src = base.join("src");
    let parse = |path: &Path| {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let root = read_root(&parse(&base.join(root_file)));
    let mut graph = Graph {
        modules: root.modules.clone(),
        ..Graph::default()
    };
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    for path in files {
        let at = module_path(&src, &path, &root.renames);
        let file = path
            .strip_prefix(workspace())
            .unwrap_or(&path)
            .display()
            .to_string();
        let mut imports = Imports {
            root: &root,
            at,
            file,
            graph: &mut graph,
        };
        imports.visit_file(&parse(&path));
    }
    graph
}

/// The import circles of `graph`: its strongly connected components of more
/// than one module, each with the arrows inside it.
fn circles(graph: &Graph) -> Vec<Vec<String>> {
    let modules: Vec<&String> = graph.modules.iter().collect();
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for (a, b) in graph.edges.keys() {
                if *a == m && seen.insert(b.clone()) {
                    todo.push(b.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        modules.iter().map(|m| (*m, reach(m))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for m in &modules {
        if done.contains(*m) {
            continue;
        }
        let component: BTreeSet<String> = modules
            .iter()
            .filter(|o| *o == m || (reaches[*m].contains(**o) && reaches[**o].contains(m.as_str())))
            .map(|o| (*o).clone())
            .collect();
        done.extend(component.iter().cloned());
        if component.len() > 1 {
            out.push(
                graph
                    .edges
                    .iter()
                    .filter(|((a, b), _)| component.contains(a) && component.contains(b))
                    .map(|((a, b), files)| format!("{a} -> {b} ({})", join(files)))
                    .collect(),
            );
        }
    }
    out
}

/// The files of an arrow, comma-separated.
fn join(files: &BTreeSet<String>) -> String {
    files.iter().cloned().collect::<Vec<_>>().join(", ")
}

#[test]
fn no_crate_has_an_import_circle_between_its_top_level_modules() {
    let mut problems = Vec::new();
    for (dir, root) in CRATES {
        let graph = graph_of(dir, root);
        for circle in circles(&graph) {
            problems.push(format!("{dir}: a circle:\n    {}", circle.join("\n    ")));
        }
    }
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

#[test]
fn core_modules_import_only_lower_layers_but_the_allowed_arrows() {
    let graph = graph_of("core", "src/lib.rs");
    let rank = |m: &str| CORE_LAYERS.iter().position(|l| *l == m);
    let mut problems = Vec::new();
    for m in &graph.modules {
        if rank(m).is_none() {
            problems.push(format!("{m}: not in CORE_LAYERS; give it its layer"));
        }
    }
    for l in CORE_LAYERS {
        if !graph.modules.contains(*l) {
            problems.push(format!("{l}: in CORE_LAYERS but not a module of core"));
        }
    }
    let mut upward = BTreeSet::new();
    for ((from, to), files) in &graph.edges {
        if let (Some(a), Some(b)) = (rank(from), rank(to)) {
            if a < b {
                upward.insert((from.as_str(), to.as_str()));
                if !CORE_ALLOWED_UPWARD
                    .iter()
                    .any(|(f, t, _)| f == from && t == to)
                {
                    problems.push(format!("{from} -> {to}: an upward arrow ({})", join(files)));
                }
            }
        }
    }
    for (from, to, _) in CORE_ALLOWED_UPWARD {
        if !upward.contains(&(*from, *to)) {
            problems.push(format!(
                "{from} -> {to}: allowed in CORE_ALLOWED_UPWARD but gone; remove it (and from docs/design.md)"
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

#[test]
fn docs_list_the_layers_and_the_allowed_upward_arrows() {
    let design =
        std::fs::read_to_string(workspace().join("docs/design.md")).expect("docs/design.md");
    let order = CORE_LAYERS
        .iter()
        .map(|l| format!("`{l}`"))
        .collect::<Vec<_>>()
        .join(", ");
    assert!(
        design.contains(&order),
        "docs/design.md, \"Module layering\", must give the order as written here:\n{order}"
    );
    for (from, to, _) in CORE_ALLOWED_UPWARD {
        let arrow = format!("`{from}` → `{to}`");
        assert!(design.contains(&arrow), "docs/design.md must list {arrow}");
    }
}

#[test]
fn the_scan_sees_uses_code_paths_and_macro_paths_but_not_comments_or_strings() {
    let root = read_root(
        &syn::parse_file("mod a; mod b; mod c; mod d; mod e; mod f; mod m; pub use e::Thing;")
            .expect("a root"),
    );
    let file = syn::parse_file(
        r#"
        use crate::a::X;
        use crate::m::Mine;
        use super::super::b::{self, Y};
        fn g() -> crate::Thing {
            // crate::f::in_a_comment
            let _ = "crate::f::in_a_string";
            let _ = format!("{}", crate::c::h());
            todo!()
        }
        mod tests {
            use super::*;
            use super::super::super::d::Z;
        }
        "#,
    )
    .expect("a file");
    let mut graph = Graph::default();
    Imports {
        root: &root,
        at: vec!["m".into(), "n".into()],
        file: "m/n.rs".into(),
        graph: &mut graph,
    }
    .visit_file(&file);
    let edges: Vec<String> = graph
        .edges
        .keys()
        .map(|(from, to)| format!("{from}->{to}"))
        .collect();
    assert_eq!(edges, ["m->a", "m->b", "m->c", "m->d", "m->e"]);
}
