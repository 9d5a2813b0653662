//! Shell analysis (spec §7.3): split a command string into the simple commands a shell would
//! run, with the argv each one gets, or say exactly why the string is refused.
//!
//! This module owns tokenising only. It does not resolve executables, match allowlists or
//! decide anything: the policy layer reads [`ShellAnalysis`] and does that. It does no I/O.
//!
//! POSIX analysis runs in one pass over the bytes (every syntax character is ASCII, so byte
//! positions are always character boundaries where it matters). It:
//! 1. refuses any line continuation (a backslash before `\n` or `\r`), anywhere, first;
//! 2. splits chains on `&&`, `||`, `;` and pipelines on `|`, outside quotes and escapes;
//! 3. refuses every other operator and substitution with the reason strings of §7.3;
//! 4. consumes heredoc bodies (`<<DELIM`, `<<-DELIM`, `<<'DELIM'`, `<<"DELIM"`).
//!
//! Every loop moves forward through the input and no position is revisited, so the work is
//! linear in the input size, whatever the input (1 MB of `{`, `${`, quotes or heredocs).
//!
//! # Where clawless reads differently from OpenClaw's tokenizer
//!
//! clawless reads words as `sh` does. An allowed command runs rebuilt from these words (each
//! one single-quoted, §7.6), so the words checked are the words run whichever reading is
//! used; reading as `sh` does keeps what is checked, shown and pinned in "allow always"
//! entries equal to what the text means to the shell a person approves it for. Two readings
//! change a decision (deviation `sh-parsing`, see [`deviation`](super::deviation)):
//! - A comment ends at the newline, not at the end of the input: `ls # x⏎rm -rf /` is
//!   refused for its newline instead of being read as `ls`.
//! - Words split on ASCII space and tab only. `sh` does not split on U+00A0, U+2000–U+200B,
//!   U+3000, U+FEFF or other Unicode spaces (nor on VT, FF or U+001C–U+001F), while
//!   OpenClaw's tokenizer does; `rg<U+00A0>-n` is one word naming no file.
//!
//! Places where a shell could see other words than a simple reader are reported on the
//! segment as a [`ShellHazard`], for people reading a verdict; they no longer refuse anything,
//! since the rebuilt command makes every word literal:
//! - `#` starts a comment only at the very start of a word, as in `sh`: `''#x` is the
//!   argument `#x` ([`ShellHazard::EmptyQuotesBeforeHash`]), and `echo a;#x` is a comment;
//! - Unicode or control whitespace outside single quotes ([`ShellHazard::NonAsciiWhitespace`]);
//! - unquoted `$IFS` / `${IFS…}`, or an assignment to `IFS` ([`ShellHazard::IfsExpansion`]);
//! - bash brace expansion `{a,b}`, `{1..3}` ([`ShellHazard::BraceExpansion`]);
//! - a partly quoted heredoc delimiter (`<<'EO'F`, `<<E"OF"`, `<<\EOF`), which still makes
//!   the whole heredoc literal in `sh` and still ends at `EOF`
//!   ([`ShellHazard::PartlyQuotedHeredocDelimiter`]);
//! - bash `$'…'` / `$"…"` quoting; the argv keeps `dash`'s reading, a literal `$`
//!   ([`ShellHazard::AnsiCQuote`]).
//!
//! Other readings: `${…}` is one unit up to its closing brace, as `sh` reads it, so
//! `${x:-a b}` is one word (`$(` or a backtick inside it is refused like anywhere else); text
//! after a heredoc body's terminator (another command line) is refused as a newline; heredoc
//! redirections are not arguments: `tee f <<EOF` has argv `["tee","f"]` and the heredoc is
//! described in [`ShellSegment::heredocs`].
//!
//! On Windows (`Platform::Windows`) a separate, coarser tokenizer applies (see
//! [`analyze_shell_command`]).

use serde::Serialize;

use super::Platform;

#[cfg(test)]
mod tests;

const UNTERMINATED_QUOTE: &str = "unterminated shell quote/escape";
const DOLLAR_PAREN: &str = "unsupported shell token: $()";
const BACKTICK: &str = "unsupported shell token: `";
const QUOTED_NEWLINE: &str = "unsupported shell token: newline";
const HEREDOC_SUBSTITUTION: &str = "command substitution in unquoted heredoc";
const HEREDOC_UNTERMINATED: &str = "unterminated heredoc";
const EMPTY_COMMAND: &str = "empty command";
const EMPTY_PIPELINE_SEGMENT: &str = "empty pipeline segment";
const UNPARSABLE_SEGMENT: &str = "unable to parse shell segment";

/// The rejection reason for an unquoted character or operator.
fn unsupported(token: &str) -> String {
    format!("unsupported shell token: {token}")
}

/// The rejection reason for a character the Windows tokenizer refuses.
fn unsupported_windows(token: char) -> String {
    format!("unsupported windows shell token: {token}")
}

/// What a shell would run for a command string, or why clawless refuses to say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShellAnalysis {
    /// True when the string was understood; `segments` is then non-empty.
    pub ok: bool,
    /// Why the string was refused (one of the exact §7.3 reason strings); `None` when `ok`.
    pub reason: Option<String>,
    /// The simple commands, in order; empty when refused.
    pub segments: Vec<ShellSegment>,
    /// True when any segment reads a heredoc (allowlist mode then asks a person, §7.8).
    pub has_heredoc: bool,
}

impl ShellAnalysis {
    fn refused(reason: impl Into<String>) -> Self {
        Self {
            ok: false,
            reason: Some(reason.into()),
            segments: Vec::new(),
            has_heredoc: false,
        }
    }

    fn understood(segments: Vec<ShellSegment>) -> Self {
        let has_heredoc = segments.iter().any(|s| !s.heredocs.is_empty());
        Self {
            ok: true,
            reason: None,
            segments,
            has_heredoc,
        }
    }

    /// True when any segment carries a [`ShellHazard`].
    pub fn has_hazards(&self) -> bool {
        self.segments.iter().any(|s| !s.hazards.is_empty())
    }
}

/// One simple command of a chain or pipeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShellSegment {
    /// The segment's source text on the command line, from its first word to its last;
    /// heredoc bodies and trailing comments are not part of it.
    pub raw: String,
    /// The words with quotes and escapes removed. Expansions (`$VAR`, `${…}`, globs, `~`) are
    /// kept as written, unexpanded. Never empty in an `ok` analysis.
    pub argv: Vec<String>,
    /// The operator between the previous segment and this one; `None` for the first.
    pub joined_by: Option<ShellOperator>,
    /// Places where a shell could see different words than `argv` shows.
    pub hazards: Vec<ShellHazard>,
    /// The heredocs this segment reads, in order.
    pub heredocs: Vec<ShellHeredoc>,
    /// True when a word holds an unquoted or double-quoted parameter expansion (`$X`, `${X}`,
    /// `$1`, `$@`, …): the shell substitutes a value there that `argv` does not show.
    pub has_parameter_expansion: bool,
}

/// A heredoc a segment reads from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShellHeredoc {
    /// The terminator line, after quote removal.
    pub delimiter: String,
    /// True when any part of the delimiter was quoted: the body is then literal.
    pub quoted: bool,
    /// True for `<<-`: leading tabs are removed from body lines and the terminator line.
    pub strip_tabs: bool,
    /// The body, one `\n` after each line, tabs already stripped for `<<-`.
    pub body: String,
}

/// The operator joining two segments.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize)]
pub enum ShellOperator {
    /// `&&`: run the next one if this one succeeded.
    #[serde(rename = "&&")]
    And,
    /// `||`: run the next one if this one failed.
    #[serde(rename = "||")]
    Or,
    /// `;`: run the next one regardless.
    #[serde(rename = ";")]
    Sequence,
    /// `|`: feed this one's output to the next one.
    #[serde(rename = "|")]
    Pipe,
}

impl ShellOperator {
    /// The operator as written: `&&`, `||`, `;` or `|`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::And => "&&",
            Self::Or => "||",
            Self::Sequence => ";",
            Self::Pipe => "|",
        }
    }

    /// True for the chain operators (`&&`, `||`, `;`), false for a pipe.
    pub fn is_chain(self) -> bool {
        !matches!(self, Self::Pipe)
    }
}

/// A place where a simple tokenizer and a real shell may disagree about a segment's words.
/// Reported for people; the analysis stays `ok` and the policy decides as without it, since an
/// allowed command runs rebuilt from `argv` with every word literal.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShellHazard {
    /// Unquoted `$IFS` / `${IFS…}`, or an assignment to `IFS`.
    IfsExpansion,
    /// Unquoted brace expansion such as `{a,b}` or `{1..3}`.
    BraceExpansion,
    /// A word where an unquoted `#` follows empty quotes (`''#x`, `""#x`).
    EmptyQuotesBeforeHash,
    /// Unicode (or ASCII control) whitespace that `sh` does not split on, outside single quotes.
    NonAsciiWhitespace,
    /// A heredoc delimiter that is only partly quoted (`<<'EO'F`, `<<E"OF"`, `<<\EOF`).
    PartlyQuotedHeredocDelimiter,
    /// bash `$'…'` (ANSI-C) or `$"…"` (locale) quoting, which bash decodes and `dash` reads
    /// as a literal `$` before a quoted string.
    AnsiCQuote,
}

impl ShellHazard {
    /// A stable kebab-case name, for messages and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::IfsExpansion => "ifs-expansion",
            Self::BraceExpansion => "brace-expansion",
            Self::EmptyQuotesBeforeHash => "empty-quotes-before-hash",
            Self::NonAsciiWhitespace => "non-ascii-whitespace",
            Self::PartlyQuotedHeredocDelimiter => "partly-quoted-heredoc-delimiter",
            Self::AnsiCQuote => "ansi-c-quote",
        }
    }
}

/// Analyses a command string as the shell of `platform` would read it (spec §7.3).
///
/// POSIX platforms: chains, pipelines, quotes, escapes, comments and heredocs as described in
/// the module docs. Windows: one segment, split on spaces and tabs outside `"…"`; unquoted
/// `& | < > ^ ( ) % ! `` ` `` and newlines are refused, `%`, `` ` `` and newlines also inside
/// quotes, and `$` before a letter, `_`, `{`, `(`, `?` or `$` anywhere
/// (`unsupported windows shell token: <ch>`). A leading `powershell … -Command …` wrapper and
/// a leading PowerShell call operator `& ` are removed first.
pub fn analyze_shell_command(command: &str, platform: Platform) -> ShellAnalysis {
    if platform.is_windows() {
        analyze_windows(command)
    } else {
        analyze_posix(command)
    }
}

/// Splits one simple command into words (§7.3 step 4), or `None` for an unterminated quote,
/// trailing escape or unclosed `${`.
///
/// Words split on spaces, tabs and newlines; `'…'` is literal; inside `"…"` a backslash
/// escapes only `\ " $ `` ` and a newline; outside quotes a backslash escapes the next
/// character; `#` at the very start of a word begins a comment up to the end of the line.
/// Operators and substitutions have no meaning here (use [`analyze_shell_command`] for those),
/// and `${…}` stays one word up to its closing brace. For a segment of an `ok` analysis
/// without heredocs, `split_shell_args(&segment.raw)` gives `segment.argv`.
pub fn split_shell_args(segment: &str) -> Option<Vec<String>> {
    let mut lexer = Lexer::new(segment, Mode::Words);
    let mut argv = Vec::new();
    loop {
        // Blanks, and line continuations, which `sh` removes before it reads words.
        loop {
            lexer.skip_while(|c| matches!(c, b' ' | b'\t' | b'\n'));
            if lexer.peek() == Some(b'\\') && lexer.peek_at(1) == Some(b'\n') {
                lexer.i += 2;
            } else {
                break;
            }
        }
        match lexer.peek() {
            None => return Some(argv),
            Some(b'#') => lexer.skip_comment(),
            Some(_) => match lexer.read_word() {
                Ok(word) => argv.push(word),
                Err(_) => return None,
            },
        }
    }
}

/// Renders one argument for a POSIX shell as a single-quoted word: `it's` becomes
/// `'it'\''s'`. Nothing inside is expanded, so the shell passes exactly `arg`.
pub fn quote_shell_arg(arg: &str) -> String {
    let mut out = String::with_capacity(arg.len() + 2);
    out.push('\'');
    for c in arg.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

// ---------------------------------------------------------------------------------------------
// POSIX
// ---------------------------------------------------------------------------------------------

fn analyze_posix(command: &str) -> ShellAnalysis {
    // Step 1 of §7.3, before anything else and even inside quotes: a backslash before a
    // line break joins lines, which can build `$(` out of harmless-looking pieces.
    let bytes = command.as_bytes();
    if bytes
        .windows(2)
        .any(|w| w[0] == b'\\' && matches!(w[1], b'\n' | b'\r'))
    {
        return ShellAnalysis::refused(QUOTED_NEWLINE);
    }
    match PosixParser::new(command).parse() {
        Ok(segments) => ShellAnalysis::understood(segments),
        Err(reason) => ShellAnalysis::refused(reason),
    }
}

/// Whether the lexer refuses operators and substitutions (`Command`) or only splits words
/// ([`split_shell_args`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Command,
    Words,
}

/// What a word read noticed, for the segment it belongs to.
#[derive(Default)]
struct WordNotes {
    hazards: Vec<ShellHazard>,
    parameter_expansion: bool,
}

impl WordNotes {
    fn hazard(&mut self, hazard: ShellHazard) {
        if !self.hazards.contains(&hazard) {
            self.hazards.push(hazard);
        }
    }
}

/// The word-level reader shared by the analysis and [`split_shell_args`].
struct Lexer<'a> {
    src: &'a str,
    b: &'a [u8],
    i: usize,
    mode: Mode,
    notes: WordNotes,
}

impl<'a> Lexer<'a> {
    fn new(src: &'a str, mode: Mode) -> Self {
        Self {
            src,
            b: src.as_bytes(),
            i: 0,
            mode,
            notes: WordNotes::default(),
        }
    }

    fn strict(&self) -> bool {
        self.mode == Mode::Command
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<u8> {
        self.b.get(self.i + offset).copied()
    }

    fn skip_while(&mut self, keep: impl Fn(u8) -> bool) {
        while self.peek().is_some_and(&keep) {
            self.i += 1;
        }
    }

    /// Skips a comment up to (not including) the next newline.
    fn skip_comment(&mut self) {
        self.i = find_byte(self.b, self.i, b'\n').unwrap_or(self.b.len());
    }

    /// The character at byte `at`, which must be a character boundary.
    fn char_at(&self, at: usize) -> Option<char> {
        self.src.get(at..).and_then(|rest| rest.chars().next())
    }

    /// The character at `at` and its width in bytes. The lexer only stops on character
    /// boundaries; should it ever not, the stray byte counts as one replacement character.
    fn char_and_width(&self, at: usize) -> (char, usize) {
        match self.char_at(at) {
            Some(c) => (c, c.len_utf8()),
            None => (char::REPLACEMENT_CHARACTER, 1),
        }
    }

    /// `src[from..to]`, or `""` should the bounds ever not be character boundaries.
    fn slice(&self, from: usize, to: usize) -> &'a str {
        self.src.get(from..to).unwrap_or("")
    }

    /// Notes a character that `sh` takes literally but other tokenizers may split on.
    fn note_char(&mut self, c: char) {
        if is_unsplit_whitespace(c) {
            self.notes.hazard(ShellHazard::NonAsciiWhitespace);
        }
    }

    /// Reads one word starting at a non-blank, non-operator byte, returning its value with
    /// quotes and escapes removed. Always consumes at least one byte or fails.
    fn read_word(&mut self) -> Result<String, String> {
        let start = self.i;
        let mut value = String::new();
        // bash's brace matching has its own quirks (`}{}c,d}` expands), so any unquoted `{`,
        // then `,` or `..`, then `}` in one word counts: an over-approximation on purpose.
        let mut brace_open = false;
        let mut brace_separated = false;
        while let Some(c) = self.peek() {
            match c {
                b' ' | b'\t' | b'\n' => break,
                b'\r' | b';' | b'&' | b'|' | b'<' | b'>' | b'(' | b')' | b'`' if self.strict() => {
                    break;
                }
                b'\'' => {
                    let close = find_byte(self.b, self.i + 1, b'\'')
                        .ok_or_else(|| UNTERMINATED_QUOTE.to_string())?;
                    value.push_str(self.slice(self.i + 1, close));
                    self.i = close + 1;
                }
                b'"' => self.read_double_quoted(&mut value)?,
                b'\\' => {
                    let next = self
                        .char_at(self.i + 1)
                        .ok_or_else(|| UNTERMINATED_QUOTE.to_string())?;
                    if self.strict() && matches!(next, '\n' | '\r') {
                        return Err(QUOTED_NEWLINE.to_string());
                    }
                    if next == '\n' {
                        // A line continuation: both characters disappear.
                    } else {
                        self.note_char(next);
                        value.push(next);
                    }
                    self.i += 1 + next.len_utf8();
                }
                b'$' => self.read_dollar(&mut value, true)?,
                b'#' => {
                    // Not a comment: the word has started. If nothing but empty quotes came
                    // before it, a buffer-based tokenizer would think otherwise.
                    if value.is_empty() && self.i > start {
                        self.notes.hazard(ShellHazard::EmptyQuotesBeforeHash);
                    }
                    value.push('#');
                    self.i += 1;
                }
                b'{' => {
                    brace_open = true;
                    value.push('{');
                    self.i += 1;
                }
                b',' => {
                    brace_separated |= brace_open;
                    value.push(',');
                    self.i += 1;
                }
                b'.' => {
                    brace_separated |= brace_open && self.peek_at(1) == Some(b'.');
                    value.push('.');
                    self.i += 1;
                }
                b'}' => {
                    if brace_separated {
                        self.notes.hazard(ShellHazard::BraceExpansion);
                    }
                    value.push('}');
                    self.i += 1;
                }
                _ => {
                    let (ch, width) = self.char_and_width(self.i);
                    self.note_char(ch);
                    value.push(ch);
                    self.i += width;
                }
            }
        }
        Ok(value)
    }

    /// Reads `"…"` starting at the opening quote, appending its value.
    fn read_double_quoted(&mut self, value: &mut String) -> Result<(), String> {
        self.i += 1;
        loop {
            let Some(c) = self.peek() else {
                return Err(UNTERMINATED_QUOTE.to_string());
            };
            match c {
                b'"' => {
                    self.i += 1;
                    return Ok(());
                }
                b'\\' => match self.peek_at(1) {
                    None => return Err(UNTERMINATED_QUOTE.to_string()),
                    Some(b'\n') | Some(b'\r') if self.strict() => {
                        return Err(QUOTED_NEWLINE.to_string());
                    }
                    Some(b'\n') => self.i += 2,
                    Some(n @ (b'\\' | b'"' | b'$' | b'`')) => {
                        value.push(char::from(n));
                        self.i += 2;
                    }
                    Some(_) => {
                        // Any other backslash is kept; the next character is read normally.
                        value.push('\\');
                        self.i += 1;
                    }
                },
                b'`' if self.strict() => return Err(BACKTICK.to_string()),
                b'\n' | b'\r' if self.strict() => return Err(QUOTED_NEWLINE.to_string()),
                b'$' => self.read_dollar(value, false)?,
                _ => {
                    let (ch, width) = self.char_and_width(self.i);
                    self.note_char(ch);
                    value.push(ch);
                    self.i += width;
                }
            }
        }
    }

    /// Reads a `$` (outside quotes when `unquoted`, else inside `"…"`), appending the text as
    /// written: clawless never expands.
    fn read_dollar(&mut self, value: &mut String, unquoted: bool) -> Result<(), String> {
        match self.peek_at(1) {
            Some(b'(') if self.strict() => Err(DOLLAR_PAREN.to_string()),
            Some(b'{') => {
                // Unclosed, it fails in both modes: reading it as plain text instead would
                // rescan the rest of the input for every later `${`.
                let end = self.scan_braced(self.i, unquoted)?;
                value.push_str(self.slice(self.i, end));
                self.i = end;
                self.notes.parameter_expansion = true;
                Ok(())
            }
            Some(b'\'' | b'"') if unquoted => {
                self.notes.hazard(ShellHazard::AnsiCQuote);
                value.push('$');
                self.i += 1;
                Ok(())
            }
            Some(n) if is_parameter_start(n) => {
                self.notes.parameter_expansion = true;
                if unquoted && names_ifs(self.b, self.i + 1) {
                    self.notes.hazard(ShellHazard::IfsExpansion);
                }
                value.push('$');
                self.i += 1;
                Ok(())
            }
            _ => {
                value.push('$');
                self.i += 1;
                Ok(())
            }
        }
    }

    /// Finds the end (exclusive) of the `${…}` starting at `dollar`, as `sh` reads it:
    /// nested `${…}`, quotes and escapes inside. Moves only forward.
    fn scan_braced(&mut self, dollar: usize, unquoted: bool) -> Result<usize, String> {
        let strict = self.strict();
        let mut j = dollar + 2;
        let mut depth = 1usize;
        self.note_braced_head(j, unquoted);
        loop {
            let Some(&c) = self.b.get(j) else {
                return Err(UNPARSABLE_SEGMENT.to_string());
            };
            match c {
                b'}' => {
                    depth -= 1;
                    j += 1;
                    if depth == 0 {
                        return Ok(j);
                    }
                }
                b'\\' => {
                    let Some(next) = self.char_at(j + 1) else {
                        return Err(UNTERMINATED_QUOTE.to_string());
                    };
                    if strict && matches!(next, '\n' | '\r') {
                        return Err(QUOTED_NEWLINE.to_string());
                    }
                    self.note_char(next);
                    j += 1 + next.len_utf8();
                }
                b'\'' if unquoted => {
                    let close = find_byte(self.b, j + 1, b'\'')
                        .ok_or_else(|| UNTERMINATED_QUOTE.to_string())?;
                    j = close + 1;
                }
                b'"' => j = self.skip_nested_double_quoted(j + 1)?,
                b'`' if strict => return Err(BACKTICK.to_string()),
                b'$' => match self.b.get(j + 1) {
                    Some(b'(') if strict => return Err(DOLLAR_PAREN.to_string()),
                    Some(b'{') => {
                        depth += 1;
                        j += 2;
                        self.note_braced_head(j, unquoted);
                    }
                    _ => {
                        if unquoted && names_ifs(self.b, j + 1) {
                            self.notes.hazard(ShellHazard::IfsExpansion);
                        }
                        j += 1;
                    }
                },
                b'\n' | b'\r' if strict => {
                    return Err(if unquoted {
                        unsupported(if c == b'\n' { "\n" } else { "\r" })
                    } else {
                        QUOTED_NEWLINE.to_string()
                    });
                }
                _ => {
                    let (ch, width) = self.char_and_width(j);
                    self.note_char(ch);
                    j += width;
                }
            }
        }
    }

    /// Flags `${IFS…}`, `${#IFS}` and `${!IFS}` given the position just after `${`.
    fn note_braced_head(&mut self, at: usize, unquoted: bool) {
        let name = match self.b.get(at) {
            Some(b'#' | b'!') => at + 1,
            _ => at,
        };
        if unquoted && names_ifs(self.b, name) {
            self.notes.hazard(ShellHazard::IfsExpansion);
        }
    }

    /// Skips a `"…"` nested inside `${…}`, from just after its opening quote; returns the
    /// position after its closing quote.
    fn skip_nested_double_quoted(&mut self, mut j: usize) -> Result<usize, String> {
        let strict = self.strict();
        loop {
            let Some(&c) = self.b.get(j) else {
                return Err(UNTERMINATED_QUOTE.to_string());
            };
            match c {
                b'"' => return Ok(j + 1),
                b'\\' => match self.b.get(j + 1) {
                    None => return Err(UNTERMINATED_QUOTE.to_string()),
                    Some(b'\n' | b'\r') if strict => return Err(QUOTED_NEWLINE.to_string()),
                    // Skipping the escaped byte alone is safe: only ASCII is special here.
                    Some(_) => j += 2,
                },
                b'`' if strict => return Err(BACKTICK.to_string()),
                b'$' if strict && self.b.get(j + 1) == Some(&b'(') => {
                    return Err(DOLLAR_PAREN.to_string());
                }
                b'\n' | b'\r' if strict => return Err(QUOTED_NEWLINE.to_string()),
                _ => {
                    if c >= 0x80
                        && let Some(ch) = self.char_at(j)
                    {
                        self.note_char(ch);
                        j += ch.len_utf8();
                        continue;
                    }
                    j += 1;
                }
            }
        }
    }
}

/// A segment being built.
#[derive(Default)]
struct Draft {
    argv: Vec<String>,
    hazards: Vec<ShellHazard>,
    heredocs: usize,
    start: Option<usize>,
    end: usize,
    parameter_expansion: bool,
}

impl Draft {
    fn cover(&mut self, start: usize, end: usize) {
        self.start.get_or_insert(start);
        self.end = end;
    }

    fn absorb(&mut self, notes: WordNotes) {
        for hazard in notes.hazards {
            if !self.hazards.contains(&hazard) {
                self.hazards.push(hazard);
            }
        }
        self.parameter_expansion |= notes.parameter_expansion;
    }
}

/// The command-level parser: operators, comments, heredocs.
struct PosixParser<'a> {
    lx: Lexer<'a>,
    segments: Vec<ShellSegment>,
    draft: Draft,
    /// The operator before the segment being built.
    last_op: Option<ShellOperator>,
    /// The first chain operator seen, which names the reason for an empty chain part.
    first_chain_op: Option<ShellOperator>,
    /// Every heredoc with the index of its segment, in the order bodies appear.
    heredocs: Vec<(usize, ShellHeredoc)>,
    /// How many of `heredocs` (from the end) still wait for their bodies.
    pending: usize,
}

impl<'a> PosixParser<'a> {
    fn new(src: &'a str) -> Self {
        Self {
            lx: Lexer::new(src, Mode::Command),
            segments: Vec::new(),
            draft: Draft::default(),
            last_op: None,
            first_chain_op: None,
            heredocs: Vec::new(),
            pending: 0,
        }
    }

    fn parse(mut self) -> Result<Vec<ShellSegment>, String> {
        loop {
            self.lx.skip_while(|c| matches!(c, b' ' | b'\t'));
            let Some(c) = self.lx.peek() else { break };
            match c {
                b'\n' => {
                    if self.pending == 0 {
                        return Err(unsupported("\n"));
                    }
                    self.lx.i += 1;
                    self.read_heredoc_bodies()?;
                    // Only blank lines may follow the bodies: another line is another command.
                    if self.lx.b[self.lx.i..]
                        .iter()
                        .any(|c| !matches!(c, b' ' | b'\t' | b'\n'))
                    {
                        return Err(unsupported("\n"));
                    }
                    self.lx.i = self.lx.b.len();
                }
                b'\r' => return Err(unsupported("\r")),
                b'#' => self.lx.skip_comment(),
                b';' => self.operator(ShellOperator::Sequence, 1)?,
                b'&' if self.lx.peek_at(1) == Some(b'&') => self.operator(ShellOperator::And, 2)?,
                b'&' => return Err(unsupported("&")),
                b'|' => match self.lx.peek_at(1) {
                    Some(b'|') => self.operator(ShellOperator::Or, 2)?,
                    Some(b'&') => return Err(unsupported("|&")),
                    _ => self.operator(ShellOperator::Pipe, 1)?,
                },
                b'<' if self.lx.peek_at(1) == Some(b'<') && self.lx.peek_at(2) != Some(b'<') => {
                    self.heredoc_operator()?;
                }
                b'<' => return Err(unsupported("<")),
                b'>' => return Err(unsupported(">")),
                b'(' => return Err(unsupported("(")),
                b')' => return Err(unsupported(")")),
                b'`' => return Err(unsupported("`")),
                _ => {
                    let start = self.lx.i;
                    let word = self.lx.read_word()?;
                    let mut notes = std::mem::take(&mut self.lx.notes);
                    if word == "IFS" || word.starts_with("IFS=") || word.starts_with("IFS+=") {
                        notes.hazard(ShellHazard::IfsExpansion);
                    }
                    self.draft.absorb(notes);
                    self.draft.cover(start, self.lx.i);
                    self.draft.argv.push(word);
                }
            }
        }
        if self.pending > 0 {
            return Err(HEREDOC_UNTERMINATED.to_string());
        }
        self.finish_segment(None)?;
        Ok(self.distribute_heredocs())
    }

    /// Ends the current segment at an operator `width` bytes wide.
    fn operator(&mut self, op: ShellOperator, width: usize) -> Result<(), String> {
        // OpenClaw splits the chain before it reads heredocs, so `cat <<EOF && touch x⏎…⏎EOF`
        // is a heredoc without its body there. Refusing it the same way keeps one reading of
        // such a line (a pipe after the start, `cat <<EOF | grep x`, stays in the segment).
        if op.is_chain() && self.pending > 0 {
            return Err(HEREDOC_UNTERMINATED.to_string());
        }
        if op.is_chain() && self.first_chain_op.is_none() {
            self.first_chain_op = Some(op);
        }
        self.finish_segment(Some(op))?;
        self.last_op = Some(op);
        self.lx.i += width;
        Ok(())
    }

    /// Moves the draft into `segments`; `next` is the operator after it (`None` at the end).
    fn finish_segment(&mut self, next: Option<ShellOperator>) -> Result<(), String> {
        let draft = std::mem::take(&mut self.draft);
        if draft.argv.is_empty() {
            let prev = self.last_op;
            return Err(if prev.is_none() && next.is_none() {
                EMPTY_COMMAND.to_string()
            } else if prev == Some(ShellOperator::Pipe) || next == Some(ShellOperator::Pipe) {
                EMPTY_PIPELINE_SEGMENT.to_string()
            } else {
                // An empty chain part: OpenClaw's chain split gives up and the pipeline
                // parser then stops at the first chain operator it meets.
                match self.first_chain_op {
                    Some(ShellOperator::Or) => unsupported("||"),
                    Some(ShellOperator::Sequence) => unsupported(";"),
                    _ => unsupported("&"),
                }
            });
        }
        let start = draft.start.unwrap_or(0);
        self.segments.push(ShellSegment {
            // `start..end` already excludes blanks; no trim, which would also eat the
            // Unicode spaces `sh` keeps inside a word.
            raw: self.lx.slice(start, draft.end).to_string(),
            argv: draft.argv,
            joined_by: self.last_op,
            hazards: draft.hazards,
            heredocs: Vec::with_capacity(draft.heredocs),
            has_parameter_expansion: draft.parameter_expansion,
        });
        Ok(())
    }

    /// Reads `<<DELIM` / `<<-DELIM` at the current position; the body comes after the newline.
    fn heredoc_operator(&mut self) -> Result<(), String> {
        let op_start = self.lx.i;
        self.lx.i += 2;
        let strip_tabs = self.lx.peek() == Some(b'-');
        if strip_tabs {
            self.lx.i += 1;
        }
        self.lx.skip_while(|c| matches!(c, b' ' | b'\t'));
        match self.lx.peek() {
            // `#` here would start a comment in `sh`, leaving the heredoc without a delimiter.
            None
            | Some(b'\n' | b'\r' | b'#' | b';' | b'&' | b'|' | b'<' | b'>' | b'(' | b')' | b'`') => {
                return Err(HEREDOC_UNTERMINATED.to_string());
            }
            Some(_) => {}
        }
        let word_start = self.lx.i;
        let delimiter = self.lx.read_word()?;
        let mut notes = std::mem::take(&mut self.lx.notes);
        // The delimiter is never expanded, whatever it looks like.
        notes.parameter_expansion = false;
        let source = self.lx.slice(word_start, self.lx.i);
        let quoted = source.bytes().any(|c| matches!(c, b'\'' | b'"' | b'\\'));
        if quoted && !is_wholly_quoted(source) {
            notes.hazard(ShellHazard::PartlyQuotedHeredocDelimiter);
        }
        self.draft.absorb(notes);
        self.draft.cover(op_start, self.lx.i);
        self.draft.heredocs += 1;
        self.heredocs.push((
            self.segments.len(),
            ShellHeredoc {
                delimiter,
                quoted,
                strip_tabs,
                body: String::new(),
            },
        ));
        self.pending += 1;
        Ok(())
    }

    /// Reads the bodies of every pending heredoc, starting just after a newline.
    fn read_heredoc_bodies(&mut self) -> Result<(), String> {
        let first = self.heredocs.len() - self.pending;
        self.pending = 0;
        let b = self.lx.b;
        for (_, heredoc) in &mut self.heredocs[first..] {
            loop {
                if self.lx.i >= b.len() {
                    return Err(HEREDOC_UNTERMINATED.to_string());
                }
                let line_end = find_byte(b, self.lx.i, b'\n').unwrap_or(b.len());
                let mut line = self.lx.slice(self.lx.i, line_end);
                self.lx.i = (line_end + 1).min(b.len());
                if heredoc.strip_tabs {
                    line = line.trim_start_matches('\t');
                }
                if line == heredoc.delimiter {
                    break;
                }
                heredoc.body.push_str(line);
                heredoc.body.push('\n');
            }
            if !heredoc.quoted && body_substitutes(&heredoc.body) {
                return Err(HEREDOC_SUBSTITUTION.to_string());
            }
        }
        Ok(())
    }

    fn distribute_heredocs(mut self) -> Vec<ShellSegment> {
        for (index, heredoc) in self.heredocs {
            if let Some(segment) = self.segments.get_mut(index) {
                segment.heredocs.push(heredoc);
            }
        }
        self.segments
    }
}

/// True when an unquoted heredoc body would run something: an unescaped `` ` ``, `$(` or `${`
/// (§7.3).
fn body_substitutes(body: &str) -> bool {
    let b = body.as_bytes();
    let mut k = 0;
    while k < b.len() {
        match b[k] {
            b'\\' if matches!(b.get(k + 1), Some(b'$' | b'`' | b'\\' | b'\n')) => k += 2,
            b'`' => return true,
            b'$' if matches!(b.get(k + 1), Some(b'(' | b'{')) => return true,
            _ => k += 1,
        }
    }
    false
}

/// True when a heredoc delimiter's source is one `'…'` or one `"…"` with no other quoting.
fn is_wholly_quoted(source: &str) -> bool {
    let b = source.as_bytes();
    if b.len() < 2 {
        return false;
    }
    let (first, last) = (b[0], b[b.len() - 1]);
    let inner = &b[1..b.len() - 1];
    (first == b'\'' || first == b'"')
        && first == last
        && !inner.iter().any(|c| matches!(c, b'\'' | b'"' | b'\\'))
}

/// True for a byte that can follow `$` as a parameter: a name, a digit or a special one.
fn is_parameter_start(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'@' | b'*' | b'#' | b'?' | b'$' | b'!' | b'-')
}

/// True when the name starting at `at` is exactly `IFS`.
fn names_ifs(b: &[u8], at: usize) -> bool {
    b.get(at..at + 3) == Some(b"IFS".as_slice())
        && !b
            .get(at + 3)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// True for whitespace `sh` does not split words on but other tokenizers may: Unicode spaces
/// (including the zero-width ones and the BOM) and the ASCII controls VT, FF and FS–US.
fn is_unsplit_whitespace(c: char) -> bool {
    match c {
        ' ' | '\t' | '\n' | '\r' => false,
        '\u{0b}' | '\u{0c}' | '\u{1c}'..='\u{1f}' => true,
        '\u{180e}' | '\u{200b}' | '\u{200c}' | '\u{200d}' | '\u{2060}' | '\u{feff}' => true,
        _ => !c.is_ascii() && c.is_whitespace(),
    }
}

fn find_byte(b: &[u8], from: usize, needle: u8) -> Option<usize> {
    b.get(from..)?
        .iter()
        .position(|&c| c == needle)
        .map(|p| p + from)
}

// ---------------------------------------------------------------------------------------------
// Windows
// ---------------------------------------------------------------------------------------------

/// How many wrapper layers (`powershell -Command`, `& exe`) are removed before tokenising.
const MAX_WINDOWS_UNWRAP: usize = 4;

fn analyze_windows(command: &str) -> ShellAnalysis {
    let inner = unwrap_windows_command(command);
    match tokenize_windows(inner) {
        Err(reason) => ShellAnalysis::refused(reason),
        Ok((argv, _)) if argv.is_empty() => ShellAnalysis::refused(EMPTY_COMMAND),
        Ok((argv, hazards)) => ShellAnalysis::understood(vec![ShellSegment {
            raw: inner.trim().to_string(),
            argv,
            joined_by: None,
            hazards,
            heredocs: Vec::new(),
            has_parameter_expansion: false,
        }]),
    }
}

/// Removes leading `powershell … -Command <payload>` and `& <exe>` wrappers.
fn unwrap_windows_command(command: &str) -> &str {
    let mut current = command.trim();
    for _ in 0..MAX_WINDOWS_UNWRAP {
        if let Some(rest) = current.strip_prefix('&')
            && rest.starts_with([' ', '\t', '"', '\''])
        {
            current = rest.trim();
            continue;
        }
        match powershell_payload(current) {
            Some(payload) => current = payload,
            None => break,
        }
    }
    current
}

/// The text after `-Command` / `-c` when `command` runs PowerShell, without one layer of
/// quotes around all of it.
fn powershell_payload(command: &str) -> Option<&str> {
    let spans = windows_word_spans(command);
    let (first_start, first_end) = *spans.first()?;
    let exe = executable_name(command[first_start..first_end].trim_matches(['"', '\'']));
    if exe != "powershell" && exe != "pwsh" {
        return None;
    }
    let mut k = 1;
    while let Some(&(start, end)) = spans.get(k) {
        let option = command[start..end].to_ascii_lowercase();
        if matches!(option.as_str(), "-command" | "-c" | "/command" | "/c") {
            let payload = command[end..].trim();
            return Some(strip_outer_quotes(payload));
        }
        if !option.starts_with('-') {
            return None;
        }
        // Options that take a value; `-File` and `-EncodedCommand` are not unwrapped.
        if matches!(
            option.as_str(),
            "-executionpolicy"
                | "-ep"
                | "-windowstyle"
                | "-w"
                | "-version"
                | "-v"
                | "-inputformat"
                | "-outputformat"
                | "-of"
                | "-configurationname"
                | "-workingdirectory"
                | "-wd"
                | "-psconsolefile"
                | "-settingsfile"
                | "-custompipename"
        ) {
            k += 1;
        } else if matches!(
            option.as_str(),
            "-file" | "-f" | "-encodedcommand" | "-enc" | "-ec" | "-e"
        ) {
            return None;
        }
        k += 1;
    }
    None
}

fn strip_outer_quotes(s: &str) -> &str {
    for quote in ['"', '\''] {
        if s.len() >= 2
            && let Some(inner) = s.strip_prefix(quote).and_then(|r| r.strip_suffix(quote))
            && !inner.contains(quote)
        {
            return inner;
        }
    }
    s
}

/// Byte spans of the space-separated words of `s`, with `"…"` grouping.
fn windows_word_spans(s: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = None;
    let mut quoted = false;
    for (i, c) in s.char_indices() {
        match c {
            '"' => {
                quoted = !quoted;
                start.get_or_insert(i);
            }
            ' ' | '\t' if !quoted => {
                if let Some(s0) = start.take() {
                    spans.push((s0, i));
                }
            }
            _ => {
                start.get_or_insert(i);
            }
        }
    }
    if let Some(s0) = start {
        spans.push((s0, s.len()));
    }
    spans
}

/// The lowercase file name of an executable path without `.exe`, for either separator.
pub(crate) fn executable_name(path: &str) -> String {
    let base = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let lower = base.to_ascii_lowercase();
    match lower.strip_suffix(".exe") {
        Some(stem) => stem.to_string(),
        None => lower,
    }
}

type WindowsWords = (Vec<String>, Vec<ShellHazard>);

fn tokenize_windows(s: &str) -> Result<WindowsWords, String> {
    let mut argv = Vec::new();
    let mut hazards = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quoted = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$'
            && chars.peek().is_some_and(|n| {
                n.is_ascii_alphabetic() || matches!(n, '_' | '{' | '(' | '?' | '$')
            })
        {
            return Err(unsupported_windows('$'));
        }
        if is_unsplit_whitespace(c) && !hazards.contains(&ShellHazard::NonAsciiWhitespace) {
            hazards.push(ShellHazard::NonAsciiWhitespace);
        }
        if quoted {
            match c {
                '"' => quoted = false,
                '%' | '`' | '\n' | '\r' => return Err(unsupported_windows(c)),
                _ => word.push(c),
            }
            continue;
        }
        match c {
            ' ' | '\t' => {
                if in_word {
                    argv.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '"' => {
                quoted = true;
                in_word = true;
            }
            '&' | '|' | '<' | '>' | '^' | '(' | ')' | '%' | '!' | '`' | '\n' | '\r' => {
                return Err(unsupported_windows(c));
            }
            _ => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if quoted {
        return Err(UNTERMINATED_QUOTE.to_string());
    }
    if in_word {
        argv.push(word);
    }
    Ok((argv, hazards))
}
