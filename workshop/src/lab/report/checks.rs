//! The checks a verdict rests on, the same in every lab: each has a short name, whether it
//! held, and the figure it was judged on. The phenomenon is shown only when every check held
//! (and there was at least one); the verdict line names the ones that did not. A check whose
//! phase could not run on the cluster is skipped: the verdict covers the checks that ran.

use super::events::Check;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Checks(Vec<Check>);

impl Checks {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one check and returns whether it held.
    pub fn check(&mut self, name: &str, ok: bool, detail: impl Into<String>) -> bool {
        self.0.push(Check {
            name: name.into(),
            ok,
            detail: detail.into(),
            skipped: false,
        });
        ok
    }

    /// Records a check that could not be made, and why (`this cluster does not offer
    /// CreatePartitions`).
    pub fn skip(&mut self, name: &str, reason: impl Into<String>) {
        self.0.push(Check {
            name: name.into(),
            ok: false,
            detail: reason.into(),
            skipped: true,
        });
    }

    /// Whether every check that ran held, and at least one ran.
    pub fn shown(&self) -> bool {
        let mut ran = self.0.iter().filter(|c| !c.skipped).peekable();
        ran.peek().is_some() && ran.all(|c| c.ok)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Check> {
        self.0.iter()
    }

    /// The names of the checks that did not hold.
    pub fn failed(&self) -> impl Iterator<Item = &str> {
        self.0
            .iter()
            .filter(|c| !c.ok && !c.skipped)
            .map(|c| c.name.as_str())
    }

    /// The names of the checks that were skipped.
    pub fn skipped(&self) -> impl Iterator<Item = &str> {
        self.0.iter().filter(|c| c.skipped).map(|c| c.name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_only_when_every_check_held() {
        let mut checks = Checks::new();
        assert!(!checks.shown(), "no checks, nothing shown");
        assert!(checks.check("skew", true, "4.38x"));
        assert!(checks.shown());
        assert!(!checks.check("spread", false, "1.9x"));
        assert!(!checks.shown());
        assert_eq!(checks.failed().collect::<Vec<_>>(), ["spread"]);
    }

    #[test]
    fn a_skipped_check_neither_passes_nor_fails() {
        let mut checks = Checks::new();
        checks.skip("increase", "this cluster does not offer CreatePartitions");
        assert!(!checks.shown(), "nothing ran, nothing shown");
        checks.check("fix", true, "0 violations");
        assert!(checks.shown(), "the verdict covers what ran");
        assert_eq!(checks.failed().count(), 0);
        assert_eq!(checks.skipped().collect::<Vec<_>>(), ["increase"]);
        checks.check("other", false, "1");
        assert!(!checks.shown());
        assert_eq!(checks.failed().collect::<Vec<_>>(), ["other"]);
    }
}
