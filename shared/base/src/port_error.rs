//! [`port_error!`]: declares the error type of a port whose only failure is "the service behind
//! it failed" (the turn queue, the inbox, the credential vendor): a summary and the adapter's
//! underlying error, kept as the source. One definition, so every such port formats, chains and
//! is built the same way.

/// An adapter's underlying error (an SDK, I/O or SQLite error), kept as a port error's source.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Declares `pub struct $name { pub message: String, pub source: Option<BoxError> }` with
/// `new(message, source)`, `bare(message)`, a `Display` of `"$prefix: {message}"` and the
/// source as `Error::source`.
#[macro_export]
macro_rules! port_error {
    ($(#[$attr:meta])* $name:ident, $prefix:literal) => {
        $(#[$attr])*
        #[derive(Debug)]
        pub struct $name {
            /// Summary.
            pub message: String,
            /// The underlying error.
            pub source: Option<$crate::port_error::BoxError>,
        }

        impl $name {
            /// Wraps an adapter error.
            pub fn new(
                message: impl Into<String>, source: impl std::error::Error + Send + Sync + 'static,
            ) -> Self {
                Self { message: message.into(), source: Some(Box::new(source)) }
            }

            /// An error with no underlying cause.
            pub fn bare(message: impl Into<String>) -> Self {
                Self { message: message.into(), source: None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(formatter, concat!($prefix, ": {}"), self.message)
            }
        }

        impl std::error::Error for $name {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.source.as_deref().map(|source| source as _)
            }
        }
    };
}

#[cfg(test)]
#[allow(
    unreachable_pub,
    reason = "the macro declares a public type, here inside a test module"
)]
mod tests {
    use std::error::Error;

    crate::port_error!(
        /// A port error for the test.
        ProbeError,
        "probe unavailable"
    );

    #[test]
    fn displays_the_prefix_and_chains_the_source() {
        let io = std::io::Error::other("disk on fire");
        let err = ProbeError::new("reading x", io);
        assert_eq!(err.to_string(), "probe unavailable: reading x");
        assert_eq!(
            err.source().map(ToString::to_string).as_deref(),
            Some("disk on fire")
        );
        let bare = ProbeError::bare("no queue");
        assert_eq!(bare.to_string(), "probe unavailable: no queue");
        assert!(bare.source().is_none());
    }
}
