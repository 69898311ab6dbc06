//! Why a selector could not be compiled or evaluated.

/// Why a selector could not be compiled or evaluated. The messages are kube's: a compile error
/// is `compilation failed: …` (`CompileCELExpression`), a runtime error is cel-go's text with
/// kube's hint after a missing key (`EnhanceRuntimeError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CelError {
    /// The expression does not compile (or is over the limits).
    #[error("compilation failed: {0}")]
    Compile(String),
    /// The evaluation failed.
    #[error("{0}")]
    Runtime(String),
    /// The expression evaluated to something else than a bool (kube's `DeviceMatches`).
    #[error("CEL result of type {0} could not be converted to bool: unsupported type conversion from '{0}' to bool")]
    NotBool(String),
    /// A version attribute is not a semantic version (kube's `DeviceMatches`).
    #[error("attribute {name}: parse semantic version: {message}")]
    Attribute {
        /// The attribute's qualified name.
        name: String,
        /// The parser's complaint.
        message: String,
    },
}

impl CelError {
    /// kube's `cel.EnhanceRuntimeError`: a missing key gets a hint about optional chaining.
    pub(super) fn runtime(message: String) -> Self {
        if message.contains("no such key:") {
            Self::Runtime(format!(
                "{message}. consider using CEL optional chaining (.? followed by orValue()) or guarding the check \
                 with has() for optional fields"
            ))
        } else {
            Self::Runtime(message)
        }
    }
}
