//! [`run_with_floor`]: a property test whose checks sit behind a condition (only satisfied
//! commands, only parsed metadata…) fails when too few generated cases reached them, so a
//! generator that drifts cannot leave the property silently unchecked.

use std::cell::Cell;

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Runs `cases` cases of `strategy` through `check`, which returns `Ok(true)` when a case
/// reached the checks under test. Panics on a failing case (with proptest's shrunk input), or
/// when fewer than `floor` cases reached the checks.
pub fn run_with_floor<S: Strategy>(
    name: &str, strategy: S, cases: u32, floor: u32,
    check: impl Fn(S::Value) -> Result<bool, TestCaseError>,
) {
    let mut runner = TestRunner::new(Config {
        cases,
        ..Config::default()
    });
    let reached = Cell::new(0u32);
    let outcome = runner.run(&strategy, |value| {
        if check(value)? {
            reached.set(reached.get() + 1);
        }
        Ok(())
    });
    if let Err(failure) = outcome {
        panic!("{name}: {failure}");
    }
    assert!(
        reached.get() >= floor,
        "{name}: only {} of {cases} cases reached the checks (floor {floor})",
        reached.get()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_cases_that_reach_the_checks() {
        run_with_floor("even", 0u32..1000, 200, 50, |n| Ok(n % 2 == 0));
    }

    #[test]
    #[should_panic(expected = "cases reached the checks")]
    fn too_few_cases_fail() {
        run_with_floor("never", 0u32..1000, 50, 1, |_| Ok(false));
    }

    #[test]
    #[should_panic(expected = "boom")]
    fn a_failing_case_fails() {
        run_with_floor("boom", 0u32..10, 20, 0, |n| {
            proptest::prop_assert!(n < 5, "boom");
            Ok(true)
        });
    }
}
