//! Build script of every Lambda function (and of the cold-start bench's baselines,
//! `hello-lambda` and `hello-secret-lambda`, so they are linked the same way): on Linux,
//! links the binary as a position-dependent executable (`-no-pie`).
//!
//! Why: linked as PIE, a function carries some 34,000 relative relocations (its 800 KB
//! `.rela.dyn`) that the dynamic loader applies at every cold start, writing, and so
//! privately copying, every page of `.data.rel.ro` they point into. Linked at a fixed
//! address the linker resolves them once: measured with `infra/bench cold_start`, `timers`
//! and `skills-bins` init 0.5–0.7 ms sooner, hello 0.2 ms.
//!
//! Trade-off: the executable's own code and data are no longer placed at a random address
//! (its heap, stack and shared libraries still are), as with Go binaries on Lambda. The
//! code is still compiled position-independent, so only this link flag changes; the
//! dependencies (one of them builds a `cdylib`) are untouched.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo::rustc-link-arg-bins=-no-pie");
    }
}
