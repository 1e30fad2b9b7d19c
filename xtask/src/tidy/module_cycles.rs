//! Module cycles: within each crate of the workspace, the modules that share a parent (the
//! crate root's modules, a module's submodules, at every depth) depend on each other in one
//! direction only. A module depends on a sibling when any of its files names the sibling or
//! something inside it by path (`crate::a::b::…`, `super::b::…`, `self::…`, a path relative
//! to the module, or `crate::…` inside a macro body). A module naming its parent's own items
//! (`super::Error`) or its own submodules is no edge: a parent is the interface its children
//! share. Test-only code (`#[cfg(test)]` modules and items) is left out, since tests may use
//! the whole crate.
//!
//! Files are parsed with `syn` and followed through `mod name;` declarations as the compiler
//! does (`name.rs` or `name/mod.rs` beside the declaring file, or in its own folder).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// The modules of one parent and their dependencies on each other, each with the first file
/// where it was seen. Modules are named by their path from the crate root (`tokenizer::vocab`).
#[derive(Debug, Default)]
struct ModuleGraph {
    modules: BTreeSet<String>,
    edges: BTreeMap<String, BTreeMap<String, PathBuf>>,
}

/// Every import cycle among sibling modules of the workspace's crates (`crates/*`, `xtask`,
/// `benches`), one message each.
pub fn violations(root: &Path) -> Result<Vec<String>> {
    let mut violations = Vec::new();
    for entry in crate_entries(root)? {
        let shown = entry.strip_prefix(root).unwrap_or(&entry);
        for graph in module_graphs(&entry)?.values() {
            for (cycle, component) in cycles(graph) {
                let edges: Vec<String> = cycle
                    .windows(2)
                    .map(|pair| {
                        let file = &graph.edges[&pair[0]][&pair[1]];
                        let file = file.strip_prefix(root).unwrap_or(file).display();
                        format!("{} uses {} in {file}", pair[0], pair[1])
                    })
                    .collect();
                let all = if component.len() + 1 > cycle.len() {
                    format!(
                        "; through other paths, {} all depend on each other",
                        component.join(", ")
                    )
                } else {
                    String::new()
                };
                violations.push(format!(
                    "module cycle in the crate of {}: {} ({}{all}); move what they share into a \
                     module below them",
                    shown.display(),
                    cycle.join(" -> "),
                    edges.join("; ")
                ));
            }
        }
    }
    Ok(violations)
}

/// The crate roots (`src/lib.rs`, `src/main.rs`) of every workspace package, in path order.
fn crate_entries(root: &Path) -> Result<Vec<PathBuf>> {
    let mut packages = vec![root.join("xtask"), root.join("benches")];
    let crates = root.join("crates");
    if crates.is_dir() {
        for entry in
            fs::read_dir(&crates).with_context(|| format!("cannot list {}", crates.display()))?
        {
            packages.push(entry?.path());
        }
    }
    let mut entries: Vec<PathBuf> = packages
        .iter()
        .flat_map(|p| [p.join("src/lib.rs"), p.join("src/main.rs")])
        .filter(|p| p.is_file())
        .collect();
    entries.sort();
    Ok(entries)
}

/// Parses the crate rooted at `entry` and collects, for each module with submodules (the crate
/// root as the empty path), the graph of its submodules' dependencies on each other.
fn module_graphs(entry: &Path) -> Result<BTreeMap<Vec<String>, ModuleGraph>> {
    let file = parse(entry)?;
    let dir = entry.parent().unwrap_or(Path::new("."));
    let mut walker = Walker {
        path: Vec::new(),
        file: entry.to_path_buf(),
        child_dir: dir.to_path_buf(),
        modules: BTreeSet::new(),
        references: Vec::new(),
        error: None,
    };
    for item in &file.items {
        if matches!(item, syn::Item::Mod(_)) {
            walker.visit_item(item);
        }
    }
    if let Some(error) = walker.error {
        return Err(error);
    }
    let mut graphs: BTreeMap<Vec<String>, ModuleGraph> = BTreeMap::new();
    for module in &walker.modules {
        let parent = &module[..module.len() - 1];
        graphs
            .entry(parent.to_vec())
            .or_default()
            .modules
            .insert(module.join("::"));
    }
    for (from, segments, file) in &walker.references {
        let Some(target) = resolve(from, segments, &walker.modules) else {
            continue;
        };
        let Some(d) = from.iter().zip(&target).position(|(a, b)| a != b) else {
            continue;
        };
        let sibling = &target[..=d];
        if !walker.modules.contains(sibling) {
            continue;
        }
        let graph = graphs.entry(from[..d].to_vec()).or_default();
        graph
            .edges
            .entry(from[..=d].join("::"))
            .or_default()
            .entry(sibling.join("::"))
            .or_insert_with(|| file.clone());
    }
    Ok(graphs)
}

/// The path from the crate root that `segments`, written in module `from`, names (`None`:
/// something outside the crate, or a name of `from` itself that is no module).
fn resolve(
    from: &[String],
    segments: &[String],
    modules: &BTreeSet<Vec<String>>,
) -> Option<Vec<String>> {
    match segments.first().map(String::as_str)? {
        "crate" => Some(segments[1..].to_vec()),
        "self" => Some([from, &segments[1..]].concat()),
        "super" => {
            let supers = segments.iter().take_while(|s| *s == "super").count();
            let kept = from.len().checked_sub(supers)?;
            Some([&from[..kept], &segments[supers..]].concat())
        }
        first => {
            let child = [from, &[first.to_string()]].concat();
            modules.contains(&child).then(|| [from, segments].concat())
        }
    }
}

fn parse(path: &Path) -> Result<syn::File> {
    let text =
        fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    syn::parse_file(&text).with_context(|| format!("cannot parse {}", path.display()))
}

/// Whether `attrs` hold `#[cfg(test)]`.
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|meta| meta.path().is_ident("test"))
    })
}

/// Walks a crate's modules, recording every module and every path written in each.
struct Walker {
    /// The module path of the code being visited (`["packed", "rows"]`).
    path: Vec<String>,
    /// The file being visited.
    file: PathBuf,
    /// Where the files of the current module's `mod name;` children live.
    child_dir: PathBuf,
    /// Every module that is not test-only.
    modules: BTreeSet<Vec<String>>,
    /// (module, path as written, file) of every path written outside the crate root's own
    /// items.
    references: Vec<(Vec<String>, Vec<String>, PathBuf)>,
    error: Option<anyhow::Error>,
}

impl Walker {
    /// Visits module `m`, declared in the current file, as a child of the current path.
    fn module(&mut self, m: &syn::ItemMod) {
        let name = m.ident.to_string();
        if let Some((_, items)) = &m.content {
            let saved_dir = self.child_dir.clone();
            self.child_dir = self.child_dir.join(&name);
            for item in items {
                self.visit_item(item);
            }
            self.child_dir = saved_dir;
            return;
        }
        let candidates = [
            self.child_dir.join(format!("{name}.rs")),
            self.child_dir.join(&name).join("mod.rs"),
        ];
        let Some(file) = candidates.into_iter().find(|p| p.is_file()) else {
            self.error.get_or_insert(anyhow::anyhow!(
                "{}: no file for `mod {name};`",
                self.file.display()
            ));
            return;
        };
        match parse(&file) {
            Ok(parsed) => {
                let saved = (self.file.clone(), self.child_dir.clone());
                self.child_dir = self.child_dir.join(&name);
                self.file = file;
                for item in &parsed.items {
                    self.visit_item(item);
                }
                (self.file, self.child_dir) = saved;
            }
            Err(error) => {
                self.error.get_or_insert(error);
            }
        }
    }

    /// Records the path `segments`, written in the current module.
    fn record(&mut self, segments: &[String]) {
        if !self.path.is_empty() && !segments.is_empty() {
            self.references
                .push((self.path.clone(), segments.to_vec(), self.file.clone()));
        }
    }

    /// Records every `crate::a::b…` written inside a macro's tokens.
    fn record_tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        for (i, token) in tokens.iter().enumerate() {
            match token {
                TokenTree::Group(group) => self.record_tokens(group.stream()),
                TokenTree::Ident(ident) if ident == "crate" => {
                    let mut segments = vec!["crate".to_string()];
                    let mut rest = &tokens[i + 1..];
                    while let [
                        TokenTree::Punct(a),
                        TokenTree::Punct(b),
                        TokenTree::Ident(name),
                        ..,
                    ] = rest
                        && a.as_char() == ':'
                        && b.as_char() == ':'
                    {
                        segments.push(name.to_string());
                        rest = &rest[3..];
                    }
                    if segments.len() > 1 {
                        self.record(&segments);
                    }
                }
                _ => {}
            }
        }
    }
}

/// The paths a `use` tree imports, each as its segments (a glob ends at its prefix).
fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => out.push([prefix.as_slice(), &[n.ident.to_string()]].concat()),
        syn::UseTree::Rename(r) => out.push([prefix.as_slice(), &[r.ident.to_string()]].concat()),
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(g) => {
            for tree in &g.items {
                use_paths(tree, prefix, out);
            }
        }
    }
}

impl<'ast> Visit<'ast> for Walker {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
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
            syn::Item::Use(i) => &i.attrs,
            _ => &[],
        };
        if is_test_only(attrs) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.path.push(m.ident.to_string());
        self.modules.insert(self.path.clone());
        self.module(m);
        self.path.pop();
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut paths = Vec::new();
        use_paths(&u.tree, &mut Vec::new(), &mut paths);
        for path in paths {
            self.record(&path);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.record(&segments);
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.record_tokens(mac.tokens.clone());
        syn::visit::visit_macro(self, mac);
    }
}

/// For each group of mutually dependent modules (each strongly connected component of more
/// than one module), its shortest cycle through its first module, as module names with the
/// first repeated at the end, and the whole group.
fn cycles(graph: &ModuleGraph) -> Vec<(Vec<String>, Vec<String>)> {
    let reaches = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(m) = stack.pop() {
            for next in graph.edges.get(&m).into_iter().flat_map(BTreeMap::keys) {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&String, BTreeSet<String>> =
        graph.modules.iter().map(|m| (m, reaches(m))).collect();
    let mut done = BTreeSet::new();
    let mut cycles = Vec::new();
    for m in &graph.modules {
        if done.contains(m) || !reach[m].contains(m) {
            continue;
        }
        let component: BTreeSet<&String> = reach[m]
            .iter()
            .filter(|other| reach[other].contains(m))
            .map(|other| graph.modules.get(other).expect("a module"))
            .collect();
        done.extend(component.iter().map(|c| (*c).clone()));
        let component = component.into_iter().cloned().collect();
        cycles.push((shortest_cycle(graph, m), component));
    }
    cycles
}

/// The shortest path from `start` back to itself (breadth first, modules in name order).
fn shortest_cycle(graph: &ModuleGraph, start: &String) -> Vec<String> {
    let mut parent: BTreeMap<String, String> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start.clone()]);
    while let Some(m) = queue.pop_front() {
        for next in graph.edges.get(&m).into_iter().flat_map(BTreeMap::keys) {
            if next == start {
                let mut cycle = vec![m.clone()];
                while let Some(p) = parent.get(cycle.last().expect("not empty")) {
                    cycle.push(p.clone());
                }
                if cycle.last() != Some(start) {
                    cycle.push(start.clone());
                }
                cycle.reverse();
                cycle.push(start.clone());
                return cycle;
            }
            if !parent.contains_key(next) && next != start {
                parent.insert(next.clone(), m.clone());
                queue.push_back(next.clone());
            }
        }
    }
    vec![start.clone()]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `files` (path, text) under a fresh folder standing for the workspace root.
    fn workspace(files: &[(&str, &str)]) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = root.path().join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        root
    }

    #[test]
    fn a_cycle_through_use_super_and_macro_paths_is_named() {
        let root = workspace(&[
            ("crates/k/src/lib.rs", "mod a;\nmod b;\nmod c;\nmod d;\n"),
            ("crates/k/src/a.rs", "use crate::b::B;\npub struct A;\n"),
            ("crates/k/src/b/mod.rs", "mod inner;\npub struct B;\n"),
            (
                "crates/k/src/b/inner.rs",
                "fn f() -> super::super::c::C { todo!() }\n",
            ),
            (
                "crates/k/src/c.rs",
                "pub struct C;\nmacro_rules! m { () => { crate::a::A } }\n",
            ),
            ("crates/k/src/d.rs", "use crate::a::A;\n"),
        ]);
        let violations = violations(root.path()).unwrap();
        assert_eq!(violations.len(), 1, "{violations:?}");
        let v = &violations[0];
        assert!(v.contains("crates/k/src/lib.rs: a -> b -> c -> a"), "{v}");
        assert!(v.contains("b uses c in crates/k/src/b/inner.rs"), "{v}");
    }

    #[test]
    fn test_only_code_and_one_way_dependencies_are_no_cycle() {
        let root = workspace(&[
            (
                "crates/k/src/lib.rs",
                "mod a;\nmod b;\n#[cfg(test)]\nmod testing;\n",
            ),
            (
                "crates/k/src/a.rs",
                "use crate::b::B;\n#[cfg(test)]\nmod tests;\n",
            ),
            ("crates/k/src/a/tests.rs", "use crate::b::B;\n"),
            (
                "crates/k/src/b.rs",
                "pub struct B;\n#[cfg(test)]\nmod tests { use crate::a; }\n\
                 #[cfg(test)]\nfn helper() { crate::a::f(); }\n",
            ),
            ("crates/k/src/testing.rs", "use crate::a; use crate::b;\n"),
        ]);
        assert_eq!(violations(root.path()).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn a_cycle_between_submodules_is_named_and_a_parents_items_are_not_a_dependency() {
        let root = workspace(&[
            ("crates/k/src/lib.rs", "pub mod t;\nmod u;\n"),
            (
                "crates/k/src/t/mod.rs",
                "mod vocab;\nmod special;\nmod bpe;\npub struct Error;\nuse bpe::Bpe;\n",
            ),
            (
                "crates/k/src/t/vocab.rs",
                "use super::special::Matcher;\nuse super::Error;\npub struct Data;\n",
            ),
            (
                "crates/k/src/t/special.rs",
                "pub struct Matcher(crate::t::vocab::Data);\n",
            ),
            (
                "crates/k/src/t/bpe.rs",
                "use super::Error;\nuse self::inner::X;\nmod inner { pub struct X; }\npub struct Bpe;\n",
            ),
            ("crates/k/src/u.rs", "use crate::t::Error;\n"),
        ]);
        let violations = violations(root.path()).unwrap();
        assert_eq!(violations.len(), 1, "{violations:?}");
        let v = &violations[0];
        assert!(
            v.contains("crates/k/src/lib.rs: t::special -> t::vocab -> t::special"),
            "{v}"
        );
        assert!(
            v.contains("t::vocab uses t::special in crates/k/src/t/vocab.rs"),
            "{v}"
        );
    }

    #[test]
    fn a_missing_module_file_is_an_error() {
        let root = workspace(&[("crates/k/src/lib.rs", "mod gone;\n")]);
        assert!(violations(root.path()).is_err());
    }
}
