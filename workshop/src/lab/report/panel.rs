//! A lab's panel: the few figures of a phase a room reads from across the room (the payments
//! applied twice, the keys that moved), and the members, tenants or keys they belong to, each
//! under its own name. A lab emits one where it has measured them, so a panel only ever holds
//! what was measured up to that moment; the terminal shows the same figures in the lab's own
//! tables and prose, and leaves panels to views with room for them.

use serde::Serialize;

/// One panel of figures, titled by what it counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Panel {
    /// What the panel counts: `payments applied twice`.
    pub title: String,
    /// The key figures, shown large.
    pub figures: Vec<Figure>,
    /// Who or what the figures are spread over (members, tenants, keys), one bar each.
    pub bars: Vec<Bar>,
}

/// A key figure: its value as measured and what it counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Figure {
    pub label: String,
    /// As the lab shows it: `25`, `€1,234.56`, `7 of 8`.
    pub value: String,
    /// Whether it is the failure the lab exists to show (a view marks it).
    pub bad: bool,
}

/// One named share of a panel: `billing-3`, 25, `generation 2 -> 3`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bar {
    /// Who or what: a member's name, a tenant, a key.
    pub label: String,
    pub value: u64,
    /// What else the lab measured of it, or empty.
    pub note: String,
    pub bad: bool,
}

impl Panel {
    pub fn new(title: impl Into<String>) -> Self {
        Panel {
            title: title.into(),
            figures: Vec::new(),
            bars: Vec::new(),
        }
    }

    /// Adds a key figure.
    pub fn figure(mut self, label: impl Into<String>, value: impl ToString, bad: bool) -> Self {
        self.figures.push(Figure {
            label: label.into(),
            value: value.to_string(),
            bad,
        });
        self
    }

    /// Adds a bar.
    pub fn bar(
        mut self,
        label: impl Into<String>,
        value: u64,
        note: impl Into<String>,
        bad: bool,
    ) -> Self {
        self.bars.push(Bar {
            label: label.into(),
            value,
            note: note.into(),
            bad,
        });
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panel_serialises_its_figures_and_bars_in_order() {
        let panel = Panel::new("payments applied twice")
            .figure("duplicates", 25, true)
            .bar("billing-3", 25, "generation 1", true);
        assert_eq!(
            serde_json::to_value(&panel).unwrap(),
            serde_json::json!({
                "title": "payments applied twice",
                "figures": [{"label": "duplicates", "value": "25", "bad": true}],
                "bars": [{"label": "billing-3", "value": 25, "note": "generation 1", "bad": true}],
            })
        );
    }
}
