//! Recognising a provider error that means "the prompt did not fit the model's context window"
//! (spec §2.6, "Recognized overflow errors"), telling it apart from rate limits, billing and
//! configuration errors that use similar words, and reading the prompt size the provider reported.
//!
//! Two strengths of classification exist. [`is_context_overflow`] accepts only wordings known
//! to come from a provider's overflow error. [`is_likely_context_overflow`] is what overflow
//! recovery uses: it first rules out rate-limit, billing and "context window too small"
//! messages, then accepts the strict wordings and, failing those, a broad hint (for example
//! "context window … exceeded" or "prompt … too long").
//!
//! All checks are case-insensitive and look for substrings anywhere in the text, so a provider's
//! JSON error body can be passed as it is.

use std::sync::LazyLock;

use regex::Regex;

/// Whether `text` is one of the provider wordings known to mean a context-window overflow.
///
/// Recognised, among others: Anthropic `prompt is too long: N tokens > M maximum` and
/// `request_too_large`; OpenAI `context_length_exceeded`, `maximum context length` and
/// `exceeds the context window`; Bedrock `Input is too long for requested model`,
/// `input token count exceeds the maximum number of input tokens` and `too many input tokens`;
/// Vertex/Gemini `input exceeds the maximum number of tokens`; Ollama, llama.cpp and vLLM
/// (`context length exceeded`, `exceeds the available context size`, `This model's maximum
/// context length is N tokens`); HTTP 413 "too large"; the `model_context_window_exceeded` stop
/// reason; and the Chinese proxy messages of the spec.
///
/// Tokens-per-minute rate limits (Groq answers them with 413) and "reasoning is mandatory"
/// errors are never an overflow, whatever else they say.
pub fn is_context_overflow(text: &str) -> bool {
    let lower = text.to_lowercase();
    if is_tokens_per_minute_limit(&lower) || is_reasoning_requirement(&lower) {
        return false;
    }
    let has = |needle: &str| lower.contains(needle);
    OVERFLOW_PHRASES.iter().any(|phrase| has(phrase))
        || OVERFLOW_PHRASE_PAIRS
            .iter()
            .any(|(first, second)| has(first) && has(second))
        || (has("request size exceeds") && (has("context window") || has("context length")))
        || (has("max_tokens") && has("exceed") && has("context"))
        || (has("input length") && has("exceed") && has("context"))
        || (HTTP_413.is_match(&lower) && has("too large"))
        || CHINESE_OVERFLOW_PHRASES
            .iter()
            .any(|phrase| text.contains(phrase))
        || PROVIDER_OVERFLOW_PATTERNS
            .iter()
            .any(|pattern| pattern.is_match(&lower))
}

/// Whether `text` probably reports a context-window overflow: the error overflow recovery
/// compacts and retries on.
///
/// Rejected first, whatever else the text says: tokens-per-minute limits, "reasoning is
/// mandatory" errors, billing errors (HTTP 402, "payment required", "billing", insufficient
/// credits), "context window too small / minimum is" configuration errors and rate limits
/// (HTTP 429, "rate limit", "too many requests", quota, throttling, tokens per day). Then any
/// text [`is_context_overflow`] accepts is an overflow, and otherwise a broad hint decides:
/// "context … overflow", "context window … exceeded / too large / limit / requested",
/// "prompt … too long / too large / exceeds", or "request / input … tokens … exceed".
pub fn is_likely_context_overflow(text: &str) -> bool {
    let lower = text.to_lowercase();
    if is_tokens_per_minute_limit(&lower)
        || is_reasoning_requirement(&lower)
        || BILLING.is_match(&lower)
        || CONTEXT_WINDOW_TOO_SMALL.is_match(&lower)
        || RATE_LIMIT.is_match(&lower)
    {
        return false;
    }
    is_context_overflow(text) || OVERFLOW_HINT.is_match(&lower)
}

/// Whether `text` reports that compaction itself failed on an overflow: it mentions compaction
/// or a failed summarization, and is overflow-shaped ([`is_likely_context_overflow`], or a bare
/// "context overflow"). Overflow recovery must not answer such an error with another compaction.
pub fn is_compaction_failure(text: &str) -> bool {
    let lower = text.to_lowercase();
    let mentions_compaction = ["compaction", "summarization failed", "summarisation failed"]
        .iter()
        .any(|term| lower.contains(term));
    mentions_compaction && (is_likely_context_overflow(text) || lower.contains("context overflow"))
}

/// The prompt size, in tokens, that an overflow error reports, if it reports one.
///
/// Understood: `prompt is too long: N tokens > M maximum` (Anthropic), `prompt is too long: N,
/// model maximum context length: M`, `token limit: M (requested: N)`, `requested N tokens` and
/// `requested about N tokens` (OpenAI, vLLM, OpenRouter), `resulted in N tokens`, `request (N
/// tokens) exceeds the available context size` (llama.cpp), `input token count (N) exceeds`
/// (Gemini), `request contains N tokens` (xAI), and `input length and max_tokens exceed context
/// limit (i.e N + K > M)`, where only the input part `N` counts: `K` is the reserved output.
/// Digits may be grouped with commas. Zero is not a size; `None` when nothing matches.
pub fn observed_prompt_tokens(text: &str) -> Option<u64> {
    PROMPT_TOKEN_PATTERNS.iter().find_map(|pattern| {
        let digits = pattern.captures(text)?.get(1)?.as_str().replace(',', "");
        digits.parse::<u64>().ok().filter(|&tokens| tokens > 0)
    })
}

/// Lower-case substrings that alone identify an overflow.
const OVERFLOW_PHRASES: [&str; 19] = [
    "request_too_large",
    "request exceeds the maximum size",
    "context length exceeded",
    "context_length_exceeded",
    "maximum context length",
    "prompt is too long",
    "prompt too long",
    "exceeds model context window",
    "exceeds the context window",
    "model token limit",
    "context overflow:",
    "exceed context limit",
    "exceeds the model's maximum context",
    "context_window_exceeded",
    "exceeds the available context size",
    "input is too long",
    "too many input tokens",
    "maximum prompt length",
    "reduce the length of the messages",
];

/// Pairs of lower-case substrings that identify an overflow when both occur.
const OVERFLOW_PHRASE_PAIRS: [(&str, &str); 2] = [
    ("invalid_argument", "maximum number of tokens"),
    ("input exceeds", "maximum number of tokens"),
];

/// Overflow messages of Chinese-language proxies ("context too long", "context exceeded", …).
const CHINESE_OVERFLOW_PHRASES: [&str; 5] = [
    "上下文过长",
    "上下文超出",
    "上下文长度超",
    "超出最大上下文",
    "请压缩上下文",
];

/// Compiles one of this module's fixed patterns.
fn pattern(source: &str) -> Regex {
    Regex::new(source).unwrap_or_else(|error| panic!("invalid built-in pattern {source}: {error}"))
}

/// Provider wordings that need more than a substring (applied to lower-cased text).
static PROVIDER_OVERFLOW_PATTERNS: LazyLock<[Regex; 3]> = LazyLock::new(|| {
    [
        // Bedrock, Gemini: "the input token count (N) exceeds the maximum number of tokens".
        pattern(r"(?s)input token count.*exceeds the maximum number of (?:input )?tokens"),
        // Generic: "input too long for the model", "input is too long for this model".
        pattern(r"input (?:is )?too long for (?:the |this |requested )?model"),
        // Cohere: "total number of tokens in the prompt cannot exceed N".
        pattern(r"(?s)total (?:number of )?tokens\b.*\bexceed"),
    ]
});

/// An HTTP 413 status as a word of its own (not digits inside a token count).
static HTTP_413: LazyLock<Regex> = LazyLock::new(|| pattern(r"\b413\b"));

/// Billing and payment errors (applied to lower-cased text).
static BILLING: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"\b402\b|payment required|billing|insufficient (?:credits?|balance|funds)|credit balance|out of credits|add more credits",
    )
});

/// "The configured context window is below the minimum" (applied to lower-cased text).
static CONTEXT_WINDOW_TOO_SMALL: LazyLock<Regex> =
    LazyLock::new(|| pattern(r"(?s)context window.*(?:too small|minimum is)"));

/// Rate limits and quotas (applied to lower-cased text). HTTP 429 must stand alone, so that a
/// token count such as `201429` is not taken for it.
static RATE_LIMIT: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"rate[ _-]?limit|too many requests|requests per (?:second|minute|hour|day)|quota|throttl|\b429\b|tokens per day|\btpd\b|resource[ _]exhausted",
    )
});

/// The broad overflow hint of [`is_likely_context_overflow`] (applied to lower-cased text).
static OVERFLOW_HINT: LazyLock<Regex> = LazyLock::new(|| {
    pattern(concat!(
        r"(?s)context.*overflow",
        r"|context window.*(?:exceed|too (?:large|long)|limit|requested)",
        r"|prompt.*(?:too (?:large|long)|exceed)",
        r"|(?:request|input).*tokens?.*(?:exceed|too (?:large|long|many))",
    ))
});

/// Where an overflow error states the prompt size; group 1 is the count. Tried in order.
static PROMPT_TOKEN_PATTERNS: LazyLock<[Regex; 9]> = LazyLock::new(|| {
    [
        pattern(
            r"(?i)input length(?:\s+and\s+max_tokens)?\s+exceeds?\s+context(?:\s+limit|\s+window)?\s*\(i\.e\.?\s*([\d,]+)\s*\+\s*[\d,]+\s*>\s*[\d,]+\)",
        ),
        pattern(r"(?i)prompt is too long:\s*([\d,]+)\s*tokens?\s*>\s*[\d,]+\s*maximum"),
        pattern(
            r"(?i)prompt is too long:\s*([\d,]+)\s*,\s*model maximum context length\s*:\s*[\d,]+",
        ),
        pattern(r"(?i)token limit\s*:\s*[\d,]+\s*\(\s*requested\s*:\s*([\d,]+)\s*\)"),
        pattern(r"(?i)requested\s+(?:about\s+)?([\d,]+)\s+tokens"),
        pattern(r"(?i)resulted in\s+([\d,]+)\s+tokens"),
        pattern(r"(?i)request\s*\(\s*([\d,]+)\s+tokens\s*\)\s*exceeds"),
        pattern(r"(?i)input token count\s*\(\s*([\d,]+)\s*\)\s*exceeds"),
        pattern(r"(?i)request contains\s+([\d,]+)\s+tokens"),
    ]
});

/// Tokens-per-minute rate limits, which Groq reports with HTTP 413 (`lower` is lower-cased).
fn is_tokens_per_minute_limit(lower: &str) -> bool {
    static TPM: LazyLock<Regex> = LazyLock::new(|| pattern(r"\btpm\b"));
    lower.contains("tokens per minute") || TPM.is_match(lower)
}

/// Errors saying the model cannot run with reasoning turned off (`lower` is lower-cased).
fn is_reasoning_requirement(lower: &str) -> bool {
    lower.contains("reasoning is mandatory")
        || lower.contains("reasoning is required")
        || lower.contains("requires reasoning")
        || (lower.contains("reasoning") && lower.contains("cannot be disabled"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spec vector 30.
    const STRICT_OVERFLOWS: [&str; 9] = [
        "request_too_large",
        "Request exceeds the maximum size",
        "prompt is too long: 208423 tokens > 200000 maximum",
        "413 Request Entity Too Large",
        "Request size exceeds model context window",
        "Your request exceeded model token limit: 262144 (requested: 291351)",
        "input length and max_tokens exceed context limit (i.e 156321 + 48384 > 200000)",
        "Unhandled stop reason: model_context_window_exceeded",
        "上下文过长",
    ];

    /// Spec vector 31.
    const NOT_OVERFLOWS: [&str; 5] = [
        "rate limit exceeded",
        "request size exceeds upload limit",
        "model not found",
        "Let's investigate the context overflow bug",
        "400 Reasoning is mandatory for this endpoint and cannot be disabled.",
    ];

    /// The provider wordings the brief names, none of which is in the spec's vectors.
    const PROVIDER_OVERFLOWS: [&str; 14] = [
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 201429 tokens > 200000 maximum"}}"#,
        r#"{"error":{"code":"context_length_exceeded","message":"Input tokens exceed the configured limit"}}"#,
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.",
        "ValidationException: Input is too long for requested model.",
        "ValidationException: input is too long",
        "ValidationException: The input token count exceeds the maximum number of input tokens allowed for this model.",
        "ValidationException: Too many input tokens. Max input tokens: 200000",
        "400 The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).",
        "ollama error: context length exceeded",
        "the request exceeds the available context size, try increasing it",
        "request (5000 tokens) exceeds the available context size (4096 tokens)",
        "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens (39000 in the messages, 1000 in the completion).",
        "Your input exceeds the context window of this model. Please adjust your input and try again.",
        "too many tokens: total number of tokens in the prompt cannot exceed 4081 - received 5000",
    ];

    #[test]
    fn spec_vector_30_is_a_strict_overflow() {
        for text in STRICT_OVERFLOWS {
            assert!(is_context_overflow(text), "strict should accept: {text}");
            assert!(
                is_likely_context_overflow(text),
                "likely should accept: {text}"
            );
        }
    }

    #[test]
    fn spec_vector_31_is_not_a_strict_overflow() {
        for text in NOT_OVERFLOWS {
            assert!(!is_context_overflow(text), "strict should reject: {text}");
        }
    }

    #[test]
    fn provider_overflow_wordings_are_strict_overflows() {
        for text in PROVIDER_OVERFLOWS {
            assert!(is_context_overflow(text), "strict should accept: {text}");
            assert!(
                is_likely_context_overflow(text),
                "likely should accept: {text}"
            );
        }
    }

    #[test]
    fn spec_vector_32_likely_overflow() {
        for text in [
            "Model context window is 128k tokens, you requested 256k tokens",
            "Prompt too large for this model",
            "Context window exceeded: too many tokens per request.",
        ] {
            assert!(
                !is_context_overflow(text),
                "only the hint should accept: {text}"
            );
            assert!(
                is_likely_context_overflow(text),
                "likely should accept: {text}"
            );
        }
        for text in [
            "Model context window too small (minimum is 128k tokens)",
            "429 Too Many Requests",
            "402 Payment Required: request token limit exceeded for this billing plan",
        ] {
            assert!(
                !is_likely_context_overflow(text),
                "likely should reject: {text}"
            );
        }
    }

    #[test]
    fn exclusions_win_over_overflow_wordings() {
        for text in [
            // Groq's 413 for a tokens-per-minute limit.
            "413 Request too large for model on tokens per minute (TPM): Limit 6000, Requested 9000",
            "Request too large: TPM limit reached, prompt is too long for this tier",
            "400 Reasoning is mandatory for this endpoint; prompt is too long",
        ] {
            assert!(!is_context_overflow(text), "strict should reject: {text}");
            assert!(
                !is_likely_context_overflow(text),
                "likely should reject: {text}"
            );
        }
        for text in [
            "ThrottlingException: Too many tokens, please wait before trying again.",
            "Rate limit reached: request input tokens exceed your quota",
            "request reached organization TPD rate limit, current: 1506556, limit: 1500000",
            "You exceeded your current quota, please check your plan and billing details.",
            "RESOURCE_EXHAUSTED: prompt tokens per day exceeded",
            "Context window too small: minimum is 16000 tokens",
            "Insufficient credits: the prompt exceeds your remaining balance",
        ] {
            assert!(
                !is_likely_context_overflow(text),
                "likely should reject: {text}"
            );
        }
    }

    #[test]
    fn status_codes_are_matched_as_words_not_digits_of_a_count() {
        // "201429" and "141300" hold 429 and 413 but are token counts.
        assert!(is_likely_context_overflow(
            "prompt is too long: 201429 tokens > 200000 maximum"
        ));
        assert!(!is_context_overflow("payload of 141300 bytes is too large"));
        assert!(is_context_overflow("HTTP 413: payload too large"));
    }

    #[test]
    fn unrelated_errors_are_not_likely_overflows() {
        for text in [
            "",
            "model not found",
            "invalid api key",
            "500 Internal Server Error",
            "overloaded_error: Overloaded",
            "tool_use ids must be unique",
        ] {
            assert!(
                !is_likely_context_overflow(text),
                "likely should reject: {text}"
            );
        }
    }

    #[test]
    fn compaction_failures_are_overflow_errors_that_mention_compaction() {
        assert!(is_compaction_failure(
            "Auto-compaction failed: prompt is too long: 210000 tokens > 200000 maximum"
        ));
        assert!(is_compaction_failure(
            "Summarization failed: context window exceeded"
        ));
        assert!(is_compaction_failure(
            "compaction aborted: context overflow"
        ));
        assert!(!is_compaction_failure(
            "prompt is too long: 210000 tokens > 200000 maximum"
        ));
        assert!(!is_compaction_failure("compaction failed: network error"));
        assert!(!is_compaction_failure(
            "compaction failed: 429 Too Many Requests"
        ));
    }

    #[test]
    fn spec_vector_33_observed_prompt_tokens() {
        assert_eq!(
            observed_prompt_tokens(
                "400 invalid_request_error: prompt is too long: 277403 tokens > 200000 maximum"
            ),
            Some(277_403)
        );
        assert_eq!(
            observed_prompt_tokens("Context window exceeded: requested 12000 tokens"),
            Some(12_000)
        );
    }

    #[test]
    fn observed_prompt_tokens_reads_each_provider_shape() {
        let cases = [
            (
                "prompt is too long: 1,234,567 tokens > 1,000,000 maximum",
                Some(1_234_567),
            ),
            (
                "prompt is too long: 150000, model maximum context length: 131072",
                Some(150_000),
            ),
            (
                "Your request exceeded model token limit: 262144 (requested: 291351)",
                Some(291_351),
            ),
            (
                "input length and max_tokens exceed context limit (i.e 156321 + 48384 > 200000)",
                Some(156_321),
            ),
            (
                "This model's maximum context length is 8192 tokens. However, your messages resulted in 8545 tokens.",
                Some(8_545),
            ),
            (
                "This endpoint's maximum context length is 200000 tokens. However, you requested about 250123 tokens",
                Some(250_123),
            ),
            (
                "request (5000 tokens) exceeds the available context size (4096 tokens)",
                Some(5_000),
            ),
            (
                "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).",
                Some(1_196_265),
            ),
            (
                "This model's maximum prompt length is 131072 but the request contains 537812 tokens.",
                Some(537_812),
            ),
            (
                "Model context window is 128k tokens, you requested 256k tokens",
                None,
            ),
            ("requested 0 tokens", None),
            ("requested 99999999999999999999999 tokens", None),
            ("model not found", None),
        ];
        for (text, expected) in cases {
            assert_eq!(observed_prompt_tokens(text), expected, "text: {text}");
        }
    }
}

/// The window a provider states in its overflow error (`… > 200000 maximum`, `maximum context
/// length is 8192 tokens`, `context window of 4096`), to size later requests by.
pub fn stated_window(error: &str) -> Option<u64> {
    static PATTERN: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?:>\s*(\d{3,})\s*maximum|maximum context length is\s*(\d{3,})|context (?:window|length|size)(?: is| of)?\s*(\d{3,}))",
        )
        .expect("valid pattern")
    });
    let lower = error.to_ascii_lowercase();
    let captures = PATTERN.captures(&lower)?;
    captures
        .iter()
        .skip(1)
        .flatten()
        .find_map(|found| found.as_str().parse().ok())
}

#[cfg(test)]
mod stated_window_tests {
    use super::stated_window;

    #[test]
    fn the_stated_window_is_read_from_common_overflow_errors() {
        assert_eq!(
            stated_window("prompt is too long: 277403 tokens > 200000 maximum"),
            Some(200_000)
        );
        assert_eq!(
            stated_window(
                "This model's maximum context length is 8192 tokens. However, you requested 9000"
            ),
            Some(8_192)
        );
        assert_eq!(stated_window("rate limit exceeded"), None);
    }
}
