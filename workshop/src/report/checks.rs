//! The checks a verdict rests on, the same in every lab: each has a short name, whether it
//! held, and the figure it was judged on. The phenomenon is shown only when every check held
//! (and there was at least one); the verdict line names the ones that did not.

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
        });
        ok
    }

    /// Whether every check held, and there was at least one.
    pub fn shown(&self) -> bool {
        !self.0.is_empty() && self.0.iter().all(|c| c.ok)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Check> {
        self.0.iter()
    }

    /// The names of the checks that did not hold.
    pub fn failed(&self) -> impl Iterator<Item = &str> {
        self.0.iter().filter(|c| !c.ok).map(|c| c.name.as_str())
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
}
