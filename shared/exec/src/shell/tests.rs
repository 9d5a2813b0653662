//! Shell analysis tests: every §7.3 vector, the rejection reasons, each clawless hazard, the
//! Windows tokenizer, and properties over arbitrary input.

use std::time::{Duration, Instant};

use clawless_base::testing::run_with_floor;
use proptest::prelude::*;

use super::*;

fn posix(command: &str) -> ShellAnalysis {
    analyze_shell_command(command, Platform::Linux)
}

fn windows(command: &str) -> ShellAnalysis {
    analyze_shell_command(command, Platform::Windows)
}

/// The first word of every segment.
fn heads(analysis: &ShellAnalysis) -> Vec<&str> {
    analysis
        .segments
        .iter()
        .map(|s| s.argv.first().map(String::as_str).unwrap_or(""))
        .collect()
}

fn argvs(analysis: &ShellAnalysis) -> Vec<Vec<&str>> {
    analysis
        .segments
        .iter()
        .map(|s| s.argv.iter().map(String::as_str).collect())
        .collect()
}

fn ops(analysis: &ShellAnalysis) -> Vec<Option<ShellOperator>> {
    analysis.segments.iter().map(|s| s.joined_by).collect()
}

#[track_caller]
fn assert_refused(command: &str, reason: &str) {
    let analysis = posix(command);
    assert!(
        !analysis.ok,
        "{command:?} should be refused, got {analysis:?}"
    );
    assert_eq!(
        analysis.reason.as_deref(),
        Some(reason),
        "reason for {command:?}"
    );
    assert!(analysis.segments.is_empty());
}

#[track_caller]
fn assert_ok(command: &str) -> ShellAnalysis {
    let analysis = posix(command);
    assert!(
        analysis.ok,
        "{command:?} should be understood, got {analysis:?}"
    );
    assert_eq!(analysis.reason, None);
    analysis
}

#[track_caller]
fn hazards_of(command: &str) -> Vec<ShellHazard> {
    let analysis = assert_ok(command);
    analysis
        .segments
        .iter()
        .flat_map(|s| s.hazards.iter().copied())
        .collect()
}

// --- §7.3 test vectors --------------------------------------------------------------------

#[test]
fn a_pipeline_gives_one_segment_per_command() {
    let analysis = assert_ok("echo ok | jq .foo");
    assert_eq!(heads(&analysis), ["echo", "jq"]);
    assert_eq!(ops(&analysis), [None, Some(ShellOperator::Pipe)]);
    assert_eq!(argvs(&analysis), [vec!["echo", "ok"], vec!["jq", ".foo"]]);
}

#[test]
fn a_chain_gives_one_segment_per_part() {
    let analysis = assert_ok("ls && rm -rf /");
    assert_eq!(heads(&analysis), ["ls", "rm"]);
    assert_eq!(ops(&analysis), [None, Some(ShellOperator::And)]);
}

#[test]
fn command_substitution_inside_double_quotes_is_refused() {
    assert_refused("echo \"output: $(whoami)\"", "unsupported shell token: $()");
}

#[test]
fn a_backtick_inside_double_quotes_is_refused() {
    assert_refused("echo \"output: `id`\"", "unsupported shell token: `");
}

#[test]
fn unquoted_command_substitution_is_refused() {
    assert_refused("echo $(whoami)", "unsupported shell token: $()");
}

#[test]
fn input_redirection_is_refused() {
    assert_refused("cat < input.txt", "unsupported shell token: <");
}

#[test]
fn output_redirection_is_refused() {
    assert_refused("echo ok > output.txt", "unsupported shell token: >");
}

#[test]
fn an_unquoted_newline_is_refused_with_the_newline_itself_as_the_token() {
    assert_refused(
        "/usr/bin/echo first line\n/usr/bin/echo second line",
        "unsupported shell token: \n",
    );
}

#[test]
fn a_backslash_newline_that_would_build_a_substitution_is_refused() {
    assert_refused(
        "echo \"ok $\\\n(id -u)\"",
        "unsupported shell token: newline",
    );
}

#[test]
fn an_escaped_dollar_in_double_quotes_is_literal() {
    let analysis = assert_ok("echo \"output: \\$(whoami)\"");
    assert_eq!(argvs(&analysis), [vec!["echo", "output: $(whoami)"]]);
}

#[test]
fn single_quotes_make_a_substitution_literal() {
    let analysis = assert_ok("echo 'output: $(whoami)'");
    assert_eq!(argvs(&analysis), [vec!["echo", "output: $(whoami)"]]);
}

#[test]
fn a_quoted_heredoc_with_an_empty_body_is_understood() {
    let analysis = assert_ok("/usr/bin/tee /tmp/file << 'EOF'\nEOF");
    assert_eq!(heads(&analysis), ["/usr/bin/tee"]);
    assert!(analysis.has_heredoc);
    let heredoc = &analysis.segments[0].heredocs[0];
    assert_eq!(heredoc.delimiter, "EOF");
    assert!(heredoc.quoted);
    assert_eq!(heredoc.body, "");
}

#[test]
fn a_heredoc_feeding_a_pipeline_belongs_to_its_segment() {
    let analysis = assert_ok("/usr/bin/cat << 'EOF' | /usr/bin/grep pattern\npattern\nEOF");
    assert_eq!(heads(&analysis), ["/usr/bin/cat", "/usr/bin/grep"]);
    assert_eq!(analysis.segments[0].heredocs.len(), 1);
    assert_eq!(analysis.segments[0].heredocs[0].body, "pattern\n");
    assert!(analysis.segments[1].heredocs.is_empty());
    assert_eq!(argvs(&analysis)[1], ["/usr/bin/grep", "pattern"]);
}

#[test]
fn an_escaped_substitution_in_an_unquoted_heredoc_is_understood() {
    let analysis = assert_ok("/usr/bin/cat <<EOF\n\\$(id)\nEOF");
    assert_eq!(analysis.segments[0].heredocs[0].body, "\\$(id)\n");
    assert!(!analysis.segments[0].heredocs[0].quoted);
}

#[test]
fn a_substitution_in_a_quoted_heredoc_is_literal() {
    let analysis = assert_ok("/usr/bin/cat <<'EOF'\n$(id)\nEOF");
    assert_eq!(analysis.segments[0].heredocs[0].body, "$(id)\n");
}

#[test]
fn substitutions_in_an_unquoted_heredoc_are_refused() {
    for body in ["$(id)", "`whoami`", "${PATH}"] {
        assert_refused(
            &format!("/usr/bin/cat <<EOF\n{body}\nEOF"),
            "command substitution in unquoted heredoc",
        );
    }
}

#[test]
fn a_heredoc_without_its_terminator_is_refused() {
    assert_refused("/usr/bin/cat <<EOF\nline one", "unterminated heredoc");
}

#[test]
fn a_chain_of_pipelines_keeps_every_operator() {
    let analysis = assert_ok(
        "/usr/bin/obsidian-cli print-default && /usr/bin/obsidian-cli search foo | /usr/bin/head",
    );
    assert_eq!(
        heads(&analysis),
        [
            "/usr/bin/obsidian-cli",
            "/usr/bin/obsidian-cli",
            "/usr/bin/head"
        ]
    );
    assert_eq!(
        ops(&analysis),
        [None, Some(ShellOperator::And), Some(ShellOperator::Pipe)]
    );
}

#[test]
fn a_chain_ending_in_a_dangerous_command_is_still_understood() {
    let analysis = assert_ok("/usr/bin/obsidian-cli print-default && /usr/bin/rm -rf /");
    assert_eq!(heads(&analysis), ["/usr/bin/obsidian-cli", "/usr/bin/rm"]);
}

#[test]
fn a_trailing_chain_operator_is_refused() {
    assert_refused("/usr/bin/echo ok &&", "unsupported shell token: &");
}

#[test]
fn operators_inside_double_quotes_do_not_split() {
    let analysis = assert_ok("/usr/bin/echo \"foo && bar\"");
    assert_eq!(argvs(&analysis), [vec!["/usr/bin/echo", "foo && bar"]]);
    let analysis = assert_ok("/usr/bin/echo \"foo\\\" && bar\"");
    assert_eq!(argvs(&analysis), [vec!["/usr/bin/echo", "foo\" && bar"]]);
}

#[test]
fn a_plain_command_is_one_segment() {
    let analysis = assert_ok("mybin --flag");
    assert_eq!(argvs(&analysis), [vec!["mybin", "--flag"]]);
    assert_eq!(ops(&analysis), [None]);
    assert!(!analysis.has_heredoc);
}

#[test]
fn windows_refuses_an_unquoted_ampersand() {
    let analysis = windows("ping 127.0.0.1 -n 1 & whoami");
    assert!(!analysis.ok);
    assert_eq!(
        analysis.reason.as_deref(),
        Some("unsupported windows shell token: &")
    );
}

// --- the other §7.3 reasons ---------------------------------------------------------------

#[test]
fn a_double_pipe_without_a_chain_to_split_is_refused_as_such() {
    assert_refused("echo ok ||", "unsupported shell token: ||");
    assert_refused("|| echo ok", "unsupported shell token: ||");
}

#[test]
fn pipe_ampersand_is_refused() {
    assert_refused("make |& tee log", "unsupported shell token: |&");
}

#[test]
fn a_single_ampersand_is_refused() {
    assert_refused("sleep 5 & echo", "unsupported shell token: &");
    assert_refused("sleep 5&", "unsupported shell token: &");
}

#[test]
fn an_empty_sequence_part_is_refused_as_a_semicolon() {
    assert_refused("; ls", "unsupported shell token: ;");
    assert_refused("ls ; ; pwd", "unsupported shell token: ;");
    assert_refused("ls;", "unsupported shell token: ;");
}

#[test]
fn each_unsupported_character_is_named() {
    assert_refused("(ls)", "unsupported shell token: (");
    assert_refused("ls)", "unsupported shell token: )");
    assert_refused("echo `id`", "unsupported shell token: `");
    assert_refused("ls\r", "unsupported shell token: \r");
    assert_refused("diff <(ls a) <(ls b)", "unsupported shell token: <");
    assert_refused("cat <<<word", "unsupported shell token: <");
    assert_refused("ls 2>&1", "unsupported shell token: >");
    assert_refused("echo $((1 + 2))", "unsupported shell token: $()");
}

#[test]
fn a_raw_newline_or_carriage_return_inside_double_quotes_is_refused() {
    assert_refused("echo \"a\nb\"", "unsupported shell token: newline");
    assert_refused("echo \"a\rb\"", "unsupported shell token: newline");
}

#[test]
fn a_line_continuation_is_refused_anywhere() {
    assert_refused("ls \\\n-la", "unsupported shell token: newline");
    assert_refused("echo 'a\\\nb'", "unsupported shell token: newline");
    assert_refused("ls \\\r\n-la", "unsupported shell token: newline");
}

#[test]
fn single_quotes_make_everything_literal_including_newlines() {
    let analysis = assert_ok("echo '$(x) `y` | ; & > < \n'");
    assert_eq!(argvs(&analysis), [vec!["echo", "$(x) `y` | ; & > < \n"]]);
}

#[test]
fn variables_are_not_refused_and_stay_unexpanded() {
    let analysis = assert_ok("echo $HOME ${USER} \"$PWD\"");
    assert_eq!(argvs(&analysis), [vec!["echo", "$HOME", "${USER}", "$PWD"]]);
    assert!(analysis.segments[0].has_parameter_expansion);
    assert!(!assert_ok("echo '$HOME' \\$HOME").segments[0].has_parameter_expansion);
}

#[test]
fn unbalanced_quotes_and_trailing_escapes_are_refused() {
    assert_refused("echo 'abc", "unterminated shell quote/escape");
    assert_refused("echo \"abc", "unterminated shell quote/escape");
    assert_refused("echo abc\\", "unterminated shell quote/escape");
}

#[test]
fn nothing_to_run_is_an_empty_command() {
    for command in ["", "   ", "\t", "# just a comment"] {
        assert_refused(command, "empty command");
    }
}

#[test]
fn empty_pipeline_segments_are_refused() {
    assert_refused("a | | b", "empty pipeline segment");
    assert_refused("a |", "empty pipeline segment");
    assert_refused("| a", "empty pipeline segment");
    assert_refused("a && | b", "empty pipeline segment");
}

#[test]
fn an_unclosed_parameter_expansion_cannot_be_parsed() {
    assert_refused("echo ${HOME", "unable to parse shell segment");
}

#[test]
fn substitutions_inside_a_parameter_expansion_are_refused() {
    assert_refused("echo ${x:-$(id)}", "unsupported shell token: $()");
    assert_refused("echo ${x:-`id`}", "unsupported shell token: `");
    assert_refused("echo \"${x:-\"$(id)\"}\"", "unsupported shell token: $()");
}

// --- comments, words and raw text ---------------------------------------------------------

#[test]
fn a_comment_after_a_command_is_ignored() {
    let analysis = assert_ok("echo hi # rm -rf /");
    assert_eq!(argvs(&analysis), [vec!["echo", "hi"]]);
    assert_eq!(analysis.segments[0].raw, "echo hi");
}

#[test]
fn a_comment_ends_at_the_newline_not_at_the_end_of_the_input() {
    assert_refused("ls # note\nrm -rf /", "unsupported shell token: \n");
}

#[test]
fn a_hash_inside_a_word_is_not_a_comment() {
    let analysis = assert_ok("echo a#b c");
    assert_eq!(argvs(&analysis), [vec!["echo", "a#b", "c"]]);
    assert!(analysis.segments[0].hazards.is_empty());
}

#[test]
fn a_hash_after_an_operator_starts_a_comment_as_in_sh() {
    // Were `#b` a word, both would be understood; as comments they leave an operator dangling.
    assert_refused("echo a &&#b", "unsupported shell token: &");
    assert_refused("echo a|#b", "empty pipeline segment");
}

#[test]
fn raw_text_is_the_segment_source_between_operators() {
    let analysis = assert_ok("ls -la  &&  echo \"a b\"|wc -l");
    let raws: Vec<&str> = analysis.segments.iter().map(|s| s.raw.as_str()).collect();
    assert_eq!(raws, ["ls -la", "echo \"a b\"", "wc -l"]);
}

#[test]
fn a_parameter_expansion_with_spaces_is_one_word_as_in_sh() {
    let analysis = assert_ok("echo ${x:-a b} c");
    assert_eq!(argvs(&analysis), [vec!["echo", "${x:-a b}", "c"]]);
}

#[test]
fn empty_quotes_are_an_empty_argument() {
    let analysis = assert_ok("printf '%s' '' \"\"");
    assert_eq!(argvs(&analysis), [vec!["printf", "%s", "", ""]]);
}

#[test]
fn backslashes_outside_quotes_escape_the_next_character() {
    let analysis = assert_ok("echo a\\ b \\; \\& \\| \\$x \\(");
    assert_eq!(
        argvs(&analysis),
        [vec!["echo", "a b", ";", "&", "|", "$x", "("]]
    );
    // An escaped `$` does not hide the `(` after it: sh would not accept it either.
    assert_refused("echo \\$(x)", "unsupported shell token: (");
}

#[test]
fn inside_double_quotes_only_some_characters_are_escaped() {
    let analysis = assert_ok(r#"echo "a\qb \\ \" \$ \`""#);
    assert_eq!(argvs(&analysis), [vec!["echo", "a\\qb \\ \" $ `"]]);
}

#[test]
fn operators_need_no_spaces_around_them() {
    let analysis = assert_ok("a&&b||c;d|e");
    assert_eq!(heads(&analysis), ["a", "b", "c", "d", "e"]);
    assert_eq!(
        ops(&analysis),
        [
            None,
            Some(ShellOperator::And),
            Some(ShellOperator::Or),
            Some(ShellOperator::Sequence),
            Some(ShellOperator::Pipe)
        ]
    );
}

#[test]
fn operator_names_are_as_written() {
    let names: Vec<&str> = [
        ShellOperator::And,
        ShellOperator::Or,
        ShellOperator::Sequence,
        ShellOperator::Pipe,
    ]
    .into_iter()
    .map(ShellOperator::as_str)
    .collect();
    assert_eq!(names, ["&&", "||", ";", "|"]);
}

// --- heredocs -----------------------------------------------------------------------------

#[test]
fn heredoc_redirections_are_not_arguments() {
    let analysis = assert_ok("cat <<EOF -n\nx\nEOF");
    assert_eq!(argvs(&analysis), [vec!["cat", "-n"]]);
    assert_eq!(analysis.segments[0].raw, "cat <<EOF -n");
}

#[test]
fn a_dash_heredoc_strips_leading_tabs() {
    let analysis = assert_ok("cat <<-EOF\n\t\tindented\n\tEOF");
    let heredoc = &analysis.segments[0].heredocs[0];
    assert!(heredoc.strip_tabs);
    assert_eq!(heredoc.body, "indented\n");
}

#[test]
fn a_double_quoted_delimiter_makes_the_body_literal() {
    let analysis = assert_ok("cat <<\"END\"\n$(id) `x` ${y}\nEND\n");
    let heredoc = &analysis.segments[0].heredocs[0];
    assert_eq!(heredoc.delimiter, "END");
    assert!(heredoc.quoted);
    assert!(analysis.segments[0].hazards.is_empty());
}

#[test]
fn a_chain_operator_after_a_heredoc_start_is_refused_as_openclaw_does() {
    for command in [
        "cat <<EOF && touch x\nbody\nEOF",
        "cat <<EOF; touch x\nbody\nEOF",
        "cat <<EOF || touch x\nbody\nEOF",
        "cat <<A && cat <<B\none\nA\ntwo\nB",
    ] {
        assert_refused(command, "unterminated heredoc");
    }
    // A pipe stays inside the segment, as in OpenClaw's pipeline split.
    let analysis = assert_ok("/usr/bin/cat << 'EOF' | /usr/bin/grep pattern\npattern\nEOF");
    assert_eq!(analysis.segments[0].heredocs[0].body, "pattern\n");
    assert_eq!(analysis.segments[1].argv[0], "/usr/bin/grep");
}

#[test]
fn a_command_line_after_a_heredoc_body_is_refused() {
    assert_refused("cat <<EOF\nx\nEOF\nrm -rf /", "unsupported shell token: \n");
    // Blank lines are fine.
    assert_ok("cat <<EOF\nx\nEOF\n\n");
}

#[test]
fn a_doubled_backslash_does_not_escape_a_substitution_in_a_heredoc() {
    assert_refused(
        "cat <<EOF\n\\\\$(id)\nEOF",
        "command substitution in unquoted heredoc",
    );
}

#[test]
fn bash_arithmetic_in_an_unquoted_heredoc_is_accepted_as_in_the_spec() {
    // §7.3 refuses only `` ` ``, `$(` and `${` in an unquoted body. The rebuilt command
    // carries every body literally, so `$[x]` reaches the program as those four characters.
    assert_ok("cat <<EOF\n$[x]\nEOF");
    assert_ok("cat <<'EOF'\n$[x]\nEOF");
}

#[test]
fn a_heredoc_without_a_delimiter_is_refused() {
    assert_refused("cat <<", "unterminated heredoc");
    assert_refused("cat << | wc", "unterminated heredoc");
    assert_refused("cat <<#x\nEOF", "unterminated heredoc");
    assert_refused("cat <<EOF", "unterminated heredoc");
}

#[test]
fn a_segment_with_only_a_heredoc_is_empty() {
    assert_refused("<<EOF\nx\nEOF", "empty command");
}

// --- hazards ------------------------------------------------------------------------------

#[test]
fn unquoted_ifs_is_a_hazard_and_stays_in_the_word() {
    let analysis = assert_ok("cat${IFS}/etc/passwd");
    assert_eq!(argvs(&analysis), [vec!["cat${IFS}/etc/passwd"]]);
    assert_eq!(analysis.segments[0].hazards, [ShellHazard::IfsExpansion]);
    for command in [
        "cat$IFS/etc/passwd",
        "echo ${IFS:0:1}",
        "echo ${#IFS}",
        "echo ${x:-$IFS}",
        "IFS=, read a b",
        "export IFS=/",
        "read IFS",
    ] {
        assert_eq!(
            hazards_of(command),
            [ShellHazard::IfsExpansion],
            "{command:?}"
        );
    }
}

#[test]
fn quoted_or_similar_names_are_not_an_ifs_hazard() {
    for command in [
        "echo \"$IFS\"",
        "echo '$IFS'",
        "echo \\$IFS",
        "echo $IFSX ${IFS_2}",
    ] {
        assert_eq!(hazards_of(command), [], "{command:?}");
    }
}

#[test]
fn unquoted_brace_expansion_is_a_hazard() {
    for command in [
        "echo {a,b}",
        "echo x{1..3}",
        "rm -rf /tmp/{a,}",
        "echo {a,'b c'}",
        // bash expands this one to `}}c` and `}d`.
        "echo }{}c,d}",
    ] {
        assert_eq!(
            hazards_of(command),
            [ShellHazard::BraceExpansion],
            "{command:?}"
        );
    }
    assert_eq!(argvs(&assert_ok("echo {a,b}")), [vec!["echo", "{a,b}"]]);
}

#[test]
fn braces_that_do_not_expand_are_not_a_hazard() {
    for command in [
        "echo '{a,b}'",
        "echo \\{a,b\\}",
        "find . -name x -exec echo {} \\;",
        "echo {a}",
        "echo ${x,}",
        "echo {a, b}",
        "echo a,b..c",
    ] {
        assert_eq!(hazards_of(command), [], "{command:?}");
    }
}

#[test]
fn a_hash_after_empty_quotes_is_an_argument_and_a_hazard() {
    for command in ["echo ''#x", "echo \"\"#x", "echo ''\"\"#x"] {
        let analysis = assert_ok(command);
        assert_eq!(argvs(&analysis), [vec!["echo", "#x"]], "{command:?}");
        assert_eq!(
            analysis.segments[0].hazards,
            [ShellHazard::EmptyQuotesBeforeHash]
        );
    }
}

#[test]
fn non_ascii_whitespace_does_not_split_and_is_a_hazard() {
    for space in [
        '\u{a0}', '\u{2000}', '\u{2009}', '\u{200b}', '\u{3000}', '\u{feff}', '\u{0b}',
    ] {
        let command = format!("echo{space}hi there");
        let analysis = assert_ok(&command);
        assert_eq!(
            argvs(&analysis),
            [vec![format!("echo{space}hi").as_str(), "there"]],
            "{space:?}"
        );
        assert_eq!(
            analysis.segments[0].hazards,
            [ShellHazard::NonAsciiWhitespace]
        );
        let quoted = format!("echo \"a{space}b\"");
        assert_eq!(hazards_of(&quoted), [ShellHazard::NonAsciiWhitespace]);
    }
}

#[test]
fn non_ascii_whitespace_inside_single_quotes_is_not_a_hazard() {
    assert_eq!(hazards_of("echo 'a\u{a0}b'"), []);
    assert_eq!(hazards_of("echo héllo wörld"), []);
}

#[test]
fn a_partly_quoted_heredoc_delimiter_is_quoted_and_a_hazard() {
    for (command, delimiter) in [
        ("cat <<'EO'F\n$(id)\nEOF", "EOF"),
        ("cat <<E\"OF\"\n$(id)\nEOF", "EOF"),
        ("cat <<\\EOF\n$(id)\nEOF", "EOF"),
    ] {
        let analysis = assert_ok(command);
        let heredoc = &analysis.segments[0].heredocs[0];
        assert_eq!(heredoc.delimiter, delimiter, "{command:?}");
        assert!(heredoc.quoted, "{command:?}");
        assert_eq!(heredoc.body, "$(id)\n");
        assert_eq!(
            analysis.segments[0].hazards,
            [ShellHazard::PartlyQuotedHeredocDelimiter]
        );
    }
}

#[test]
fn bash_dollar_quoting_is_a_hazard() {
    let analysis = assert_ok("echo $'\\x72\\x6d'");
    assert_eq!(argvs(&analysis), [vec!["echo", "$\\x72\\x6d"]]);
    assert_eq!(analysis.segments[0].hazards, [ShellHazard::AnsiCQuote]);
    assert_eq!(hazards_of("echo $\"x\""), [ShellHazard::AnsiCQuote]);
    assert_eq!(hazards_of("echo \"$'x'\""), []);
}

#[test]
fn hazards_belong_to_their_own_segment() {
    let analysis = assert_ok("ls && echo {a,b} | wc");
    let hazards: Vec<&[ShellHazard]> = analysis
        .segments
        .iter()
        .map(|s| s.hazards.as_slice())
        .collect();
    assert_eq!(
        hazards,
        [&[][..], &[ShellHazard::BraceExpansion][..], &[][..]]
    );
    assert!(analysis.has_hazards());
}

#[test]
fn hazard_names_are_stable_kebab_case() {
    let names: Vec<&str> = [
        ShellHazard::IfsExpansion,
        ShellHazard::BraceExpansion,
        ShellHazard::EmptyQuotesBeforeHash,
        ShellHazard::NonAsciiWhitespace,
        ShellHazard::PartlyQuotedHeredocDelimiter,
        ShellHazard::AnsiCQuote,
    ]
    .into_iter()
    .map(ShellHazard::as_str)
    .collect();
    assert_eq!(
        names,
        [
            "ifs-expansion",
            "brace-expansion",
            "empty-quotes-before-hash",
            "non-ascii-whitespace",
            "partly-quoted-heredoc-delimiter",
            "ansi-c-quote"
        ]
    );
    let json = serde_json::to_value(ShellHazard::PartlyQuotedHeredocDelimiter).unwrap();
    assert_eq!(json, "partly-quoted-heredoc-delimiter");
}

// --- Windows ------------------------------------------------------------------------------

#[test]
fn windows_splits_on_spaces_and_keeps_backslashes() {
    let analysis = windows("dir C:\\Users \"C:\\Program Files\"");
    assert!(analysis.ok);
    assert_eq!(
        argvs(&analysis),
        [vec!["dir", "C:\\Users", "C:\\Program Files"]]
    );
}

#[test]
fn windows_refuses_shell_characters_outside_quotes() {
    for (command, token) in [
        ("a | b", '|'),
        ("a > b", '>'),
        ("a < b", '<'),
        ("a ^& b", '^'),
        ("(a)", '('),
        ("echo %PATH%", '%'),
        ("echo !x!", '!'),
        ("echo `x", '`'),
        ("a\nb", '\n'),
    ] {
        let analysis = windows(command);
        assert_eq!(
            analysis.reason,
            Some(format!("unsupported windows shell token: {token}")),
            "{command:?}"
        );
    }
}

#[test]
fn windows_keeps_a_semicolon_in_its_word_as_the_spec_does() {
    // The spec's Windows tokenizer does not refuse `;`. Nothing runs on Windows without
    // approval anyway (no rebuilt command exists there), so refusing it would change no
    // decision.
    let analysis = windows("a ; b");
    assert!(analysis.ok);
    assert_eq!(argvs(&analysis), [vec!["a", ";", "b"]]);
}

#[test]
fn windows_refuses_percent_backtick_and_newline_even_inside_quotes() {
    for (command, token) in [
        ("echo \"%PATH%\"", '%'),
        ("echo \"a`b\"", '`'),
        ("echo \"a\nb\"", '\n'),
    ] {
        assert_eq!(
            windows(command).reason,
            Some(format!("unsupported windows shell token: {token}")),
            "{command:?}"
        );
    }
    let analysis = windows("echo \"a | b & c\"");
    assert_eq!(argvs(&analysis), [vec!["echo", "a | b & c"]]);
}

#[test]
fn windows_refuses_powershell_variables() {
    for command in [
        "echo $env:PATH",
        "echo \"$x\"",
        "echo ${x}",
        "echo $(id)",
        "echo $?",
    ] {
        assert_eq!(
            windows(command).reason.as_deref(),
            Some("unsupported windows shell token: $"),
            "{command:?}"
        );
    }
    assert!(windows("echo 5$ $").ok);
}

#[test]
fn windows_unwraps_powershell_command() {
    let analysis = windows(
        "powershell.exe -NoProfile -ExecutionPolicy Bypass -Command \"Get-ChildItem C:\\Users\"",
    );
    assert!(analysis.ok, "{analysis:?}");
    assert_eq!(argvs(&analysis), [vec!["Get-ChildItem", "C:\\Users"]]);
    let analysis = windows("pwsh -c Get-Date");
    assert_eq!(argvs(&analysis), [vec!["Get-Date"]]);
}

#[test]
fn windows_checks_the_unwrapped_powershell_payload() {
    let analysis = windows("powershell -Command \"Get-Process | whoami\"");
    assert_eq!(
        analysis.reason.as_deref(),
        Some("unsupported windows shell token: |")
    );
    // `;` stays in its word, as in the spec; on Windows nothing runs without approval.
    let analysis = windows("powershell -Command \"Get-Process; whoami\"");
    assert_eq!(argvs(&analysis), [vec!["Get-Process;", "whoami"]]);
}

#[test]
fn windows_does_not_unwrap_encoded_powershell() {
    let analysis = windows("powershell -EncodedCommand ZQBjAGgAbwA=");
    assert_eq!(
        argvs(&analysis),
        [vec!["powershell", "-EncodedCommand", "ZQBjAGgAbwA="]]
    );
}

#[test]
fn windows_strips_the_call_operator() {
    let analysis = windows("& \"C:\\Program Files\\Git\\bin\\git.exe\" status");
    assert_eq!(
        argvs(&analysis),
        [vec!["C:\\Program Files\\Git\\bin\\git.exe", "status"]]
    );
}

#[test]
fn windows_refuses_unterminated_quotes_and_empty_commands() {
    assert_eq!(
        windows("echo \"abc").reason.as_deref(),
        Some("unterminated shell quote/escape")
    );
    assert_eq!(windows("   ").reason.as_deref(), Some("empty command"));
}

// --- split_shell_args and quote_shell_arg -------------------------------------------------

#[test]
fn split_shell_args_follows_the_step_4_rules() {
    assert_eq!(
        split_shell_args(r#"a 'b c' "d \" e" f\ g "h\q""#),
        Some(vec![
            "a".to_string(),
            "b c".to_string(),
            "d \" e".to_string(),
            "f g".to_string(),
            "h\\q".to_string()
        ])
    );
    assert_eq!(split_shell_args("a #comment"), Some(vec!["a".to_string()]));
    assert_eq!(split_shell_args("#only"), Some(vec![]));
    assert_eq!(split_shell_args("a''#b"), Some(vec!["a#b".to_string()]));
    assert_eq!(split_shell_args("''"), Some(vec![String::new()]));
}

#[test]
fn split_shell_args_gives_none_for_unterminated_quotes() {
    assert_eq!(split_shell_args("a 'b"), None);
    assert_eq!(split_shell_args("a \"b"), None);
    assert_eq!(split_shell_args("a\\"), None);
    assert_eq!(split_shell_args("a ${b"), None);
}

#[test]
fn split_shell_args_gives_operators_no_meaning() {
    assert_eq!(
        split_shell_args("a|b ; $(c)"),
        Some(vec!["a|b".to_string(), ";".to_string(), "$(c)".to_string()])
    );
}

#[test]
fn quote_shell_arg_single_quotes_everything() {
    assert_eq!(quote_shell_arg("it's"), "'it'\\''s'");
    assert_eq!(quote_shell_arg(""), "''");
    assert_eq!(quote_shell_arg("$(id) `x` ${y}"), "'$(id) `x` ${y}'");
}

// --- bounded work -------------------------------------------------------------------------

#[test]
fn megabyte_inputs_are_analysed_in_bounded_time() {
    const MB: usize = 1 << 20;
    let heredoc = format!("cat <<EOF\n{}EOF", "line $x\n".repeat(MB / 8));
    let many_heredocs = format!("cat {}\n{}", "<<E ".repeat(MB / 8), "E\n".repeat(MB / 8));
    let inputs = [
        "{".repeat(MB),
        "{a,".repeat(MB / 3),
        "${".repeat(MB / 2),
        "${x:-".repeat(MB / 8) + &"}".repeat(MB / 8),
        "'".repeat(MB),
        "\"".repeat(MB),
        format!("\"{}\"", "\\\"".repeat(MB / 2)),
        "a && ".repeat(MB / 5) + "b",
        "a | ".repeat(MB / 4) + "b",
        "|".repeat(MB),
        heredoc,
        many_heredocs,
        "\u{a0}".repeat(MB / 2),
        "$IFS".repeat(MB / 4),
        "''#".repeat(MB / 3),
        "x".repeat(MB),
        "# ".repeat(MB / 2),
        "\\".repeat(MB),
        "$".repeat(MB),
    ];
    for input in &inputs {
        for platform in [Platform::Linux, Platform::Windows] {
            let started = Instant::now();
            let analysis = analyze_shell_command(input, platform);
            let elapsed = started.elapsed();
            assert!(
                elapsed < Duration::from_secs(10),
                "{} bytes starting {:?} took {elapsed:?}",
                input.len(),
                &input[..input.len().min(12)]
            );
            assert_eq!(analysis.ok, analysis.reason.is_none());
        }
        let started = Instant::now();
        let _ = split_shell_args(input);
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}

// --- properties ---------------------------------------------------------------------------

/// Shell-ish fragments that combine into the inputs most likely to confuse a tokenizer.
fn shell_soup() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("&&".to_string()),
        Just("||".to_string()),
        Just("|".to_string()),
        Just(";".to_string()),
        Just("&".to_string()),
        Just("'".to_string()),
        Just("\"".to_string()),
        Just("\\".to_string()),
        Just("$".to_string()),
        Just("${".to_string()),
        Just("}".to_string()),
        Just("{".to_string()),
        Just(",".to_string()),
        Just("..".to_string()),
        Just("$IFS".to_string()),
        Just("<<".to_string()),
        Just("<<-".to_string()),
        Just("EOF".to_string()),
        Just("'EOF'".to_string()),
        Just("\n".to_string()),
        Just("\t".to_string()),
        Just(" ".to_string()),
        Just("#".to_string()),
        Just("''".to_string()),
        Just("$(".to_string()),
        Just("`".to_string()),
        Just("\u{a0}".to_string()),
        Just("\u{3000}".to_string()),
        Just("é".to_string()),
        Just("powershell -Command ".to_string()),
        "[a-z/.=-]{1,6}",
    ];
    prop::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
}

/// The properties every analysis must have, whatever the input.
/// Checks every platform's analysis of `input`; `Ok(true)` when the Linux one was ok, so the
/// consistency checks below ran.
fn check_analysis(input: &str) -> Result<bool, TestCaseError> {
    let mut linux_ok = false;
    for platform in [Platform::Linux, Platform::Darwin, Platform::Windows] {
        let analysis = analyze_shell_command(input, platform);
        prop_assert_eq!(analysis.ok, analysis.reason.is_none());
        if !analysis.ok {
            prop_assert!(analysis.segments.is_empty());
            continue;
        }
        linux_ok |= platform == Platform::Linux;
        prop_assert!(!analysis.segments.is_empty());
        prop_assert_eq!(analysis.segments[0].joined_by, None);
        for segment in &analysis.segments {
            prop_assert!(!segment.argv.is_empty(), "empty argv in {:?}", analysis);
            let rendered: Vec<String> = segment.argv.iter().map(|a| quote_shell_arg(a)).collect();
            let rendered = rendered.join(" ");
            prop_assert_eq!(split_shell_args(&rendered), Some(segment.argv.clone()));
            if !platform.is_windows() && segment.heredocs.is_empty() {
                prop_assert_eq!(split_shell_args(&segment.raw), Some(segment.argv.clone()));
            }
        }
    }
    Ok(linux_ok)
}

// The consistency checks run only on analyses that are ok, so each test counts them and fails
// below a floor (measured on Linux: 250–258 of 1 024 arbitrary strings, 47–51 soups).

#[test]
fn arbitrary_strings_never_panic_and_ok_analyses_are_consistent() {
    run_with_floor(
        "arbitrary_strings_never_panic_and_ok_analyses_are_consistent",
        any::<String>(),
        1024,
        100,
        |input| check_analysis(&input),
    );
}

#[test]
fn shell_soups_never_panic_and_ok_analyses_are_consistent() {
    run_with_floor(
        "shell_soups_never_panic_and_ok_analyses_are_consistent",
        shell_soup(),
        1024,
        15,
        |input| check_analysis(&input),
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn quoted_arguments_analyse_back_to_themselves(
        argv in prop::collection::vec(any::<String>(), 1..6)
    ) {
        // A line continuation inside an argument is refused by step 1 even when quoted.
        prop_assume!(argv.iter().all(|a| !a.contains("\\\n") && !a.contains("\\\r")));
        // Words naming IFS are flagged whatever their quoting.
        prop_assume!(argv.iter().all(|a| a != "IFS" && !a.starts_with("IFS=") && !a.starts_with("IFS+=")));
        let command: Vec<String> = argv.iter().map(|a| quote_shell_arg(a)).collect();
        let analysis = posix(&command.join(" "));
        prop_assert!(analysis.ok, "{:?}", analysis);
        prop_assert_eq!(analysis.segments.len(), 1);
        prop_assert_eq!(&analysis.segments[0].argv, &argv);
        prop_assert!(analysis.segments[0].hazards.is_empty());
    }
}
