//! The explanation as text for a person: aligned tables, coloured on a terminal and plain when
//! piped. Pure functions of an [`Explanation`].

use std::fmt::Write as _;

use super::report::{DomainFit, Explanation, GroupReport, NodeVerdict, Outcome, ScoredNode};

/// How text is styled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Style {
    /// ANSI colours and bold.
    pub color: bool,
}

/// An ANSI style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Paint {
    Bold,
    Green,
    Red,
    Yellow,
    Cyan,
    Dim,
}

impl Style {
    fn paint(self, p: Paint, s: &str) -> String {
        if !self.color || s.is_empty() {
            return s.to_string();
        }
        let code = match p {
            Paint::Bold => "1",
            Paint::Green => "1;32",
            Paint::Red => "1;31",
            Paint::Yellow => "33",
            Paint::Cyan => "36",
            Paint::Dim => "2",
        };
        format!("\x1b[{code}m{s}\x1b[0m")
    }
}

/// A column's alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Align {
    Left,
    Right,
}

/// A table cell: text and how to paint it once padded.
#[derive(Debug, Clone)]
struct Cell(String, Option<Paint>);

fn cell(s: impl Into<String>) -> Cell {
    Cell(s.into(), None)
}

fn painted(s: impl Into<String>, p: Paint) -> Cell {
    Cell(s.into(), Some(p))
}

/// Rows aligned in columns, two spaces apart, indented by two; the last column is not padded.
fn table(out: &mut String, style: Style, align: &[Align], rows: &[Vec<Cell>]) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; cols];
    for row in rows {
        for (i, c) in row.iter().enumerate() {
            widths[i] = widths[i].max(c.0.chars().count());
        }
    }
    for row in rows {
        let mut line = String::from(" ");
        for (i, c) in row.iter().enumerate() {
            let pad = widths[i] - c.0.chars().count();
            let last = i + 1 == row.len();
            let right = align.get(i).copied().unwrap_or(Align::Left) == Align::Right;
            line.push(' ');
            if right {
                line.push_str(&" ".repeat(pad));
            }
            line.push_str(&match c.1 {
                Some(p) => style.paint(p, &c.0),
                None => c.0.clone(),
            });
            if !right && !last {
                line.push_str(&" ".repeat(pad));
            }
            if !last {
                line.push(' ');
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

/// A short column header for a score plugin.
fn short_plugin(name: &str) -> &str {
    match name {
        "TaintToleration" => "Taint",
        "NodeAffinity" => "NodeAff",
        "NodeResourcesFit" => "Fit",
        "VolumeBinding" => "Volume",
        "PodTopologySpread" => "Spread",
        "InterPodAffinity" => "PodAff",
        "DynamicResources" => "Devices",
        "NodeResourcesBalancedAllocation" => "Balanced",
        "ImageLocality" => "Image",
        other => other,
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn verdict(out: &mut String, style: Style, o: &Outcome) {
    if o.schedulable {
        let _ = writeln!(
            out,
            "{} best node {} (score {}); {} of {} fit.",
            style.paint(Paint::Green, "SCHEDULABLE:"),
            style.paint(Paint::Cyan, o.node.as_deref().unwrap_or("")),
            o.score.unwrap_or(0),
            o.feasible_count,
            plural(o.node_count as usize, "node", "nodes"),
        );
    } else {
        let _ = writeln!(out, "{} no node fits.", style.paint(Paint::Red, "UNSCHEDULABLE:"));
    }
    let _ = writeln!(out, "  kube-scheduler: {}", o.message);
    if let Some(n) = &o.nominated_node {
        let victims = if o.victims.is_empty() {
            String::new()
        } else {
            format!(", evicting {}", o.victims.join(", "))
        };
        let _ = writeln!(
            out,
            "  preemption: would nominate {}{victims}",
            style.paint(Paint::Cyan, n)
        );
    }
}

/// The plugins of a set of scored nodes, in the order the first lists them.
fn plugin_columns<'a>(nodes: impl IntoIterator<Item = &'a ScoredNode>) -> Vec<(String, i64)> {
    let mut cols: Vec<(String, i64)> = Vec::new();
    for n in nodes {
        for p in &n.plugins {
            if !cols.iter().any(|(name, _)| *name == p.plugin) {
                cols.push((p.plugin.clone(), p.weight));
            }
        }
    }
    cols
}

fn weighted(n: &ScoredNode, plugin: &str) -> Option<i64> {
    n.plugins.iter().find(|p| p.plugin == plugin).map(|p| p.weighted)
}

fn best_nodes(out: &mut String, style: Style, o: &Outcome) {
    if o.best.is_empty() {
        return;
    }
    let shown = if (o.best.len() as u32) < o.feasible_count {
        format!(", the best {} of {}", o.best.len(), o.feasible_count)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "\n{} (weighted scores: plugin score 0-100 x weight{shown}):",
        style.paint(Paint::Bold, "Best nodes")
    );
    let cols = plugin_columns(&o.best);
    let mut header = vec![
        painted("#", Paint::Bold),
        painted("NODE", Paint::Bold),
        painted("TOTAL", Paint::Bold),
    ];
    header.extend(cols.iter().map(|(p, _)| painted(short_plugin(p), Paint::Bold)));
    let mut weights = vec![cell(""), cell(""), cell("")];
    weights.extend(cols.iter().map(|(_, w)| painted(format!("x{w}"), Paint::Dim)));
    let mut rows = vec![header, weights];
    for n in &o.best {
        let mut row = vec![
            cell(n.rank.to_string()),
            painted(&n.node, Paint::Cyan),
            painted(n.total.to_string(), Paint::Bold),
        ];
        row.extend(
            cols.iter()
                .map(|(p, _)| cell(weighted(n, p).map_or("-".to_string(), |w| w.to_string()))),
        );
        rows.push(row);
    }
    let mut align = vec![Align::Right, Align::Left];
    align.extend(std::iter::repeat_n(Align::Right, cols.len() + 1));
    table(out, style, &align, &rows);
}

fn refused(out: &mut String, style: Style, o: &Outcome) {
    if o.refused.is_empty() {
        return;
    }
    let count = (o.node_count - o.feasible_count) as usize;
    let _ = writeln!(
        out,
        "\n{}: {count} of {} (by the first filter that refused each):",
        style.paint(Paint::Bold, "Refused nodes"),
        plural(o.node_count as usize, "node", "nodes")
    );
    let mut rows = vec![vec![
        painted("FILTER", Paint::Bold),
        painted("REASON", Paint::Bold),
        painted("NODES", Paint::Bold),
        painted("FIRST NODES", Paint::Bold),
    ]];
    for g in &o.refused {
        let more = g.count > g.nodes.len();
        rows.push(vec![
            painted(&g.filter, Paint::Yellow),
            cell(&g.reason),
            cell(g.count.to_string()),
            cell(format!("{}{}", g.nodes.join(", "), if more { ", …" } else { "" })),
        ]);
    }
    table(
        out,
        style,
        &[Align::Left, Align::Left, Align::Right, Align::Left],
        &rows,
    );
}

fn devices(out: &mut String, style: Style, o: &Outcome) {
    if o.devices.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n{} (on the nodes DynamicResources refused, request by request):",
        style.paint(Paint::Bold, "Why the pod's claims cannot be allocated")
    );
    let mut rows = vec![vec![
        painted("CLAIM", Paint::Bold),
        painted("REQUEST", Paint::Bold),
        painted("WHY", Paint::Bold),
        painted("NODES", Paint::Bold),
        painted("FIRST NODES", Paint::Bold),
    ]];
    for g in &o.devices {
        let more = g.count > g.nodes.len();
        rows.push(vec![
            cell(&g.claim),
            cell(&g.request),
            painted(&g.why, Paint::Yellow),
            cell(g.count.to_string()),
            cell(format!("{}{}", g.nodes.join(", "), if more { ", …" } else { "" })),
        ]);
    }
    table(
        out,
        style,
        &[Align::Left, Align::Left, Align::Left, Align::Right, Align::Left],
        &rows,
    );
    for g in &o.devices {
        let _ = writeln!(
            out,
            "  - claim {} request {} on {}: {}",
            g.claim,
            g.request,
            style.paint(Paint::Cyan, &g.example_node),
            g.example
        );
    }
}

fn hints(out: &mut String, style: Style, o: &Outcome) {
    if o.hints.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{}:", style.paint(Paint::Bold, "What would make it fit"));
    for h in &o.hints {
        let _ = writeln!(out, "  - {}", h.text);
    }
    if let Some(c) = &o.hints_caveat {
        let _ = writeln!(out, "  {}", style.paint(Paint::Dim, &format!("({c})")));
    }
}

fn node_detail(out: &mut String, style: Style, d: &NodeVerdict, o: &Outcome) {
    let name = style.paint(Paint::Cyan, &d.node);
    if !d.feasible {
        let by = match &d.filter {
            Some(f) => format!(" by {}: {}", style.paint(Paint::Yellow, f), d.reasons.join(", ")),
            None => String::new(),
        };
        let _ = writeln!(out, "\nNode {name}: {}{by}", style.paint(Paint::Red, "REFUSED"));
        for b in &d.blockers {
            let _ = writeln!(out, "  - {}: {}", b.filter(), b.describe());
        }
        for f in &d.devices {
            let _ = writeln!(
                out,
                "  - DynamicResources: claim {} request {}: {}",
                f.claim, f.request, f.message
            );
        }
        if d.blockers.is_empty() && d.devices.is_empty() {
            let _ = writeln!(
                out,
                "  (nothing the cordon, taint, label, port and resource checks see: the refusal comes from {})",
                d.filter.as_deref().unwrap_or("a filter not re-checked here")
            );
        }
        return;
    }
    let (Some(me), Some(rank)) = (&d.scores, d.rank) else {
        return;
    };
    let _ = writeln!(
        out,
        "\nNode {name}: {}, rank {rank} of {} (score {}).",
        style.paint(Paint::Green, "feasible"),
        o.feasible_count,
        me.total
    );
    let Some(other) = &d.compared_with else {
        return;
    };
    let why = if rank == 1 {
        format!("why {} and not {}", d.node, other.node)
    } else {
        format!("why {} and not {}", other.node, d.node)
    };
    let _ = writeln!(
        out,
        "  Against {} (rank {}, score {}), {why}, weighted scores:",
        style.paint(Paint::Cyan, &other.node),
        other.rank,
        other.total
    );
    let cols = plugin_columns([me, other]);
    let mut rows = vec![vec![
        painted("PLUGIN", Paint::Bold),
        painted("WEIGHT", Paint::Bold),
        painted(&d.node, Paint::Bold),
        painted(&other.node, Paint::Bold),
        painted("DIFF", Paint::Bold),
    ]];
    let diff_cell = |diff: i64| {
        let text = if diff > 0 { format!("+{diff}") } else { diff.to_string() };
        match diff.signum() {
            1 => painted(text, Paint::Green),
            -1 => painted(text, Paint::Red),
            _ => cell(text),
        }
    };
    for (p, w) in &cols {
        let a = weighted(me, p).unwrap_or(0);
        let b = weighted(other, p).unwrap_or(0);
        rows.push(vec![
            cell(p.as_str()),
            cell(w.to_string()),
            cell(a.to_string()),
            cell(b.to_string()),
            diff_cell(a - b),
        ]);
    }
    rows.push(vec![
        painted("TOTAL", Paint::Bold),
        cell(""),
        painted(me.total.to_string(), Paint::Bold),
        painted(other.total.to_string(), Paint::Bold),
        diff_cell(me.total - other.total),
    ]);
    table(
        out,
        style,
        &[Align::Left, Align::Right, Align::Right, Align::Right, Align::Right],
        &rows,
    );
    if me.total == other.total {
        let _ = writeln!(
            out,
            "  Equal totals: the tie-break, a stable hash of the seed, the pod's uid and the node's name, decides."
        );
    }
}

fn ordinal_entry(o: &Outcome, i: usize) -> String {
    o.best
        .get(i)
        .map(|n| format!("{}  {}", n.node, n.total))
        .unwrap_or_default()
}

fn node_summary(d: &NodeVerdict) -> String {
    match (&d.scores, d.rank) {
        (Some(s), Some(r)) => format!("rank {r}, score {}", s.total),
        _ => format!("refused by {}", d.filter.as_deref().unwrap_or("?")),
    }
}

fn what_if(out: &mut String, style: Style, current: &Outcome, w: &Outcome) {
    let _ = writeln!(
        out,
        "\n{} policy {} ({}) beside {}:",
        style.paint(Paint::Bold, "What if:"),
        style.paint(Paint::Bold, &w.policy),
        w.decided_by,
        current.policy
    );
    let verdict_of = |o: &Outcome| -> Cell {
        match (&o.node, o.score) {
            (Some(n), Some(s)) => painted(format!("{n} ({s})"), Paint::Green),
            _ => painted("unschedulable", Paint::Red),
        }
    };
    let mut rows = vec![
        vec![
            cell(""),
            painted(&current.policy, Paint::Bold),
            painted(&w.policy, Paint::Bold),
        ],
        vec![cell("verdict"), verdict_of(current), verdict_of(w)],
        vec![
            cell("feasible"),
            cell(format!("{} of {}", current.feasible_count, current.node_count)),
            cell(format!("{} of {}", w.feasible_count, w.node_count)),
        ],
    ];
    for i in 0..current.best.len().max(w.best.len()) {
        rows.push(vec![
            cell(format!("#{}", i + 1)),
            cell(ordinal_entry(current, i)),
            cell(ordinal_entry(w, i)),
        ]);
    }
    if let (Some(a), Some(b)) = (&current.node_detail, &w.node_detail) {
        rows.push(vec![
            cell(format!("node {}", a.node)),
            cell(node_summary(a)),
            cell(node_summary(b)),
        ]);
    }
    table(out, style, &[Align::Left, Align::Left, Align::Left], &rows);
    for o in [current, w] {
        if !o.schedulable {
            let _ = writeln!(out, "  {}: {}", o.policy, o.message);
        }
    }
}

/// Placements listed in a PodGroup's section; the others are summed up in one line.
const DOMAINS_SHOWN: usize = 5;

/// What a domain of `key` is called: the key's last segment (`rack` for `example.com/rack`).
fn domain_noun(key: Option<&str>) -> &str {
    key.and_then(|k| k.rsplit('/').next())
        .filter(|k| !k.is_empty())
        .unwrap_or("domain")
}

/// One placement: `rack r7: 5 of 8 fit; minCount 8`.
fn domain_line(d: &DomainFit, noun: &str, min_count: u32) -> String {
    let place = match &d.domain {
        Some(v) => format!("{noun} {v}"),
        None => "every node".to_string(),
    };
    let bound = if d.bound > 0 {
        format!(", {} bound there", d.bound)
    } else {
        String::new()
    };
    let taken = if d.chosen { " (the group takes it)" } else { "" };
    format!(
        "{place}: {} of {} fit{bound}; minCount {min_count}{taken}",
        d.fit, d.pending
    )
}

/// The PodGroup section: the group, whether the binder holds it, the cycle's verdict with kube's
/// condition and this pod's message, and each placement's fit.
fn pod_group(out: &mut String, style: Style, g: &GroupReport) {
    let key = g.topology_key.as_deref();
    let noun = domain_noun(key);
    let shape = match (g.min_count, key) {
        (Some(m), Some(k)) => format!(": minCount {m}, topology key {k}"),
        (Some(m), None) => format!(": minCount {m}, no topology key"),
        (None, _) => " (not found)".to_string(),
    };
    let _ = writeln!(
        out,
        "{} {}/{}{shape}; {} pending (this one included), {} bound",
        style.paint(Paint::Bold, "PodGroup"),
        g.namespace,
        g.name,
        plural(g.pending, "pod", "pods"),
        g.bound
    );
    if let Some(h) = &g.held {
        let _ = writeln!(out, "{} {h}", style.paint(Paint::Yellow, "HELD:"));
    }
    if g.reason.is_empty() {
        return;
    }
    let feasible = g.domains.iter().filter(|d| d.feasible).count();
    let plural_noun = format!("{noun}s");
    let (one, many) = if key.is_some() {
        (noun, plural_noun.as_str())
    } else {
        ("placement", "placements")
    };
    let places = |n: usize| plural(n, one, many);
    if g.schedulable {
        let at = match &g.domain {
            Some(d) => format!("takes {noun} {}", style.paint(Paint::Cyan, d)),
            None => "is placed".to_string(),
        };
        let held = if g.domains.is_empty() {
            String::new()
        } else {
            format!(" ({} of {} hold it)", feasible, places(g.domains.len()))
        };
        let _ = writeln!(
            out,
            "{} the group {at}{held}.",
            style.paint(Paint::Green, "SCHEDULABLE:")
        );
    } else {
        let min = g.min_count.unwrap_or(1);
        let none = if key.is_some() {
            format!("no {noun} holds minCount {min} of the group")
        } else {
            format!("the cluster does not hold minCount {min} of the group")
        };
        let _ = writeln!(out, "{} {none}.", style.paint(Paint::Red, "UNSCHEDULABLE:"));
    }
    let status = if g.schedulable { "True" } else { "False" };
    let message = if g.message.is_empty() {
        String::new()
    } else {
        format!(": {}", g.message)
    };
    let _ = writeln!(out, "  PodGroupInitiallyScheduled: {status} ({}){message}", g.reason);
    let _ = writeln!(out, "  kube-scheduler, this pod: {}", g.pod_message);
    if let Some(n) = &g.domains_note {
        let _ = writeln!(out, "  {} {n}", style.paint(Paint::Yellow, "Note:"));
    }
    for l in &g.levels {
        let level_noun = domain_noun(l.topology_key.as_deref());
        let pending = l.domains.first().map_or(0, |d| d.pending);
        let verdict = match &l.chosen {
            Some(d) => format!("takes {level_noun} {}", style.paint(Paint::Cyan, d)),
            None => format!("no {level_noun} taken"),
        };
        let key = l
            .topology_key
            .as_deref()
            .map_or_else(|| ", no topology key".to_string(), |k| format!(", topology key {k}"));
        let _ = writeln!(
            out,
            "\n{} {}{key}: {verdict}; per {level_noun}, its {} tried in order:",
            style.paint(Paint::Bold, "CompositePodGroup"),
            l.composite,
            plural(pending, "pending pod", "pending pods")
        );
        for d in l.domains.iter().take(DOMAINS_SHOWN) {
            let place = match &d.domain {
                Some(v) => format!("{level_noun} {v}"),
                None => "the nodes above".to_string(),
            };
            let taken = if d.chosen { " (taken)" } else { "" };
            let line = format!("{place}: {} of {} fit{taken}", d.fit, d.pending);
            let line = if d.chosen {
                style.paint(Paint::Green, &line)
            } else {
                line
            };
            let _ = writeln!(out, "  {line}");
        }
        if l.domains.len() > DOMAINS_SHOWN {
            let _ = writeln!(out, "  … {} more", l.domains.len() - DOMAINS_SHOWN);
        }
    }
    if g.domains.is_empty() {
        return;
    }
    let min = g.min_count.unwrap_or(1);
    let _ = writeln!(
        out,
        "\n{} the group's {} tried in order, each taking its room:",
        style.paint(
            Paint::Bold,
            &if key.is_some() {
                format!("Per {noun},")
            } else {
                "On every node,".to_string()
            }
        ),
        plural(g.pending, "pending pod", "pending pods")
    );
    for d in g.domains.iter().take(DOMAINS_SHOWN) {
        let line = domain_line(d, noun, min);
        let line = if d.chosen {
            style.paint(Paint::Green, &line)
        } else {
            line
        };
        let _ = writeln!(out, "  {line}");
    }
    let rest = &g.domains[g.domains.len().min(DOMAINS_SHOWN)..];
    if !rest.is_empty() {
        let most = rest.iter().map(|d| d.fit).max().unwrap_or(0);
        let holding = rest.iter().filter(|d| d.feasible).count();
        let _ = writeln!(
            out,
            "  … {} more {}: {holding} holding minCount, at most {most} of {} fit",
            rest.len(),
            if rest.len() == 1 { one } else { many },
            g.pending
        );
    }
}

/// The explanation as text.
pub fn text(e: &Explanation, style: Style) -> String {
    let mut out = String::new();
    let p = &e.pod;
    let state = match &p.bound_to {
        Some(n) => format!("bound to {}", style.paint(Paint::Cyan, n)),
        None => "pending".to_string(),
    };
    let requests: Vec<String> = p.requests.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let requests = if requests.is_empty() {
        "no requests".to_string()
    } else {
        format!("requests {}", requests.join(", "))
    };
    let _ = writeln!(
        out,
        "{} {}/{}: {state}, scheduler {}, {requests}",
        style.paint(Paint::Bold, "Pod"),
        p.namespace,
        p.name,
        p.scheduler_name
    );
    let _ = writeln!(
        out,
        "Cluster: {}, {}; asked the {}, policy {}",
        plural(e.cluster.nodes, "node", "nodes"),
        plural(e.cluster.bound_pods, "bound pod", "bound pods"),
        e.current.decided_by,
        e.current.policy
    );
    for n in &e.notes {
        let _ = writeln!(out, "{} {n}", style.paint(Paint::Yellow, "Note:"));
    }
    out.push('\n');
    if let Some(g) = &e.pod_group {
        pod_group(&mut out, style, g);
        let _ = writeln!(
            out,
            "\n{} (Rank, as if it named no PodGroup):",
            style.paint(Paint::Bold, "This pod alone")
        );
    }
    let o = &e.current;
    verdict(&mut out, style, o);
    if let Some(d) = &o.node_detail {
        node_detail(&mut out, style, d, o);
    }
    best_nodes(&mut out, style, o);
    refused(&mut out, style, o);
    devices(&mut out, style, o);
    hints(&mut out, style, o);
    if let Some(w) = &e.what_if {
        what_if(&mut out, style, o, w);
    }
    out
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
