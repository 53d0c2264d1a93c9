//! `run`'s flags: old spellings kept.

#[test]
fn max_requests_keeps_its_old_spelling_as_a_hidden_alias() {
    use clap::{CommandFactory, FromArgMatches};
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        run: super::RunArgs,
    }
    let parse = |flag: &str| {
        let args = ["headstart", "--provider", "openai", "--model", "m", flag, "3", "hi"];
        let matches = Cli::command().try_get_matches_from(args).expect("parses");
        Cli::from_arg_matches(&matches).expect("valid").run.model.max_requests
    };
    assert_eq!((parse("--max-requests"), parse("--max-turns")), (3, 3));
    let help = Cli::command().render_long_help().to_string();
    assert!(
        help.contains("--max-requests") && !help.contains("--max-turns <"),
        "{help}"
    );
}
